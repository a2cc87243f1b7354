"""DreamerV3 stream replay: per-env rings of rows with their posterior latents.

docs/design.md §8.3. Reference 2411f7d ``embodied/replay/replay.py`` (add, online queue,
``_sample``, ``_annotate_batch``, ``update``) and ``agent.py:115-131,188-218`` (stored
latents, replay context, write-back).

Layout: ``n`` envs write in lockstep, one row per env per tick, row ``a`` of env ``e`` at
slot ``a mod C`` of ``[n, C, ...]`` arrays; per row the collector's fields (obs, action,
reward, is_first / is_last / is_terminal, docs/design.md §5.2) and the posterior latents ``deter``
(f32 ``[D]``) and ``stoch`` (``[S]`` class indices, uint8 when classes <= 256).

Items are every fully written window of ``L = T + 1`` rows (stride 1, across episode
boundaries): per env the starts ``max(0, R - C) .. R - L`` after ``R`` rows. The online
queue holds the reference's non-overlapping windows (an item is queued when its stream's
length before the add is a multiple of ``L``: starts ``1 + L k``), in push order (tick, then
env): queue entry ``q`` is env ``q mod n``, start ``1 + L (q div n)``; ``popped`` counts the
entries taken, and entries whose rows were overwritten are skipped (the reference's
``KeyError``). A batch pops pending entries first (at most ``B``) and draws the rest
uniformly over items with replacement (deviation D29: JAX keys, not the reference's fixed
``seed=0`` numpy selector).

Capacity ``C`` is in rows per env (deviation D27): ``min(ceil(capacity / n), rows per env
of the run)``, never below the ``T + ceil(B / n)`` rows that hold the first batch's items.
Every read and write is a modular gather / scatter (no ``dynamic_slice`` on the ring).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from agents.dreamerv3.world_model import Batch

__all__ = ["ReplayState", "StreamReplay", "Sample"]


@struct.dataclass
class ReplayState:
    """One seed's rings ``[n, C, ...]`` plus the rows written per env and queue entries
    popped (both int32 scalars)."""

    obs: jax.Array  # [n, C, O] f32
    action: jax.Array  # [n, C, A] f32
    reward: jax.Array  # [n, C] f32
    is_first: jax.Array  # [n, C] bool
    is_last: jax.Array  # [n, C] bool
    is_terminal: jax.Array  # [n, C] bool
    deter: jax.Array  # [n, C, D] f32
    stoch: jax.Array  # [n, C, S] uint8 / int32
    rows: jax.Array  # [] int32
    popped: jax.Array  # [] int32


@struct.dataclass
class Sample:
    """Where a batch came from: env ``[B]`` and absolute start row ``[B]`` (int32), and
    whether each sequence was an online-queue entry ``[B]`` (bool)."""

    env: jax.Array
    start: jax.Array
    is_online: jax.Array


@dataclasses.dataclass(frozen=True)
class StreamReplay:
    """Static shape: ``n_envs`` rings of ``capacity`` rows; windows of ``length + 1`` rows.

    Attributes:
      n_envs, capacity: ring shape (``capacity`` = rows per env, ``C``).
      length: trained steps per window ``T`` (the config's ``batch_length``).
      obs_size, action_size, deter, stoch, classes: row widths.
      image_shape: (H, W, C) of an image env's observation, stored uint8 in place of the
        ``obs_size`` floats (which is then 0; issue 47); None for vector envs.
    """

    n_envs: int
    capacity: int
    length: int
    obs_size: int
    action_size: int
    deter: int
    stoch: int
    classes: int
    image_shape: tuple[int, int, int] | None = None

    @classmethod
    def rows_for(cls, n_envs: int, replay_capacity: int, run_rows: int, batch: int, T: int) -> int:
        """Ring rows per env for a run of ``run_rows`` rows in all (docs/design.md §8.3, D27)."""
        per_env = min(math.ceil(replay_capacity / n_envs), math.ceil(run_rows / n_envs))
        return max(per_env, T + math.ceil(batch / n_envs))

    @property
    def window(self) -> int:
        """``L = T + 1`` rows per item (row 0 is the replay context)."""
        return self.length + 1

    @property
    def stoch_dtype(self) -> Any:
        return jnp.uint8 if self.classes <= 256 else jnp.int32

    def nbytes(self) -> int:
        """Bytes of one seed's rings."""
        n, C = self.n_envs, self.capacity
        per_row = 4 * (self.obs_size + self.action_size + 1 + self.deter) + 3
        per_row += self.stoch * jnp.dtype(self.stoch_dtype).itemsize
        if self.image_shape is not None:
            per_row += math.prod(self.image_shape)  # uint8
        return n * C * per_row + 8

    def init(self) -> ReplayState:
        n, C = self.n_envs, self.capacity
        f32, b = jnp.float32, jnp.bool_
        zero = jnp.zeros((), jnp.int32)
        return ReplayState(
            obs=(
                jnp.zeros((n, C, self.obs_size), f32)
                if self.image_shape is None
                else jnp.zeros((n, C, *self.image_shape), jnp.uint8)
            ),
            action=jnp.zeros((n, C, self.action_size), f32),
            reward=jnp.zeros((n, C), f32),
            is_first=jnp.zeros((n, C), b),
            is_last=jnp.zeros((n, C), b),
            is_terminal=jnp.zeros((n, C), b),
            deter=jnp.zeros((n, C, self.deter), f32),
            stoch=jnp.zeros((n, C, self.stoch), self.stoch_dtype),
            rows=zero,
            popped=zero,
        )

    # ------------------------------------------------------------------ writing
    def add(self, state: ReplayState, row: Any, deter: jax.Array, stoch: jax.Array) -> ReplayState:
        """Write one row per env: ``row`` has the collector's fields (``obs [n, O]``, ...),
        ``deter [n, D]``, ``stoch [n, S]`` the acting posterior's latents."""
        slot = state.rows % self.capacity
        return state.replace(
            obs=state.obs.at[:, slot].set(row.obs),
            action=state.action.at[:, slot].set(row.action),
            reward=state.reward.at[:, slot].set(row.reward),
            is_first=state.is_first.at[:, slot].set(row.is_first),
            is_last=state.is_last.at[:, slot].set(row.is_last),
            is_terminal=state.is_terminal.at[:, slot].set(row.is_terminal),
            deter=state.deter.at[:, slot].set(deter),
            stoch=state.stoch.at[:, slot].set(stoch.astype(self.stoch_dtype)),
            rows=state.rows + 1,
        )

    def write_back(
        self, state: ReplayState, sample: Sample, deter: jax.Array, stoch: jax.Array
    ) -> ReplayState:
        """Store the trained posteriors ``deter [B, T, D]``, ``stoch [B, T, S]`` at rows
        ``start + 1 .. start + T`` of each sequence, one sequence after another in batch order
        (later sequences win where windows overlap, the reference's sequential
        ``replay.update``); the context row is never written."""
        C, T = self.capacity, self.length

        def one(b, st):
            slots = (sample.start[b] + 1 + jnp.arange(T)) % C
            env = sample.env[b]
            return st.replace(
                deter=st.deter.at[env, slots].set(deter[b]),
                stoch=st.stoch.at[env, slots].set(stoch[b].astype(self.stoch_dtype)),
            )

        return jax.lax.fori_loop(0, deter.shape[0], one, state)

    # ------------------------------------------------------------------ reading
    def items_per_env(self, state: ReplayState) -> jax.Array:
        """Fully written windows per env (int32)."""
        return jnp.clip(jnp.minimum(state.rows, self.capacity) - self.length, 0, None)

    def n_items(self, state: ReplayState) -> jax.Array:
        """The reference's ``len(replay)``: items over all envs (int32)."""
        return self.n_envs * self.items_per_env(state)

    def queue_bounds(self, state: ReplayState) -> tuple[jax.Array, jax.Array]:
        """``(first live entry, entries pushed)`` of the online queue (int32)."""
        L, n = self.window, self.n_envs
        pushed = n * (jnp.maximum(state.rows - 1, 0) // L)
        oldest = jnp.maximum(state.rows - self.capacity, 0)  # first start still in the ring
        first_live = n * (-(-jnp.maximum(oldest - 1, 0) // L))  # ceil((oldest - 1) / L) entries
        return jnp.maximum(state.popped, first_live), pushed

    def draw(self, state: ReplayState, key: jax.Array, batch: int) -> tuple[ReplayState, Sample]:
        """Choose ``batch`` windows: pending queue entries first, then uniform items."""
        L, n = self.window, self.n_envs
        first, pushed = self.queue_bounds(state)
        take = jnp.clip(pushed - first, 0, batch)
        b = jnp.arange(batch)
        q = first + b
        online = b < take
        idx = jax.random.randint(key, (batch,), 0, jnp.maximum(self.n_items(state), 1))
        oldest = jnp.maximum(state.rows - self.capacity, 0)
        env = jnp.where(online, q % n, idx % n).astype(jnp.int32)
        start = jnp.where(online, 1 + L * (q // n), oldest + idx // n).astype(jnp.int32)
        state = state.replace(popped=first + take)
        return state, Sample(env=env, start=start, is_online=online)

    def gather(self, state: ReplayState, sample: Sample) -> Batch:
        """The annotated windows ``[B, T + 1, ...]``: ``is_first[:, 0] = True`` and
        ``is_last |= next is_first`` (last row excluded), ``replay.py:_annotate_batch``."""
        slots = (sample.start[:, None] + jnp.arange(self.window)) % self.capacity
        env = sample.env[:, None]
        take = lambda x: x[env, slots]  # noqa: E731
        is_first = take(state.is_first)
        next_first = jnp.concatenate([is_first[:, 1:], jnp.zeros_like(is_first[:, :1])], 1)
        return Batch(
            obs=take(state.obs),
            action=take(state.action),
            reward=take(state.reward),
            is_first=is_first.at[:, 0].set(True),
            is_last=take(state.is_last) | next_first,
            is_terminal=take(state.is_terminal),
            deter=take(state.deter),
            stoch=take(state.stoch).astype(jnp.int32),
        )

    def sample(
        self, state: ReplayState, key: jax.Array, batch: int
    ) -> tuple[ReplayState, Batch, Sample]:
        """:meth:`draw` then :meth:`gather`; needs ``n_items(state) >= 1``."""
        state, where = self.draw(state, key, batch)
        return state, self.gather(state, where), where

    # ------------------------------------------------------------------ resume
    def grow(self, state: ReplayState) -> ReplayState:
        """A state of a ring with fewer rows per env carried into this ring by zero-padding
        its slot axis: exact when the smaller ring has not wrapped (row ``a`` at slot ``a``),
        which holds for a ring sized by a shorter run that it has not outlived (docs/design.md
        §9.4)."""
        have = state.obs.shape[1]
        if have > self.capacity:
            raise ValueError(
                f"the saved replay holds {have} rows per env, more than this run's ring of "
                f"{self.capacity}; resume with at least the saved run's length"
            )

        def pad(x: jax.Array) -> jax.Array:
            if x.ndim < 2:
                return x
            width = [(0, 0), (0, self.capacity - have)] + [(0, 0)] * (x.ndim - 2)
            return jnp.pad(x, width)

        return jax.tree.map(pad, state)
