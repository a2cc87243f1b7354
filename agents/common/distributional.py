"""Symlog transforms and the two-hot discrete regression head shared by both agents.

docs/design.md §6 (``distributional``). DreamerV3 (2411f7d ``symexp_twohot``) and TD-MPC2
(b67b21c ``two_hot`` / ``two_hot_inv`` / ``soft_ce``) regress scalars (rewards, values)
with a categorical over fixed bins: targets are encoded as two-hot weights by linear
interpolation between the two neighbouring bins, predictions are decoded as the
expectation of the bins under ``softmax(logits)``. The two agents differ in where the
bins live:

* DreamerV3: bins ``symexp(linspace(-20, 20, 255))`` in raw space, no transform
  (interpolation and expectation in raw space).
* TD-MPC2: bins ``linspace(-10, 10, 101)`` in symlog space; targets are ``symlog``-ed and
  clipped before interpolation, the expectation is ``symexp``-ed after.

Deviations (docs/deviations.md): D22 (DreamerV3 bins are float32 roundings of float64
constants; exact symmetric expectation), T24 (TD-MPC2 symmetric bins only, same symmetric
expectation, searchsorted encoding).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["TwoHot", "symexp", "symlog"]

_TRANSFORMS = ("identity", "symlog")


def symlog(x: jax.Array) -> jax.Array:
    """``sign(x) * log1p(|x|)``, elementwise; shape and dtype of ``x`` preserved.

    docs/design.md §6. The gradient at 0 is 0 (as in both references, which use the same
    sign/abs form); it is finite everywhere.
    """
    x = jnp.asarray(x)
    return jnp.sign(x) * jnp.log1p(jnp.abs(x))


def symexp(x: jax.Array) -> jax.Array:
    """``sign(x) * expm1(|x|)``, the inverse of :func:`symlog`; shape and dtype preserved.

    docs/design.md §6.
    """
    x = jnp.asarray(x)
    return jnp.sign(x) * jnp.expm1(jnp.abs(x))


def _mirrored_bins(num_bins: int, limit: float, raw_space: bool) -> tuple[float, ...]:
    """Bins of ``linspace(-limit, limit, num_bins)`` (optionally symexp-ed), exactly symmetric.

    The non-negative half is computed in float64 as ``limit * (2n - (K-1)) / (K-1)`` for
    ``n >= (K-1)/2`` (exactly 0 at the middle for odd K, exactly ``limit`` at the end),
    optionally mapped through ``sign * expm1(|.|)`` in float64, rounded to float32, and
    mirrored by negation (exact). Returns K Python floats, each exactly a float32
    (D22, T24).
    """
    if num_bins < 2:
        raise ValueError(f"num_bins must be >= 2, got {num_bins}")
    if not limit > 0:
        raise ValueError(f"limit must be > 0, got {limit}")
    k = num_bins
    n = np.arange(k // 2, k, dtype=np.float64)
    upper = float(limit) * (2.0 * n - (k - 1)) / (k - 1)
    if raw_space:
        upper = np.sign(upper) * np.expm1(np.abs(upper))
    upper32 = upper.astype(np.float32)
    lower32 = -upper32[::-1]
    if k % 2:  # drop the mirrored copy of the middle bin (exactly 0)
        lower32 = lower32[:-1]
    bins = np.concatenate([lower32, upper32])
    return tuple(float(b) for b in bins)


@dataclasses.dataclass(frozen=True)
class TwoHot:
    """Two-hot encoding / expectation decoding over fixed, exactly symmetric bins.

    docs/design.md §6; deviations D22 (DreamerV3 variant) and T24 (TD-MPC2 variant).

    Attributes:
        bins: K bin positions in interpolation space, float32-representable Python floats,
            strictly ascending and exactly symmetric (``bins[k] == -bins[K-1-k]``).
        transform: ``"identity"`` (interpolate and take the expectation in raw space,
            DreamerV3) or ``"symlog"`` (interpolate ``symlog(y)``, decode with ``symexp``,
            TD-MPC2).

    Frozen and built from a tuple and a string, so instances are hashable and can be
    passed as static arguments to ``jax.jit``. All methods compute in float32 and accept
    arbitrary leading batch dims ``[...]``.
    """

    bins: tuple[float, ...]
    transform: str = "identity"

    def __post_init__(self) -> None:
        if self.transform not in _TRANSFORMS:
            raise ValueError(f"transform must be one of {_TRANSFORMS}, got {self.transform!r}")
        b = np.asarray(self.bins, dtype=np.float64)
        if b.ndim != 1 or b.size < 2:
            raise ValueError("bins must be a flat tuple of at least 2 floats")
        if not np.array_equal(b.astype(np.float32).astype(np.float64), b):
            raise ValueError("bins must be exactly representable in float32")
        if not np.all(np.diff(b) > 0):
            raise ValueError("bins must be strictly ascending")
        if not np.array_equal(b, -b[::-1]):
            raise ValueError("bins must be exactly symmetric: bins[k] == -bins[K-1-k]")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def dreamerv3(cls, num_bins: int = 255, limit: float = 20.0) -> TwoHot:
        """DreamerV3 bins ``symexp(linspace(-limit, limit, K))``, raw-space interpolation.

        docs/design.md §6, D22: the non-negative half is computed in float64, rounded to float32
        and mirrored, so the set is exactly symmetric and (odd K) the middle bin is 0;
        ``bins[-1] == float32(symexp(limit))``.
        """
        return cls(bins=_mirrored_bins(num_bins, limit, raw_space=True), transform="identity")

    @classmethod
    def tdmpc2(cls, num_bins: int = 101, limit: float = 10.0) -> TwoHot:
        """TD-MPC2 bins ``linspace(-limit, limit, K)`` in symlog space (``vmin = -vmax``).

        docs/design.md §6, T24: float64 constants rounded to float32 and mirrored; encode clips
        ``symlog(y)`` into ``[-limit, limit]``, decode applies ``symexp`` to the expectation.
        """
        return cls(bins=_mirrored_bins(num_bins, limit, raw_space=False), transform="symlog")

    # ------------------------------------------------------------------ properties
    @property
    def num_bins(self) -> int:
        """K, the number of bins."""
        return len(self.bins)

    @property
    def bins_array(self) -> jax.Array:
        """The bins as a float32 array ``[K]`` (exact: the tuple holds float32 values)."""
        return jnp.asarray(np.asarray(self.bins, dtype=np.float32))

    # ------------------------------------------------------------------ transforms
    def _forward(self, y: jax.Array) -> jax.Array:
        return symlog(y) if self.transform == "symlog" else y

    def _inverse(self, t: jax.Array) -> jax.Array:
        return symexp(t) if self.transform == "symlog" else t

    # ------------------------------------------------------------------ methods
    def encode(self, y: jax.Array) -> jax.Array:
        """Two-hot weights of targets ``y [...]`` -> ``[..., K]`` float32, summing to 1.

        docs/design.md §6 (D22, T24). ``t = transform(y)`` is clipped to ``[bins[0], bins[-1]]``;
        ``lo`` is the last bin ``<= t`` and ``hi`` the first bin ``>= t`` (searchsorted);
        when ``t`` equals a bin exactly, ``lo == hi`` and that bin gets weight 1.0.
        Otherwise ``w_hi = (t - b_lo) / (b_hi - b_lo)`` and ``w_lo = 1 - w_hi``. At most two
        adjacent weights are non-zero.
        """
        bins = self.bins_array
        k = self.num_bins
        t = self._forward(jnp.asarray(y, jnp.float32))
        t = jnp.clip(t, bins[0], bins[-1])
        lo = jnp.clip(jnp.searchsorted(bins, t, side="right", method="compare_all") - 1, 0, k - 1)
        hi = jnp.clip(jnp.searchsorted(bins, t, side="left", method="compare_all"), 0, k - 1)
        b_lo = bins[lo]
        b_hi = bins[hi]
        exact = lo == hi
        w_hi = jnp.where(exact, 0.0, (t - b_lo) / jnp.where(exact, 1.0, b_hi - b_lo))
        w_lo = 1.0 - w_hi
        one_lo = jax.nn.one_hot(lo, k, dtype=jnp.float32)
        one_hi = jax.nn.one_hot(hi, k, dtype=jnp.float32)
        return w_lo[..., None] * one_lo + w_hi[..., None] * one_hi

    def _mirror_pair_sum(self, v: jax.Array) -> jax.Array:
        """``sum_{i<j=K-1-i} (v_j - v_i) * b_j`` over the last axis: ``[..., K] -> [...]``."""
        k = self.num_bins
        if v.shape[-1] != k:
            raise ValueError(f"expected last dim {k}, got shape {v.shape}")
        half = k // 2
        b_upper = self.bins_array[k - half :]  # bins j = K-half .. K-1 (all > 0)
        v_upper = v[..., k - half :]
        v_lower_mirrored = v[..., :half][..., ::-1]  # v_i for i = K-1-j, aligned with j
        return jnp.sum((v_upper - v_lower_mirrored) * b_upper, axis=-1)

    def decode_probs(self, p: jax.Array) -> jax.Array:
        """Expectation of the bins under probabilities ``p [..., K]`` -> ``[...]`` float32.

        docs/design.md §6, D22/T24. Computed over mirror pairs ``(i, j = K-1-i)``, ``i < j``, as
        ``sum_i (p_j - p_i) * b_j`` (the middle bin of odd K is exactly 0 and contributes
        nothing), so mirror-equal probabilities (``p_i == p_j``, e.g. uniform) give exactly
        0.0, also under ``jax.jit`` where XLA fuses the naive ``p_i*b_i + p_j*b_j`` pairs into
        FMAs. Then the inverse transform (``symexp`` for ``"symlog"``).
        """
        return self._inverse(self._mirror_pair_sum(jnp.asarray(p, jnp.float32)))

    def decode(self, logits: jax.Array) -> jax.Array:
        """Expected value under ``softmax(logits)``: ``[..., K]`` -> ``[...]`` float32.

        docs/design.md §6 (D22, T24). Equals ``decode_probs(softmax(logits))`` up to float32
        rounding, computed as ``sum_i (e_j - e_i) b_j / sum_k e_k`` with
        ``e = exp(logits - max)``: the normalisation comes after the pair differences.
        Reason: if ``p = e * (1/sum)`` is formed in the same XLA fusion as ``p_j - p_i``,
        LLVM contracts ``e_j*r - e_i*r`` into ``fma(e_j, r, -(e_i*r))``, which is not 0 for
        ``e_i == e_j``; differencing ``e`` first keeps mirror-symmetric logits (uniform ones
        included) at exactly 0.0 under ``jax.jit``.
        """
        logits = jnp.asarray(logits, jnp.float32)
        shift = jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
        e = jnp.exp(logits - shift)
        mean = self._mirror_pair_sum(e) / jnp.sum(e, axis=-1)
        return self._inverse(mean)

    def loss(self, logits: jax.Array, y: jax.Array) -> jax.Array:
        """Cross-entropy ``-sum_k encode(y)_k * (logits_k - logsumexp(logits))``.

        docs/design.md §6. ``logits [..., K]``, ``y [...]`` -> per-element loss ``[...]`` float32.
        ``y`` is differentiable through the interpolation weights; callers stop the gradient
        of their targets, as both references do.
        """
        logits = jnp.asarray(logits, jnp.float32)
        log_p = logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True)
        return -jnp.sum(self.encode(y) * log_p, axis=-1)
