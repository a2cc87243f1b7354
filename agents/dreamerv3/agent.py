"""The DreamerV3 agent: ``init`` / ``train`` / ``evaluate`` as pure functions of one seed.

``train(state, ticks)`` is one ``lax.scan`` over absolute tick indices (docs/design.md §8.3-§8.6).
Per tick:

1. the row collector (dynamic mode: any episode end, docs/design.md §8.5) emits one row per env;
   the policy filters the observation with the carried posterior ``(deter, stoch,
   prevact)`` and samples an action (the reference's policy always samples,
   dreamerv3@2411f7d dreamerv3/agent.py:145-180);
   the acting posterior's latents travel with the row;
2. the rows and their latents are written into the stream replay;
3. ``Schedule.n_updates(tick)`` updates run in a ``fori_loop`` (an unbatched trip count
   under the seed vmap), each on a fresh batch (online queue first, then uniform), and
   write their trained posteriors back into the replay.

Every random draw comes from the seed's key folded with the absolute tick, so a run split
into chunks is bit-identical to an uninterrupted one. Counters (docs/design.md §3): ``timestep``
counts rows (one per env per tick), ``env_frames`` = rows x action repeat. The logged
training metrics are their means over the chunk's updates (the reference's ``Agg``; the
shared skeleton ``agents/common/loop.py``, docs/design.md §4.4);
``Train/episodic mean reward`` is the mean return of the training episodes that ended in
the chunk, the stochastic policy's (the reference's ``episode/score``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from agents.common.loop import (
    EpisodeEnds,
    eval_episodes,
    evaluate,
    run_updates,
    train_chunk,
)
from agents.dreamerv3.config import DreamerV3Config
from agents.dreamerv3.networks import Networks
from agents.dreamerv3.replay import ReplayState, StreamReplay
from agents.dreamerv3.schedule import Schedule
from agents.dreamerv3.train import (
    Carry,
    TrainState,
    draw_policy_noise,
    draw_train_noise,
    init_carry,
    init_train_state,
    policy_step,
    train_step,
)
from envs.core import Env
from envs.row_collector import RowCollector, RowCollectorState, single_env_policy


@struct.dataclass
class DreamerV3State:
    """One seed's whole state (docs/design.md §8.6)."""

    train: TrainState
    collector: RowCollectorState  # policy_carry = Carry [n_envs]
    replay: ReplayState
    key: jax.Array
    tick: jax.Array  # [] int32, next absolute tick
    n_updates: jax.Array  # [] int32
    n_evals: jax.Array  # [] int32


