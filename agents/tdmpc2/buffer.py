"""The TD-MPC2 episode buffer: a ring of rounds of fixed-length episodes (docs/design.md §7.4).

Layout: ``R`` rounds x ``n_envs`` episode slots, each ``T + 1`` obs-aligned rows (the
row collector's static mode, docs/design.md §5.2): ``obs [R*n, T+1, O]``, ``action [R*n, T+1, A]``
(row k holds the action chosen at obs k; 0 on the last row), ``reward [R*n, T+1]`` (row k
holds the reward received on entering obs k; 0 on row 0).

Round ``r = tick // (T+1)`` is written in place, row ``tick % (T+1)``, into ring round
``r mod R``; it is *committed* (sampleable) once its hold tick has passed. One round is
always the staging round, so ``R = ceil(capacity / (T * n_envs)) + 1`` with capacity =
``min(buffer_size, total env steps of the run)`` (docs/design.md §9.4). Eviction is FIFO by
round. The reference keeps ``min(buffer_size, steps) // T`` episodes (b67b21c
``common/buffer.py:40``); we keep at least as many (deviation T30).

Sampling (b67b21c ``RandomSampler`` + ``RandomCropTensorDict(H+1)``): a uniform committed
episode x a uniform start ``s in [0, T-H]``; windows never cross episodes. The slice is
``obs`` rows ``s..s+H`` [H+1, B, O], ``action`` rows ``s..s+H-1`` [H, B, A], ``reward``
rows ``s+1..s+H`` [H, B] (the reference's ``action[s+1..]``/``reward[s+1..]`` of its
row layout, where row k holds a_{k-1}).

Image envs (issue 48, :mod:`agents.tdmpc2.pixels`): ``obs`` holds each row's frame as the env
gives it, ``uint8 [R*n, T+1, H, W, C]``, and a sampled window's ``obs`` is the frame stack of
each row, ``uint8 [H+1, B, H, W, 3 C]``, rebuilt from the episode's rows (the reference
stores the stacks themselves: the same windows, three times the memory; docs/PERFORMANCE.md).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from agents.tdmpc2.pixels import stack_rows


@struct.dataclass
class EpisodeBufferState:
    obs: jax.Array  # [R*n, T+1, O] float32, or uint8 [R*n, T+1, H, W, C] frames (images)
    action: jax.Array  # [R*n, T+1, A]
    reward: jax.Array  # [R*n, T+1]


@struct.dataclass
class Batch:
    obs: jax.Array  # [H+1, B, O], or uint8 [H+1, B, H, W, 3 C] frame stacks (images)
    action: jax.Array  # [H, B, A]
    reward: jax.Array  # [H, B]


@dataclasses.dataclass(frozen=True)
class EpisodeBuffer:
    """Static shape of the ring: ``rounds`` x ``n_envs`` episodes of ``T + 1`` rows;
    ``image_shape`` (H, W, C): the env's frames, stored as uint8 and sampled as stacks
    (module docstring); None: vectors of ``obs_size`` float32."""

    T: int
    n_envs: int
    obs_size: int
    action_size: int
    rounds: int
    image_shape: tuple[int, int, int] | None = None

    @classmethod
    def for_run(
        cls,
        T: int,
        n_envs: int,
        obs_size: int,
        action_size: int,
        buffer_size: int,
        env_steps: int,
        image_shape: tuple[int, int, int] | None = None,
    ) -> EpisodeBuffer:
        """Size the ring for a run of ``env_steps`` total agent steps (docs/design.md §9.4)."""
        capacity = max(1, min(buffer_size, env_steps))
        rounds = math.ceil(capacity / (T * n_envs)) + 1
        return cls(T, n_envs, obs_size, action_size, max(rounds, 2), image_shape)

    @property
    def episodes(self) -> int:
        return self.rounds * self.n_envs

    def nbytes(self) -> int:
        """Bytes of one seed's buffer (float32 vectors, actions, rewards; uint8 frames)."""
        obs = 4 * self.obs_size if self.image_shape is None else math.prod(self.image_shape)
        return self.episodes * (self.T + 1) * (obs + 4 * (self.action_size + 1))

    def init(self) -> EpisodeBufferState:
        E, L = self.episodes, self.T + 1
        if self.image_shape is None:
            obs = jnp.zeros((E, L, self.obs_size), jnp.float32)
        else:
            obs = jnp.zeros((E, L, *self.image_shape), jnp.uint8)
        return EpisodeBufferState(
            obs=obs,
            action=jnp.zeros((E, L, self.action_size), jnp.float32),
            reward=jnp.zeros((E, L), jnp.float32),
        )

    def slots(self, tick: jax.Array) -> jax.Array:
        """Episode slots [n_envs] written at ``tick``."""
        ring_round = (jnp.asarray(tick) // (self.T + 1)) % self.rounds
        return ring_round * self.n_envs + jnp.arange(self.n_envs)

    def add(
        self,
        state: EpisodeBufferState,
        tick: jax.Array,
        obs: jax.Array,
        action: jax.Array,
        reward: jax.Array,
    ) -> EpisodeBufferState:
        """Write the tick's rows (obs [n, O] or frames [n, H, W, C], action [n, A], reward
        [n]) in place."""
        slots, row = self.slots(tick), jnp.asarray(tick) % (self.T + 1)
        return EpisodeBufferState(
            obs=state.obs.at[slots, row].set(obs),
            action=state.action.at[slots, row].set(action),
            reward=state.reward.at[slots, row].set(reward),
        )

    def committed_rounds(self, tick: jax.Array) -> jax.Array:
        """Rounds sampleable after ``tick``: completed rounds, at most ``R - 1``."""
        done = (jnp.asarray(tick) + 1) // (self.T + 1)
        return jnp.minimum(done, self.rounds - 1)

    def collection_order(self, tick: int) -> tuple[list[int], int]:
        """Host: the slots of the committed episodes after ``tick`` ticks (the state's next
        tick), oldest first, and how many completed episodes the ring has evicted."""
        done = int(tick) // (self.T + 1)
        kept = min(done, self.rounds - 1)
        slots = [
            (r % self.rounds) * self.n_envs + e
            for r in range(done - kept, done)
            for e in range(self.n_envs)
        ]
        return slots, (done - kept) * self.n_envs

    def sample(
        self, state: EpisodeBufferState, tick: jax.Array, key: jax.Array, batch: int, horizon: int
    ) -> Batch:
        """Uniform committed episode x uniform start; needs >= 1 committed round."""
        k_round, k_env, k_start = jax.random.split(key, 3)
        done = (jnp.asarray(tick) + 1) // (self.T + 1)
        back = jax.random.randint(k_round, (batch,), 1, self.committed_rounds(tick) + 1)
        ring_round = (done - back) % self.rounds
        env = jax.random.randint(k_env, (batch,), 0, self.n_envs)
        ep = ring_round * self.n_envs + env
        start = jax.random.randint(k_start, (batch,), 0, self.T - horizon + 1)
        return self.gather(state, ep, start, horizon)

    def gather(
        self, state: EpisodeBufferState, ep: jax.Array, start: jax.Array, horizon: int
    ) -> Batch:
        """The H+1-row windows of episodes ``ep`` [B] from rows ``start`` [B], time-major;
        images: ``obs`` the rows' frame stacks (:func:`~agents.tdmpc2.pixels.stack_rows`)."""
        batch = gather_windows(state, ep, start, horizon)
        if self.image_shape is None:
            return batch
        rows = start[:, None] + jnp.arange(horizon + 1)  # [B, H+1]
        return batch.replace(obs=jnp.swapaxes(stack_rows(state.obs, ep, rows), 0, 1))


def gather_windows(episodes: Any, ep: jax.Array, start: jax.Array, horizon: int) -> Batch:
    """Time-major H+1-row windows of ``episodes`` (anything with obs-aligned ``obs [E, L, O]``,
    ``action [E, L, A]``, ``reward [E, L]``) at episodes ``ep`` [B] from rows ``start`` [B]:
    obs rows ``s..s+H``, action rows ``s..s+H-1``, reward rows ``s+1..s+H`` (module docstring)."""
    rows = start[:, None] + jnp.arange(horizon + 1)  # [B, H+1]
    obs = episodes.obs[ep[:, None], rows]  # [B, H+1, O]
    action = episodes.action[ep[:, None], rows[:, :-1]]  # [B, H, A]
    reward = episodes.reward[ep[:, None], rows[:, 1:]]  # [B, H]
    return Batch(
        obs=jnp.swapaxes(obs, 0, 1),
        action=jnp.swapaxes(action, 0, 1),
        reward=jnp.swapaxes(reward, 0, 1),
    )
