"""The TD-MPC2 agent: ``init`` / ``train`` / ``evaluate`` as pure functions of one seed.

``train(state, ticks)`` is one ``lax.scan`` over absolute tick indices (docs/design.md §7.4,
§2.4). Per tick:

1. the static row collector emits one row per env: uniform random actions during the
   seed phase, the MPPI planner (vmapped over envs, warm-start mean carried per env)
   afterwards; the hold tick resets every env;
2. the rows are written into the episode buffer;
3. ``Schedule.n_updates(tick)`` updates run in a ``fori_loop`` (unbatched trip count
   under the seed vmap, docs/design.md §2.4), each on a fresh uniform batch.

Every random draw is derived from the seed's key folded with the absolute tick, so a run
split into chunks (``train(s, arange(0, k))`` then ``train(s, arange(k, n))``) is
bit-identical to an uninterrupted one. The scan, the update loop and the chunk's metrics
are the shared skeleton's (``agents/common/loop.py``, docs/design.md §4.4): ``Train/*`` of
an update metric is its mean over the chunk's updates (the reference logs the last
update's, deviation T50).

Image envs (``env.obs=image``, issue 48): the pixel model (``agent.obs`` becomes ``rgb``), a
3-frame stack kept in the planner's carry and rebuilt from the buffer's uint8 frames
(:mod:`agents.tdmpc2.pixels`, docs/design.md §7.7), and a fresh ShiftAug draw per decision and
per update (the plan and update noise).

Terminations are refused: an env that can terminate is rejected at construction, and
the collector counts off-schedule dones and terminal rows so the caller can raise after
``train`` (:meth:`TDMPC2.check`; the reference silently treats any done as a time limit,
deviation T31).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from agent_api.backend import batched_layout
from agents.common.loop import (
    EpisodeEnds,
    eval_episodes,
    evaluate,
    run_updates,
    train_chunk,
)
from agents.tdmpc2.buffer import EpisodeBuffer, EpisodeBufferState
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.entry import REQUIREMENTS
from agents.tdmpc2.pixels import check_image, empty_stack, stacked_shape, stacking_policy
from agents.tdmpc2.planner import draw_plan_noise, plan
from agents.tdmpc2.schedule import Schedule
from agents.tdmpc2.train_state import TDMPC2TrainState, init_train_state
from agents.tdmpc2.update import draw_update_noise, update
from agents.tdmpc2.world_model import WorldModel
from envs.core import Env
from envs.row_collector import RowCollector, RowCollectorState, single_env_policy


@struct.dataclass
class TDMPC2State:
    """One seed's whole state (docs/design.md §7.5)."""

    train: TDMPC2TrainState
    collector: RowCollectorState  # policy_carry = prev_mean [n_envs, H, A]
    buffer: EpisodeBufferState
    key: jax.Array
    tick: jax.Array  # [] int32, next absolute tick
    n_updates: jax.Array  # [] int32
    n_terminations: jax.Array  # [] int32, terminal rows on the schedule's last step
    n_evals: jax.Array  # [] int32
    last_metrics: dict  # the last update's metrics (logged: their chunk means, T50)


