"""The static TD-MPC2 update schedule: arithmetic on the absolute, unbatched tick.

docs/design.md §7.4.

Ticks follow the static row collector: episode ``e`` occupies ticks ``e*(T+1) ..
e*(T+1)+T``; phase ``T`` is the hold tick (no env step), every other tick is a stepping
tick on which each of the ``n_envs`` envs takes one agent step.

The reference online loop (b67b21c ``trainer/online_trainer.py:67-117``, one env) takes a
random action at steps ``0..S`` (``step <= seed_steps``), runs a burst of ``S`` updates
right after step ``S`` and then one update per step. Generalised to ``n_envs`` envs
(deviation T29): the seed phase lasts up to and including the *burst tick*, the first
stepping tick after which the total env steps exceed ``S`` and at least one round of
episodes has been committed; the burst has ``S`` updates; afterwards every stepping tick
has ``n_envs`` updates (UTD 1 per env step) and hold ticks none. For ``n_envs = 1`` this
is exactly the reference (pinned by ``tests/agents/tdmpc2/test_schedule.py``).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Static schedule for episodes of ``T`` agent steps, ``n_envs`` envs, ``seed_steps`` S."""

    T: int
    n_envs: int
    seed_steps: int

    @property
    def burst_tick(self) -> int:
        """First stepping tick after which n_envs * (stepping ticks so far) > S, and not
        before the first committed round (tick T + 1 is the first stepping tick after the
        first hold tick T)."""
        c = self.seed_steps // self.n_envs + 1  # stepping ticks needed to exceed S
        tick = (c - 1) + (c - 1) // self.T  # the c-th stepping tick (0-based)
        return max(tick, self.T + 1)

    def is_stepping(self, tick: jax.Array) -> jax.Array:
        return jnp.asarray(tick) % (self.T + 1) != self.T

    def random_actions(self, tick: jax.Array) -> jax.Array:
        """Seed phase: uniform random actions on every tick up to and including the burst."""
        return jnp.asarray(tick) <= self.burst_tick

    def n_updates(self, tick: jax.Array) -> jax.Array:
        """Updates to run after the rows of ``tick`` are in the buffer (int32, unbatched)."""
        tick = jnp.asarray(tick)
        after = (tick > self.burst_tick) & self.is_stepping(tick)
        n = jnp.where(after, self.n_envs, 0)
        return jnp.where(tick == self.burst_tick, self.seed_steps, n).astype(jnp.int32)

    def env_steps_through(self, tick: jax.Array) -> jax.Array:
        """Total agent env steps over all envs after ticks 0..tick."""
        k = jnp.asarray(tick) + 1
        return self.n_envs * (k - k // (self.T + 1))
