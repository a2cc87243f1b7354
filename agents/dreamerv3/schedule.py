"""The DreamerV3 update schedule: the reference's train gate and ``when.Ratio`` per tick.

Reference 2411f7d ``embodied/run/train.py:26-28,80-91`` and ``embodied/core/when.py:26-42``.
The reference numbers transitions: every env of every vector step increments
the step counter, adds its row to replay and then calls ``train_step``, which returns while
the replay holds fewer than ``batch_size`` items and otherwise runs ``Ratio(step)`` updates.
``Ratio`` returns 1 on its first call (step ``s0``) and afterwards keeps the cumulative count
at ``1 + floor((s - s0) r)`` with ``r = train_ratio / (batch_size * batch_length)``.

Here the ``n`` envs of one tick are the tick's transitions ``n i + 1 .. n (i + 1)`` (1-based,
env order), so the gate is the first transition after which the items (every fully written
window of ``batch_length + 1`` rows, per env ``rows - batch_length``) number at least
``batch_size``, and ``n_updates(i)`` is the closed form's difference between the ends of
ticks ``i`` and ``i - 1``. All of it is integer arithmetic on the absolute, unbatched tick
(a static trip count under the seed vmap, docs/design.md §2.4). The updates of a tick run after all
of its rows are added (deviation D34); the closed form is exact where the reference's float
``prev`` is (deviation D26).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import jax
import jax.numpy as jnp

from agents.dreamerv3.config import check_ratio


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Updates per tick for ``n_envs`` lockstep streams (host-side constants, jnp per tick).

    Attributes:
      n_envs: rows per tick.
      batch_size: ``B``, also the item count that opens the gate.
      batch_length: trained steps per window ``T`` (a window is ``T + 1`` rows).
      train_ratio: replayed trained steps per env transition (the reference's
        ``run.train_ratio``).
    """

    n_envs: int
    batch_size: int
    batch_length: int
    train_ratio: float

    def __post_init__(self) -> None:
        if self.ratio < 0:
            raise ValueError(f"train_ratio must be >= 0, got {self.train_ratio}")
        check_ratio(self.train_ratio, self.batch_size, self.batch_length)

    @property
    def ratio(self) -> Fraction:
        """``r = train_ratio / (B T)`` as an exact fraction (updates per transition)."""
        return Fraction(self.train_ratio) / (self.batch_size * self.batch_length)

    def items_after(self, tick: int, env: int) -> int:
        """Host: replay items once env ``env`` of tick ``tick`` has added its row."""
        rows_done, rows_todo = tick + 1, tick  # envs 0..env have one row more
        per = lambda rows: max(0, rows - self.batch_length)  # noqa: E731
        return (env + 1) * per(rows_done) + (self.n_envs - env - 1) * per(rows_todo)

    @property
    def gate(self) -> tuple[int, int]:
        """Host: ``(tick, transition)`` of the first update; ``transition`` is the reference's
        1-based step counter ``s0`` (1040 with 16 envs, B 16, T 64)."""
        tick = self.batch_length  # no env has an item before its row T (0-based)
        while True:
            for env in range(self.n_envs):
                if self.items_after(tick, env) >= self.batch_size:
                    return tick, self.n_envs * tick + env + 1
            tick += 1

    def cumulative(self, transitions: jax.Array) -> jax.Array:
        """Updates run once ``transitions`` (int32, any shape) transitions are in: 0 before
        the gate, ``1 + floor((s - s0) r)`` from it on (integer arithmetic, no overflow for
        ``p q < 2**31`` where ``r = p / q``)."""
        s = jnp.asarray(transitions, jnp.int32)
        r = self.ratio
        if r == 0:
            return jnp.zeros_like(s)
        p, q = r.numerator, r.denominator
        d = jnp.maximum(s - self.gate[1], 0)
        ups = 1 + (d // q) * p + ((d % q) * p) // q
        return jnp.where(s >= self.gate[1], ups, 0).astype(jnp.int32)

    def n_updates(self, tick: jax.Array) -> jax.Array:
        """Updates after the rows of absolute tick ``tick`` are added (int32, unbatched)."""
        tick = jnp.asarray(tick, jnp.int32)
        n = self.n_envs
        return self.cumulative(n * (tick + 1)) - self.cumulative(n * tick)

    def updates_through(self, tick: int) -> int:
        """Host: total updates after ticks ``0..tick``."""
        return int(self.cumulative(self.n_envs * (tick + 1)))