@dataclasses.dataclass(frozen=True)
class TDMPC2:
    """TD-MPC2 on ``env`` for a run of ``total_env_steps`` agent steps (sizes the buffer).

    ``batched`` picks the layout of the Q ensemble and of the planner over envs (True:
    vmapped, False: looped; None: the backend's, :func:`agent_api.backend.batched_layout`;
    docs/design.md §2.6).
    """

    cfg: TDMPC2Config
    env: Env
    total_env_steps: int
    batched: bool | None = None

    def __post_init__(self) -> None:
        spec = self.env.spec
        try:
            REQUIREMENTS.check(spec, "TD-MPC2 (paper code; docs/design.md §7.4)")
        except ValueError as err:
            raise ValueError(
                f"{err}; pick a continuous-control DMC task (e.g. pendulum, walker_walk)"
            ) from None
        image = spec.image_shape is not None
        check_image(spec.image_shape, spec.env_id)
        if self.cfg.obs == "rgb" and not image:
            raise ValueError(
                f"agent.obs=rgb needs an env observed as images; add env.obs=image (env "
                f"{spec.env_id!r} gives {spec.obs_mode}s)"
            )
        # the model follows the env: an image env gets the pixel model (issue 48)
        cfg = dataclasses.replace(self.cfg, obs="rgb") if image else self.cfg
        cfg = cfg.resolve(spec.episode_length, spec.action_size)
        object.__setattr__(self, "cfg", cfg)
        if image:
            self.wm  # noqa: B018 -- its shape checks (latent_dim = 16 num_channels) now, not at init

    # ----------------------------------------------------------- components
    @property
    def image_shape(self) -> tuple[int, int, int] | None:
        """The env's frame ``(64, 64, 3)``, or None for a vector env."""
        return self.env.spec.image_shape

    @property
    def wm(self) -> WorldModel:
        spec = self.env.spec
        if self.image_shape is None:
            return WorldModel(self.cfg, spec.obs_size, spec.action_size, batched=self.batched)
        shape = stacked_shape(self.image_shape)  # the model sees the 3-frame stack
        size = shape[0] * shape[1] * shape[2]
        return WorldModel(self.cfg, size, spec.action_size, batched=self.batched, image_shape=shape)

    @property
    def schedule(self) -> Schedule:
        return Schedule(self.env.spec.episode_length, self.cfg.n_envs, self.cfg.seed_steps)

    @property
    def collector(self) -> RowCollector:
        return RowCollector(self.env, self.cfg.n_envs, "static")

    @property
    def buffer(self) -> EpisodeBuffer:
        spec = self.env.spec
        return EpisodeBuffer.for_run(
            spec.episode_length,
            self.cfg.n_envs,
            spec.obs_size,
            spec.action_size,
            self.cfg.buffer_size,
            self.total_env_steps,
            self.image_shape,
        )

    def ticks_for(self, env_steps: int) -> int:
        """Ticks that take ``env_steps`` agent steps per env (hold ticks included)."""
        T = self.env.spec.episode_length
        per_env = -(-env_steps // self.cfg.n_envs)
        return per_env + per_env // T

    def memory_bytes(self) -> dict[str, int]:
        """Bytes per seed: replay buffer and parameters + optimiser states + target Q."""
        params = jax.eval_shape(lambda: init_train_state(self.wm, jax.random.key(0)))
        state_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(params))
        return {"replay": self.buffer.nbytes(), "train_state": int(state_bytes)}

    # ------------------------------------------------------------ launcher
    def check(self, metrics: Mapping[str, Any]) -> None:
        """Host-side guard after ``train``: TD-MPC2 refuses terminating episodes (T31)."""
        off = int(np.max(metrics["n_offschedule_dones"]))
        term = int(np.max(metrics["n_terminations"]))
        if off or term:
            raise ValueError(
                f"the environment terminated episodes ({off} early dones, {term} terminal "
                "final steps); TD-MPC2 (paper code) bootstraps every episode end as a time "
                "limit and is only valid on fixed-length, non-terminating tasks"
            )

    def migrate(self, state: TDMPC2State, saved_env_steps: int) -> TDMPC2State:
        """A state saved by this agent built for ``saved_env_steps`` carried into this
        run's buffer size: the episode axis is zero-padded or cut at its end. Exact as
        long as the ring has not wrapped, which holds whenever the new run is at least
        as long as the steps already taken (the launcher refuses shorter ones)."""
        episodes = self.buffer.episodes
        written = state.buffer.obs.shape[0]
        if written == episodes:
            return state

        def fit(x: jax.Array) -> jax.Array:
            if written < episodes:
                return jnp.pad(x, [(0, episodes - written)] + [(0, 0)] * (x.ndim - 1))
            return x[:episodes]

        return state.replace(buffer=jax.tree.map(fit, state.buffer))

    def export_dataset(self, states: Any, seeds: Sequence[int], source: Mapping[str, Any]):
        """Host: every committed episode of each seed's ring, in collection order, seeds
        in turn, as a one-task :class:`~agents.tdmpc2.dataset.MultiTaskDataset` (docs/design.md
        §7.6). ``states`` is seed-batched (NumPy leaves). Raises ValueError if a ring has
        evicted episodes (the dataset would not be the run's full history)."""
        from agents.tdmpc2.dataset import TaskInfo, from_episodes, pool_tasks

        if self.image_shape is not None:
            raise ValueError("exporting a dataset of an image run is not supported (issue 48)")
        info = TaskInfo.from_spec(self.env.spec)
        parts = []
        for i, seed in enumerate(seeds):
            slots, evicted = self.buffer.collection_order(int(states.tick[i]))
            if evicted:
                raise ValueError(
                    f"seed {seed}: the replay ring evicted its {evicted} oldest episodes "
                    f"(buffer_size={self.cfg.buffer_size} is below the run's steps), so it no "
                    "longer holds the full history; rerun with agent.buffer_size >= "
                    "protocol.n_timesteps"
                )
            buf = jax.tree.map(lambda x, i=i: np.asarray(x[i]), states.buffer)
            parts.append(from_episodes(buf.obs[slots], buf.action[slots], buf.reward[slots], info))
        return pool_tasks(
            parts, source={**source, "episodes_per_seed": [p.num_episodes for p in parts]}
        )

    # ----------------------------------------------------------------- init
    def init(self, key: jax.Array) -> TDMPC2State:
        k_train, k_col, key = jax.random.split(key, 3)
        n = self.cfg.n_envs
        train = init_train_state(self.wm, k_train)
        metrics = jax.eval_shape(lambda: self._update(train, self.buffer.init(), 0, key)[1])
        zero = jnp.zeros((), jnp.int32)
        return TDMPC2State(
            train=train,
            collector=self.collector.init(k_col, policy_carry=self.zero_carry(n)),
            buffer=self.buffer.init(),
            key=key,
            tick=zero,
            n_updates=zero,
            n_terminations=zero,
            n_evals=zero,
            last_metrics=jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metrics),
        )

    # ---------------------------------------------------------------- acting
    def zero_carry(self, n: int) -> Any:
        """The planner's carry for ``n`` envs before their first decision: prev_mean
        ``[n, H, A]`` zeros; image envs: ``(prev_mean, frame stack uint8 [n, 64, 64, 9])``."""
        mean = jnp.zeros((n, self.cfg.horizon, self.env.spec.action_size))
        return mean if self.image_shape is None else (mean, empty_stack(n, self.image_shape))

    def policy_fn(self, params: dict, eval_mode: bool):
        """Batched planner policy for the row collector: carry = prev_mean [n, H, A] (image
        envs: with the frame stack, :func:`~agents.tdmpc2.pixels.stacking_policy`). Each
        decision draws its own plan noise, a pixel model's ShiftAug shift included (the
        reference shifts on every ``encode``, acting and evaluating too: T51)."""
        wm, cfg, A = self.wm, self.cfg, self.env.spec.action_size

        def decide(o, m, t0, k):
            nz = draw_plan_noise(k, cfg, A)
            return plan(wm, cfg, params, o, m, t0, nz, eval_mode=eval_mode)[:2]

        policy = batched_policy(decide, self.batched)
        return policy if self.image_shape is None else stacking_policy(policy)

    # ---------------------------------------------------------------- update
    def _update(
        self, train: TDMPC2TrainState, buffer: EpisodeBufferState, tick: Any, key: jax.Array
    ):
        k_batch, k_noise = jax.random.split(key)
        batch = self.buffer.sample(buffer, tick, k_batch, self.cfg.batch_size, self.cfg.horizon)
        noise = draw_update_noise(k_noise, self.cfg, self.env.spec.action_size)
        return update(self.wm, self.cfg, train, batch, noise)

    # ----------------------------------------------------------------- train
    def _tick(self, state: TDMPC2State, i: jax.Array, sums: dict):
        """One tick (module docstring): collect, add, ``n_updates(i)`` updates."""
        k_col, k_upd = jax.random.split(jax.random.fold_in(state.key, i))
        policy = self.policy_fn(state.train.params, eval_mode=False)
        sched = self.schedule
        cstate, row, stats = self.collector.tick(
            state.collector, i, k_col, policy, sched.random_actions(i)
        )
        buffer = self.buffer.add(state.buffer, i, row.obs, row.action, row.reward)
        n = sched.n_updates(i)

        def one_update(c, key):
            train, m = self._update(c[0], buffer, i, key)
            return (train, m), m

        (train, last), sums = run_updates(
            one_update, (state.train, state.last_metrics), n, k_upd, sums
        )
        state = state.replace(
            train=train,
            collector=cstate,
            buffer=buffer,
            tick=i + 1,
            n_updates=state.n_updates + n,
            n_terminations=state.n_terminations + jnp.sum(row.is_terminal, dtype=jnp.int32),
            last_metrics=last,
        )
        return state, sums, EpisodeEnds(done=stats.done, returns=stats.returns)

    def train(self, state: TDMPC2State, ticks: jax.Array) -> tuple[TDMPC2State, dict]:
        """Run the absolute ``ticks`` (unbatched, consecutive from ``state.tick``); the
        chunk's metrics as ``agents.common.loop.train_chunk`` reduces them (``Train/*`` of
        an update metric: its mean over the chunk's updates, T50), plus the collector's
        counts for :meth:`check`."""
        state, metrics = train_chunk(self._tick, self.counters, state, ticks, state.last_metrics)
        return state, {
            **metrics,
            "n_offschedule_dones": state.collector.n_offschedule_dones,
            "n_terminations": state.n_terminations,
        }

    def counters(self, state: TDMPC2State) -> dict[str, jax.Array]:
        """timestep = agent env steps; env_frames = env steps x action repeat (docs/design.md
        §3)."""
        steps = state.collector.env_steps
        return {
            "timestep": steps,
            "env_frames": steps * self.env.spec.action_repeat,
            "Train/n_updates": state.n_updates,
        }

    # -------------------------------------------------------------- evaluate
    def evaluate(self, state: TDMPC2State, key: jax.Array) -> tuple[TDMPC2State, dict]:
        """``eval_episodes`` fresh episodes in parallel with the eval-mode planner and a
        separate planner carry (deviation T32); key folded with the evaluation count."""
        n = self.cfg.eval_episodes

        def run(key):
            policy = self.policy_fn(state.train.params, eval_mode=True)
            return eval_episodes(self.env, n, "static", policy, self.zero_carry(n), key)

        return evaluate(state, key, run)

    def eval_policy(self, state: TDMPC2State) -> tuple[Any, jax.Array]:
        """The eval-mode planner of :meth:`evaluate` for one env and its zero carry
        (agent_api's optional ``eval_policy``: ``launcher.evaluate --video``)."""
        policy = self.policy_fn(state.train.params, eval_mode=True)
        return single_env_policy(policy), self.zero_carry(1)


def batched_policy(decide: Any, batched: bool | None = None):
    """A row-collector policy (carry = prev_mean ``[n, H, A]``) from a one-env decision
    ``decide(obs, prev_mean, t0, key) -> (action, mean)``: ``vmap`` over the envs if
    ``batched`` (None: the backend decides, :func:`agent_api.backend.batched_layout`), else
    ``lax.map``."""

    def policy(prev_mean, obs, is_first, key):
        args = (obs, prev_mean, is_first, jax.random.split(key, obs.shape[0]))
        # Same decisions either way. On CPU a loop over envs beats the batched planner
        # (the vmapped contractions run 23-29% slower per decision, docs/PERFORMANCE.md);
        # accelerators want the batch.
        if batched_layout(batched):
            action, mean = jax.vmap(lambda *a: decide(*a))(*args)
        else:
            action, mean = jax.lax.map(lambda a: decide(*a), args)
        return action, mean, None

    return policy
