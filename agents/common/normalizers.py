"""Percentile-based scale normalisers: TD-MPC2 ``RunningScale`` and DreamerV3 ``retnorm``.

docs/design.md §6 (``normalizers``). Both normalisers track a batch percentile range with an
exponential moving average written as ``optax.incremental_update``
(``new = step * target + (1 - step) * old``) and share one percentile helper
(``jnp.percentile``, linear interpolation, over all elements). Deviation T25 (EMA form of
RunningScale).

Usage (update, then read, as both references do)::

    rs = RunningScale()
    s = rs.init()
    s = rs.update(s, q)            # q: any shape
    q_scaled = q / s
    # a what-if only (T49): one scale per task, s [K] and ids [B] the rows' tasks
    s = rs.update_per_group(jnp.ones(K), q, ids)

    rn = ReturnNormalizer()
    st = rn.init()
    st = rn.update(st, ret)        # ret: any shape
    offset, scale = rn.scale(st)
"""

from __future__ import annotations

import dataclasses

import flax.struct
import jax
import jax.numpy as jnp
import optax

__all__ = ["ReturnNormState", "ReturnNormalizer", "RunningScale", "percentile_range"]


def percentile_range(x: jax.Array, lo_pct: float, hi_pct: float) -> tuple[jax.Array, jax.Array]:
    """The ``lo_pct`` and ``hi_pct`` percentiles of all elements of ``x`` (any shape).

    docs/design.md §6. Linear interpolation between order statistics (``jnp.percentile``,
    ``method="linear"``; position ``p/100 * (N-1)``), computed with one sort. Returns two
    scalars in float32.
    """
    flat = jnp.ravel(jnp.asarray(x, jnp.float32))
    q = jnp.percentile(flat, jnp.asarray([lo_pct, hi_pct], jnp.float32), method="linear")
    return q[0], q[1]


@dataclasses.dataclass(frozen=True)
class RunningScale:
    """TD-MPC2 ``RunningScale`` (``common/scale.py``) as a pure function of a scalar state.

    docs/design.md §6, deviation T25. State: a float32 scalar ``S``, initially 1. Update with a
    batch ``x`` (any shape; TD-MPC2 passes ``Q[0]`` of shape ``[B, 1]``):
    ``S <- incremental_update(max(1, p_hi(x) - p_lo(x)), S, tau)``, i.e.
    ``tau * target + (1 - tau) * S``. Callers update before dividing:
    ``s = rs.update(s, q); q / s``.

    Attributes:
        tau: EMA step size (TD-MPC2 ``tau`` = 0.01).
        percentiles: (lo, hi) percentiles, default (5, 95).
    """

    tau: float = 0.01
    percentiles: tuple[float, float] = (5.0, 95.0)

    def init(self) -> jax.Array:
        """Initial scale: float32 scalar ``1.0`` (shape ``[]``)."""
        return jnp.ones((), jnp.float32)

    def update(self, value: jax.Array, x: jax.Array) -> jax.Array:
        """New scale ``[]`` from the current ``value []`` and a batch ``x`` of any shape (T25)."""
        lo, hi = percentile_range(x, *self.percentiles)
        target = jnp.maximum(1.0, hi - lo)
        return optax.incremental_update(target, jnp.asarray(value, jnp.float32), self.tau)

    def update_per_group(self, values: jax.Array, x: jax.Array, ids: jax.Array) -> jax.Array:
        """One scale per group (deviation T49, a what-if; the reference keeps one scale).

        ``values [K]``: the groups' scales; ``x [B, ...]``: the batch, row ``b`` of group
        ``ids[b]`` (``ids [B]`` int). Group ``k``'s scale takes :meth:`update`'s step on the
        rows of group ``k`` alone (the same linear percentiles, over those rows' elements); a
        group with no row in ``x`` keeps its scale. Returns ``[K]`` float32.
        """
        values = jnp.asarray(values, jnp.float32)
        x = jnp.reshape(jnp.asarray(x, jnp.float32), (x.shape[0], -1))
        mine = jnp.asarray(ids)[None, :] == jnp.arange(values.shape[0])[:, None]  # [K, B]
        rows = jnp.where(mine[:, :, None], x[None], jnp.nan).reshape(values.shape[0], -1)
        pct = jnp.asarray(self.percentiles, jnp.float32)
        q = jnp.nanpercentile(rows, pct, axis=1, method="linear")  # [2, K]; NaN: no rows
        target = jnp.maximum(1.0, q[1] - q[0])
        stepped = optax.incremental_update(target, values, self.tau)
        return jnp.where(jnp.any(mine, axis=1), stepped, values)


@flax.struct.dataclass
class ReturnNormState:
    """DreamerV3 return-normaliser state: EMAs of the low and high return percentiles.

    docs/design.md §6. ``lo``, ``hi``: float32 scalars ``[]``, both initially 0 (no debiasing).
    """

    lo: jax.Array
    hi: jax.Array


@dataclasses.dataclass(frozen=True)
class ReturnNormalizer:
    """DreamerV3 ``retnorm`` (``impl: perc``) as pure functions of :class:`ReturnNormState`.

    docs/design.md §6. Update with a batch of returns ``x`` (any shape, all elements pooled):
    ``lo <- incremental_update(p_lo(x), lo, rate)``, ``hi <- incremental_update(p_hi(x), hi,
    rate)``; read ``(offset, scale) = (lo, max(limit, hi - lo))``. Both EMAs start at 0 with
    no debiasing. Callers update, then read, in the same step.

    Attributes:
        rate: EMA step size (0.01).
        limit: lower bound of the scale (1.0).
        percentiles: (lo, hi) percentiles, default (5, 95).
    """

    rate: float = 0.01
    limit: float = 1.0
    percentiles: tuple[float, float] = (5.0, 95.0)

    def init(self) -> ReturnNormState:
        """Initial state: ``lo = hi = 0.0`` (float32 scalars ``[]``)."""
        return ReturnNormState(lo=jnp.zeros((), jnp.float32), hi=jnp.zeros((), jnp.float32))

    def update(self, state: ReturnNormState, x: jax.Array) -> ReturnNormState:
        """Move both EMAs towards the percentiles of ``x`` (any shape); scalars ``[]``."""
        lo, hi = percentile_range(x, *self.percentiles)
        return ReturnNormState(
            lo=optax.incremental_update(lo, jnp.asarray(state.lo, jnp.float32), self.rate),
            hi=optax.incremental_update(hi, jnp.asarray(state.hi, jnp.float32), self.rate),
        )

    def scale(self, state: ReturnNormState) -> tuple[jax.Array, jax.Array]:
        """``(offset, scale) = (lo, max(limit, hi - lo))``, float32 scalars ``[]``."""
        return state.lo, jnp.maximum(self.limit, state.hi - state.lo)