@dataclasses.dataclass(frozen=True)
class DreamerV3:
    """DreamerV3 on ``env`` for a run of ``total_env_steps`` rows (sizes the replay ring)."""

    cfg: DreamerV3Config
    env: Env
    total_env_steps: int

    # ----------------------------------------------------------- components
    @property
    def nets(self) -> Networks:
        spec = self.env.spec
        return Networks(self.cfg, spec.obs_size, spec.action_size, spec.discrete, spec.image_shape)

    def model_obs(self, obs: jax.Array) -> Any:
        """The networks' observation from the env's: ``[..., O]`` as is; an image env's
        ``[..., H, W, C]`` uint8 as ``{"image": ...}`` (its ``obs_size`` is 0: no vector)."""
        return obs if self.env.spec.image_shape is None else {"image": obs}

    @property
    def schedule(self) -> Schedule:
        c = self.cfg
        return Schedule(c.n_envs, c.batch_size, c.batch_length, c.train_ratio)

    @property
    def collector(self) -> RowCollector:
        return RowCollector(self.env, self.cfg.n_envs, "dynamic")

    @property
    def replay(self) -> StreamReplay:
        c, spec = self.cfg, self.env.spec
        rows = StreamReplay.rows_for(
            c.n_envs, c.replay_capacity, self.total_env_steps, c.batch_size, c.batch_length
        )
        return StreamReplay(
            n_envs=c.n_envs,
            capacity=rows,
            length=c.batch_length,
            obs_size=spec.obs_size,
            action_size=spec.action_size,
            deter=c.deter_size,
            stoch=c.stoch,
            classes=c.classes_size,
            image_shape=spec.image_shape,
        )

    def ticks_for(self, env_steps: int) -> int:
        """Ticks that emit ``env_steps`` rows (``n_envs`` rows per tick)."""
        return math.ceil(env_steps / self.cfg.n_envs)

    def memory_bytes(self) -> dict[str, int]:
        """Bytes per seed: replay rings (latents included) and params + optimizer + slow
        critic + retnorm."""
        train = jax.eval_shape(lambda: init_train_state(self.nets, jax.random.key(0)))
        state_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(train))
        return {"replay": self.replay.nbytes(), "train_state": int(state_bytes)}

    # ------------------------------------------------------------ launcher
    def check(self, metrics: Mapping[str, Any]) -> None:
        """DreamerV3 trains on any episode ends (terminations and time limits): nothing
        to refuse."""

    def migrate(self, state: DreamerV3State, saved_env_steps: int) -> DreamerV3State:
        """A state saved for a run of ``saved_env_steps`` rows carried into this run's ring:
        exact zero-padding of the slot axis (docs/design.md §9.4, :meth:`StreamReplay.grow`)."""
        return state.replace(replay=self.replay.grow(state.replay))

    # ----------------------------------------------------------------- init
    def init(self, key: jax.Array) -> DreamerV3State:
        k_train, k_col, key = jax.random.split(key, 3)
        nets, n = self.nets, self.cfg.n_envs
        zero = jnp.zeros((), jnp.int32)
        return DreamerV3State(
            train=init_train_state(nets, k_train),
            collector=self.collector.init(k_col, policy_carry=init_carry(nets, n)),
            replay=self.replay.init(),
            key=key,
            tick=zero,
            n_updates=zero,
            n_evals=zero,
        )

    # ---------------------------------------------------------------- acting
    def policy_fn(self, params: dict):
        """Batched sampling policy for the row collector: carry = :class:`Carry` ``[n]``;
        the action given to the env is the carry's ``prevact`` (one-hot for discrete
        actions); extras = the posterior's ``deter`` and ``stoch`` indices for replay."""
        nets = self.nets

        def policy(carry: Carry, obs: jax.Array, is_first: jax.Array, key: jax.Array):
            noise = draw_policy_noise(nets, key, is_first.shape[0])  # obs may be a dict
            obs = self.model_obs(obs)
            _, outs, carry = policy_step(nets, params, carry, obs, is_first, noise)
            return carry.prevact, carry, outs

        return policy

    # ---------------------------------------------------------------- update
    def _update(self, train: TrainState, replay: ReplayState, key: jax.Array):
        """One batch: sample, train step, write-back. Returns (train, replay, metrics)."""
        c, nets, rep = self.cfg, self.nets, self.replay
        k_batch, k_noise = jax.random.split(key)
        replay, batch, where = rep.sample(replay, k_batch, c.batch_size)
        batch = batch.replace(obs=self.model_obs(batch.obs))
        noise = draw_train_noise(nets, k_noise, c.batch_size, c.batch_length)
        train, outs, metrics = train_step(nets, train, batch, noise)
        replay = rep.write_back(replay, where, outs["replay_deter"], outs["replay_stoch"])
        return train, replay, metrics

    # ----------------------------------------------------------------- train
    def _tick(self, state: DreamerV3State, i: jax.Array, sums: dict):
        """One tick (module docstring): collect, add, ``n_updates(i)`` updates."""
        k_col, k_upd = jax.random.split(jax.random.fold_in(state.key, i))
        policy = self.policy_fn(state.train.params)
        cstate, row, stats = self.collector.tick(state.collector, i, k_col, policy)
        replay = self.replay.add(state.replay, row, row.extras["deter"], row.extras["stoch"])
        n = self.schedule.n_updates(i)

        def one_update(c, key):
            train, replay, m = self._update(*c, key)
            return (train, replay), m

        (train, replay), sums = run_updates(one_update, (state.train, replay), n, k_upd, sums)
        state = state.replace(
            train=train,
            collector=cstate,
            replay=replay,
            tick=i + 1,
            n_updates=state.n_updates + n,
        )
        return state, sums, EpisodeEnds(done=stats.done, returns=stats.returns)

    def train(self, state: DreamerV3State, ticks: jax.Array) -> tuple[DreamerV3State, dict]:
        """Run the absolute ``ticks`` (unbatched, consecutive from ``state.tick``); the
        chunk's metrics as ``agents.common.loop.train_chunk`` reduces them."""
        like = jax.eval_shape(lambda: self._update(state.train, state.replay, jax.random.key(0))[2])
        return train_chunk(self._tick, self.counters, state, ticks, like)

    def counters(self, state: DreamerV3State) -> dict[str, jax.Array]:
        """timestep = rows (docs/design.md §3); env_frames = rows x action repeat."""
        rows = state.collector.rows
        return {
            "timestep": rows,
            "env_frames": rows * self.env.spec.action_repeat,
            "Train/n_updates": state.n_updates,
        }

    # -------------------------------------------------------------- evaluate
    def evaluate(self, state: DreamerV3State, key: jax.Array) -> tuple[DreamerV3State, dict]:
        """``eval_episodes`` fresh episodes in parallel with the sampling policy from a zero
        carry (docs/design.md §8.5); each env's first episode counts. Key folded with the
        evaluation count."""
        n = self.cfg.eval_episodes

        def run(key):
            policy = self.policy_fn(state.train.params)
            carry = init_carry(self.nets, n)
            return eval_episodes(self.env, n, "dynamic", policy, carry, key)

        return evaluate(state, key, run)

    def eval_policy(self, state: DreamerV3State) -> tuple[Any, Carry]:
        """The sampling policy of :meth:`evaluate` for one env and its zero carry
        (agent_api's optional ``eval_policy``: ``launcher.evaluate --video``)."""
        return single_env_policy(self.policy_fn(state.train.params)), init_carry(self.nets, 1)
