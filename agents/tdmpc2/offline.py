"""Offline multi-task TD-MPC2 (docs/design.md §7.6; reference ``trainer/offline_trainer.py:41-92``
@5f6fade): one agent over a task set, trained from a pooled dataset without acting.

``train(state, ticks, data)`` is one ``lax.scan`` with one update per tick (``n_timesteps``
counts updates, as the reference's ``steps``): a batch of ``batch_size`` (1024 in the
reference's README) ``H + 1``-row windows, each a uniform episode of the pooled dataset and a
uniform start inside that episode's own ``[0, T_i - H]``, with the episodes' task ids as the
update's :class:`~agents.tdmpc2.multitask.TaskContext`. No planning in training. ``data`` is
the dataset (``shared_inputs``): the launcher passes it to the compiled program as an
unbatched argument shared by every seed (agent_api), never a closed-over constant nor a
per-seed copy (tested on the lowered program). The scan and the chunk's metrics are the
shared skeleton's (``agents/common/loop.py``): ``Train/*`` are means over the chunk's
updates (T50).

``evaluate`` runs every task in turn (a Python loop in the traced function: one scan per
task, the task's own env and episode length) with the eval-mode planner of the padded model
(observations zero-padded to ``O_max``, the env given the action prefix ``[:A_i]``),
``eval_episodes`` fresh episodes each (10: the offline trainer's protocol). It logs each
task's mean return, their mean, and the normalised score ``mean_i(return_i / 10)`` (the
reference's DMC score). The design asks for a host loop of per-task programs; one program
holds them all here (deviation T47: the launcher compiles one evaluation per agent).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from agents.common.loop import EpisodeEnds, add_metrics, evaluate, run_episodes, train_chunk
from agents.tdmpc2.agent import batched_policy
from agents.tdmpc2.buffer import gather_windows
from agents.tdmpc2.dataset import MultiTaskDataset, select_tasks
from agents.tdmpc2.multitask import TaskSet, multitask_world_model, pad_obs
from agents.tdmpc2.multitask_config import MultiTaskConfig
from agents.tdmpc2.planner import draw_plan_noise, plan
from agents.tdmpc2.train_state import TDMPC2TrainState, init_train_state
from agents.tdmpc2.update import draw_update_noise, update
from agents.tdmpc2.world_model import WorldModel


@struct.dataclass
class OfflineState:
    train: TDMPC2TrainState
    key: jax.Array
    tick: jax.Array  # [] int32: next absolute tick = updates done
    n_evals: jax.Array  # [] int32
    last_metrics: dict  # the last update's metrics (logged: their chunk means, T50)


@struct.dataclass
class Episodes:
    """The dataset on the devices: obs-aligned episodes plus per-episode task and T."""

    obs: jax.Array  # [N, L, O_max]
    action: jax.Array  # [N, L, A_max]
    reward: jax.Array  # [N, L]
    task: jax.Array  # [N] int32
    length: jax.Array  # [N] int32, T_i


def sample_windows(data: Episodes, key: jax.Array, batch: int, horizon: int):
    """``batch`` windows of ``horizon + 1`` rows: a uniform episode of the pool, then a
    uniform start in ``[0, T_i - H]`` of that episode (windows never cross an episode's last
    row, as the single-task sampler). Returns ``(Batch, task ids [B])``."""
    k_ep, k_start = jax.random.split(key)
    ep = jax.random.randint(k_ep, (batch,), 0, data.task.shape[0])
    start = jax.random.randint(k_start, (batch,), 0, data.length[ep] - horizon + 1)
    return gather_windows(data, ep, start, horizon), data.task[ep]


def load_dataset(cfg: MultiTaskConfig) -> MultiTaskDataset:
    """The dataset at ``cfg.dataset``, its hash checked against ``cfg.dataset_sha256``."""
    if not cfg.dataset:
        raise ValueError(
            "agent.dataset is empty; give a dataset directory (python -m launcher.export)"
        )
    data = MultiTaskDataset.load(cfg.dataset)
    if cfg.dataset_sha256 is not None and data.content_hash() != cfg.dataset_sha256:
        raise ValueError(
            f"agent.dataset {cfg.dataset} has content hash {data.content_hash()[:12]}..., "
            f"not agent.dataset_sha256={cfg.dataset_sha256[:12]}..."
        )
    return data


@dataclasses.dataclass(frozen=True)
class TDMPC2MultiTask:
    """Offline TD-MPC2 on the task set ``env`` (``envs.task_set_env.TaskSetEnv`` or anything with
    ``names`` and ``member_env(i)``) for ``total_env_steps`` updates.

    ``data`` (optional) is an in-memory dataset; by default ``cfg.dataset`` is loaded.
    ``batched``: the layout of the Q ensemble and of the evaluation planner over envs
    (:class:`~agents.tdmpc2.agent.TDMPC2`; None: the backend's).
    """

    cfg: MultiTaskConfig
    env: Any
    total_env_steps: int
    data: MultiTaskDataset | None = None
    batched: bool | None = None

    def __post_init__(self) -> None:
        names = self.task_names()
        members = tuple(self.env.member_env(self.env.names.index(n)) for n in names)
        specs = [m.spec for m in members]
        tasks = TaskSet.for_config(
            self.cfg,
            names,
            [s.obs_size for s in specs],
            [s.action_size for s in specs],
            [s.episode_length for s in specs],
        )
        data = self.data if self.data is not None else load_dataset(self.cfg)
        data = select_tasks(data, tasks.names)
        for info, spec in zip(data.tasks, specs, strict=True):
            have = (info.obs_dim, info.action_dim, info.episode_length)
            want = (spec.obs_size, spec.action_size, spec.episode_length)
            if have != want:
                raise ValueError(
                    f"task {info.name!r}: the dataset's (obs, action, T) = {have}, the env's "
                    f"{want}; export the dataset from runs of the same env settings"
                )
        cfg = dataclasses.replace(tasks.resolve(self.cfg), dataset_sha256=data.content_hash())
        for name, value in (("cfg", cfg), ("data", data)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "members", members)
        object.__setattr__(self, "tasks", tasks)

    def task_names(self) -> tuple[str, ...]:
        """``cfg.tasks`` (checked against the task set) or every member of the set."""
        have = tuple(self.env.names)
        names = tuple(self.cfg.tasks) or have
        unknown = [n for n in names if n not in have]
        if unknown or len(set(names)) != len(names):
            what = f"{', '.join(unknown)} not in the task set" if unknown else "a task twice"
            raise ValueError(
                f"agent.tasks={list(names)}: {what}; choose distinct members of "
                f"{', '.join(have)} (or [] for all)"
            )
        return names

    # ----------------------------------------------------------- components
    @property
    def wm(self) -> WorldModel:
        cfg = self.cfg
        return multitask_world_model(cfg, self.tasks, task_dim=cfg.task_dim, batched=self.batched)

    def shared_inputs(self) -> Episodes:
        """The dataset as device-ready arrays (agent_api: shared by every seed)."""
        d = self.data
        return Episodes(
            obs=jnp.asarray(d.obs),
            action=jnp.asarray(d.action),
            reward=jnp.asarray(d.reward),
            task=jnp.asarray(d.task, jnp.int32),
            length=jnp.asarray(d.episode_lengths(), jnp.int32),
        )

    def ticks_for(self, env_steps: int) -> int:
        """One tick per update (``n_timesteps`` counts updates)."""
        return int(env_steps)

    def memory_bytes(self) -> dict[str, int]:
        """Bytes: the dataset (once, shared by the seeds) and the train state per seed."""
        shapes = jax.eval_shape(lambda: self.init_train(jax.random.key(0)))
        state = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(shapes))
        d = self.data
        data = sum(int(np.asarray(x).nbytes) for x in (d.obs, d.action, d.reward, d.task))
        return {"dataset_shared": data, "train_state": int(state)}

    def check(self, metrics: Mapping[str, Any]) -> None:
        """Nothing to check: an offline run steps no env."""

    def migrate(self, state: OfflineState, saved_env_steps: int) -> OfflineState:
        """Nothing depends on the run's length."""
        return state

    def counters(self, state: OfflineState) -> dict[str, jax.Array]:
        """timestep = env_frames = updates (no env is stepped, docs/design.md §7.6)."""
        return {
            "timestep": state.tick,
            "env_frames": state.tick,
            "Train/n_updates": state.tick,
        }

    # ----------------------------------------------------------------- init
    def init_train(self, key: jax.Array) -> TDMPC2TrainState:
        """A fresh learner state; with ``q_scale_per_task`` (T49, a what-if) its RunningScale
        is one per task, ``[num_tasks]``."""
        train = init_train_state(self.wm, key)
        if self.cfg.q_scale_per_task:
            train = train.replace(q_scale=jnp.ones((len(self.tasks.names),), jnp.float32))
        return train

    def init(self, key: jax.Array) -> OfflineState:
        k_train, key = jax.random.split(key)
        train = self.init_train(k_train)
        # shapes only: no device copy of the dataset while tracing init
        d, f32, i32 = self.data, jnp.float32, jnp.int32
        n = (d.task.shape[0],)
        episodes = Episodes(
            obs=jax.ShapeDtypeStruct(d.obs.shape, f32),
            action=jax.ShapeDtypeStruct(d.action.shape, f32),
            reward=jax.ShapeDtypeStruct(d.reward.shape, f32),
            task=jax.ShapeDtypeStruct(n, i32),
            length=jax.ShapeDtypeStruct(n, i32),
        )
        metrics = jax.eval_shape(lambda e: self._update(train, e, key)[1], episodes)
        zero = jnp.zeros((), jnp.int32)
        return OfflineState(
            train=train,
            key=key,
            tick=zero,
            n_evals=zero,
            last_metrics=jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metrics),
        )

    # ---------------------------------------------------------------- train
    def _update(self, train: TDMPC2TrainState, data: Episodes, key: jax.Array):
        k_batch, k_noise = jax.random.split(key)
        batch, ids = sample_windows(data, k_batch, self.cfg.batch_size, self.cfg.horizon)
        noise = draw_update_noise(k_noise, self.cfg, self.tasks.action_max)
        return update(self.wm, self.cfg, train, batch, noise, task=self.tasks.context(ids))

    def train(
        self, state: OfflineState, ticks: jax.Array, data: Episodes
    ) -> tuple[OfflineState, dict]:
        """One update per absolute tick of ``ticks``, keys folded with the tick; the chunk's
        metrics as ``agents.common.loop.train_chunk`` reduces them (no env: no episodes)."""

        def tick(state, i, sums):
            train, m = self._update(state.train, data, jax.random.fold_in(state.key, i))
            state = state.replace(train=train, tick=i + 1, last_metrics=m)
            return state, add_metrics(sums, m), EpisodeEnds.none()

        return train_chunk(tick, self.counters, state, ticks, state.last_metrics)

    # -------------------------------------------------------------- evaluate
    def policy_fn(self, params: dict, task_id: int, eval_mode: bool = True):
        """The padded planner for task ``task_id``'s env (obs ``[n, O_i]``, actions
        ``[n, A_i]``; carry prev_mean ``[n, H, A_max]``)."""
        wm, cfg, tasks = self.wm, self.cfg, self.tasks
        ctx = tasks.context(jnp.asarray(task_id, jnp.int32))
        A_i, A_max = tasks.action_dims[task_id], tasks.action_max

        def decide(o, m, t0, k):
            nz = draw_plan_noise(k, cfg, A_max)
            o = pad_obs(o, tasks.obs_max)
            return plan(wm, cfg, params, o, m, t0, nz, eval_mode=eval_mode, task=ctx)[:2]

        inner = batched_policy(decide, self.batched)

        def policy(prev_mean, obs, is_first, key):
            action, mean, extra = inner(prev_mean, obs, is_first, key)
            return action[:, :A_i], mean, extra

        return policy

    def evaluate(self, state: OfflineState, key: jax.Array) -> tuple[OfflineState, dict]:
        """``eval_episodes`` fresh episodes of every task (module docstring)."""
        n, shape = self.cfg.eval_episodes, (self.cfg.horizon, self.tasks.action_max)

        def run(key):
            per_task, means = [], []
            metrics: dict[str, jax.Array] = {}
            for i, (name, env) in enumerate(zip(self.tasks.names, self.members, strict=True)):
                policy = self.policy_fn(state.train.params, i)
                carry = jnp.zeros((n, *shape))
                returns = run_episodes(env, n, "static", policy, carry, jax.random.fold_in(key, i))
                per_task.append(returns)
                means.append(jnp.mean(returns))
                metrics[f"Eval/{name}/episodic mean reward"] = means[-1]
            means = jnp.stack(means)
            return {
                **metrics,
                "Eval/episodic mean reward": jnp.mean(means),
                "Eval/normalised score": jnp.mean(means / 10.0),
                "Eval/episode returns": jnp.concatenate(per_task),
            }

        return evaluate(state, key, run)


def make(config: MultiTaskConfig, env: Any, total_env_steps: int) -> TDMPC2MultiTask:
    """The launcher's factory (``agents.tdmpc2.entry:MULTITASK``)."""
    return TDMPC2MultiTask(config, env, total_env_steps)


def synthetic_dataset(
    tasks: Sequence[Any], episodes_per_task: int, seed: int = 0
) -> MultiTaskDataset:
    """A pooled dataset of random episodes for ``tasks`` (:class:`~agents.tdmpc2.dataset.TaskInfo`
    each): N(0, 1) observations, U(-1, 1) actions, N(0, 1) rewards, padded per the schema
    (tests and smoke runs)."""
    from agents.tdmpc2.dataset import from_episodes, pool_tasks

    rng = np.random.default_rng(seed)
    parts = []
    for info in tasks:
        L = info.episode_length + 1
        obs = rng.normal(size=(episodes_per_task, L, info.obs_dim))
        action = rng.uniform(-1, 1, size=(episodes_per_task, L, info.action_dim))
        action[:, -1] = 0.0
        reward = rng.normal(size=(episodes_per_task, L))
        reward[:, 0] = 0.0
        parts.append(from_episodes(obs, action, reward, info))
    return pool_tasks(parts, source={"synthetic": seed})
