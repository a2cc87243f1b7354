"""Shared Flax building blocks: initializers, dense layer, activations, norms, NormedMLP.

docs/design.md §6 (``blocks``). Only what both agents use:

* DreamerV3 (2411f7d ``nets.py``): fan-in truncated-normal kernels
  (:func:`dreamerv3_kernel_init`, D23), RMSNorm eps 1e-4 without offset, SiLU, bias kept.
* TD-MPC2 (b67b21c ``layers.py`` / ``init.py``): N(0, 0.02) kernels
  (:func:`tdmpc2_kernel_init`), LayerNorm eps 1e-5, Mish, dropout on the first hidden
  layer's linear output (before the norm) of each Q member.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = [
    "ACTIVATIONS",
    "Dense",
    "NormedMLP",
    "RMSNorm",
    "activation",
    "cast",
    "dense_matmul",
    "dreamerv3_kernel_init",
    "linear",
    "mish",
    "tdmpc2_kernel_init",
]

Initializer = Callable[..., jax.Array]


def cast(x: jax.Array, dtype: Any) -> jax.Array:
    """``x`` in ``dtype``; ``x`` itself when ``dtype`` is None or already its dtype, so a
    float32 model traces to the same program with or without the casts (DreamerV3's
    ``cast_to_compute``, dreamerv3@29eb964 ``jaxutils.py:24-27``)."""
    if dtype is None or x.dtype == dtype:
        return x
    return x.astype(dtype)


def dreamerv3_kernel_init(outscale: float = 1.0) -> Initializer:
    """DreamerV3 ``winit: normal`` kernel initializer (docs/design.md §6, D23).

    ``variance_scaling(outscale**2, "fan_in", "truncated_normal")``: a standard normal
    truncated to ``[-2, 2]``, divided by its std (0.87962566), times
    ``outscale / sqrt(fan_in)``; so the samples have std ``outscale / sqrt(fan_in)`` and
    ``|w| <= 2.2737 * outscale / sqrt(fan_in)``. For a Dense kernel ``[in, out]`` the fan-in
    is ``in``. ``outscale = 0`` gives zeros (reward and critic output layers).
    """
    return jax.nn.initializers.variance_scaling(outscale**2, "fan_in", "truncated_normal")


def tdmpc2_kernel_init() -> Initializer:
    """TD-MPC2 kernel initializer: untruncated ``N(0, 0.02**2)`` (docs/design.md §6).

    torch's ``trunc_normal_(std=0.02)`` keeps its default absolute bounds ``a=-2, b=2``,
    i.e. +-100 sigma, so it is a plain normal for all practical purposes; JAX's
    ``truncated_normal(0.02)`` would truncate at +-2 sigma and is not equivalent.
    """
    return jax.nn.initializers.normal(stddev=0.02)


@jax.custom_vjp
def dense_matmul(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """``x [..., in] @ kernel [in, out] -> [..., out]``, with the kernel gradient computed
    as the transpose of ``g^T x`` (``[out, in]``, rows contracted) instead of ``x^T g``.

    Same products and the same maths as autodiff of ``x @ kernel``; XLA may sum in another
    order, so gradients can differ in the last bits (tests/agents/common/test_blocks.py
    bounds them against float64). XLA:CPU runs ``x^T g`` with the many rows as the
    contracted, major axis well below the speed of ``g^T x`` (a dense layer of 16,384 rows,
    640 -> 64: 34.6 ms before this form, 20.7 ms after; docs/PERFORMANCE.md, DreamerV3 "What
    changed (issue 28)"), and folds a plain transpose of ``g^T x`` back into ``x^T g``; the
    optimization barrier keeps the faster form. Reverse mode only (``jax.custom_vjp``: no
    ``jax.jvp``).
    """
    return x @ kernel


def _dense_fwd(x: jax.Array, kernel: jax.Array) -> tuple[jax.Array, tuple]:
    return x @ kernel, (x, kernel)


def _dense_bwd(res: tuple, g: jax.Array) -> tuple[jax.Array, jax.Array]:
    x, kernel = res
    rows_x = x.reshape(-1, x.shape[-1])
    rows_g = g.reshape(-1, g.shape[-1])
    kernel_t = jax.lax.optimization_barrier(rows_g.T @ rows_x)
    return g @ kernel.T, kernel_t.T


dense_matmul.defvjp(_dense_fwd, _dense_bwd)


class Dense(nn.Module):
    """``nn.Dense`` (same params ``kernel [in, features]``, ``bias [features]``, same names
    and init) computed with :func:`dense_matmul`: ``[..., in] -> [..., features]``.

    ``dtype``: the compute dtype; the input, the float32 kernel and the bias are cast to it
    and the output is in it (DreamerV3's ``Linear`` in bfloat16, dreamerv3@29eb964
    ``nets.py:619-637``). None computes in the input's dtype, with no cast."""

    features: int
    use_bias: bool = True
    kernel_init: Initializer = nn.initializers.lecun_normal()
    bias_init: Initializer = nn.initializers.zeros
    dtype: Any = None

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kernel = self.param("kernel", self.kernel_init, (x.shape[-1], self.features))
        y = dense_matmul(cast(x, self.dtype), cast(kernel, self.dtype))
        if self.use_bias:
            y = y + cast(self.param("bias", self.bias_init, (self.features,)), self.dtype)
        return y


def linear(
    features: int,
    kernel_init: Initializer,
    bias_init: Initializer = nn.initializers.zeros,
    use_bias: bool = True,
    name: str | None = None,
    dtype: Any = None,
) -> Dense:
    """:class:`Dense` ``(features)`` with explicit initializers.

    Maps ``[..., in] -> [..., features]``; params ``kernel [in, features]`` and (when
    ``use_bias``) ``bias [features]`` (zeros by default, as in both references).
    ``dtype``: the compute dtype (:class:`Dense`).
    """
    return Dense(
        features,
        use_bias=use_bias,
        kernel_init=kernel_init,
        bias_init=bias_init,
        dtype=dtype,
        name=name,
    )


_MISH_LINEAR_ABOVE = 20.0  # mish(x) == x in float32 from here on


def _mish_parts(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(e, n, w)`` with ``e = exp(x)``, ``n = e (e + 2)``, ``w = n + 2``.

    ``tanh(softplus(x)) = ((1 + e)^2 - 1) / ((1 + e)^2 + 1) = n / w``: one ``exp`` instead
    of the ``exp``, ``log1p`` and ``tanh`` of the textbook form.
    """
    e = jnp.exp(jnp.minimum(x, _MISH_LINEAR_ABOVE))
    n = e * (e + 2.0)
    return e, n, n + 2.0


@jax.custom_jvp
def mish(x: jax.Array) -> jax.Array:
    """Mish ``x * tanh(softplus(x))`` (TD-MPC2's activation), elementwise; docs/design.md §6.

    Computed with one ``exp`` (see :func:`_mish_parts`) and a hand-written derivative
    ``n / w + 4 x e (1 + e) / w^2`` that reuses it. Agrees with the textbook form to
    float32 rounding (tests/agents/common/test_blocks.py); it is the profile's Mish cost
    (docs/PERFORMANCE.md) that this form removes. Deviation T43 (docs/deviations.md).
    """
    _, n, w = _mish_parts(x)
    return jnp.where(x > _MISH_LINEAR_ABOVE, x, x * (n / w))


@mish.defjvp
def _mish_jvp(primals: tuple, tangents: tuple) -> tuple[jax.Array, jax.Array]:
    (x,), (t,) = primals, tangents
    e, n, w = _mish_parts(x)
    linear = x > _MISH_LINEAR_ABOVE
    y = jnp.where(linear, x, x * (n / w))
    dy = jnp.where(linear, 1.0, n / w + 4.0 * x * e * (1.0 + e) / (w * w))
    return y, dy * t


def _identity(x: jax.Array) -> jax.Array:
    return x


ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "silu": jax.nn.silu,
    "mish": mish,
    "relu": jax.nn.relu,
    "elu": jax.nn.elu,
    "tanh": jnp.tanh,
    "identity": _identity,
}


def activation(name: str) -> Callable[[jax.Array], jax.Array]:
    """The elementwise activation called ``name`` (docs/design.md §6); shape-preserving.

    Valid names: silu, mish, relu, elu, tanh, identity. Raises ``ValueError`` otherwise.
    """
    try:
        return ACTIVATIONS[name]
    except KeyError:
        valid = ", ".join(sorted(ACTIVATIONS))
        raise ValueError(f"unknown activation {name!r}; valid names: {valid}") from None


class RMSNorm(nn.Module):
    """RMS normalisation over the last axis, learnable scale, no offset (docs/design.md §6).

    ``y = x * rsqrt(mean(x**2, -1) + eps) * scale`` with the statistics and the product in
    float32; the output is cast back to the input dtype. Param: ``scale [features]``
    (float32, init ones). Input ``[..., features]`` -> output ``[..., features]``.
    DreamerV3 computes the statistics in the compute dtype (bf16 in its default config);
    we always use float32 (docs/design.md §6; identical in float32). A bfloat16 input is
    therefore rounded once, at the output, where the reference rounds ``x**2``, the mean,
    ``rsqrt``, the scaled multiplier and the product (deviation D28).

    ``grouped=True`` takes the feature axis split group-major, ``x [g, ..., F/g]`` (feature
    ``k F/g + j`` at ``x[k, ..., j]``, the layout of the DreamerV3 block GRU): the statistics
    run over axes 0 and -1, ``scale [F]`` is read as ``[g, 1, ..., F/g]``; same result as
    the flat layout up to the order of the sum.
    """

    eps: float = 1e-4
    grouped: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = jnp.asarray(x, jnp.float32)
        if self.grouped:
            g, width = x.shape[0], x.shape[-1]
            scale = self.param("scale", nn.initializers.ones, (g * width,), jnp.float32)
            scale = scale.reshape(g, *(1,) * (x.ndim - 2), width)
            axes = (0, x.ndim - 1)
        else:
            scale = self.param("scale", nn.initializers.ones, (x.shape[-1],), jnp.float32)
            axes = -1
        ms = jnp.mean(jnp.square(x32), axis=axes, keepdims=True)
        y = x32 * jax.lax.rsqrt(ms + self.eps) * scale
        return y.astype(x.dtype)


class NormedMLP(nn.Module):
    """Stack of ``layers`` hidden layers Dense -> [Dropout] -> Norm -> Act (docs/design.md §6).

    Layer ``i`` is ``dense_i`` (``units`` wide, bias kept), then for ``i == 0`` only and only
    when ``dropout > 0`` a ``Dropout(dropout)`` on the linear output (TD-MPC2 applies it
    before LayerNorm; needs a ``'dropout'`` rng when ``deterministic=False``), then
    ``norm_i`` and the activation. Returns the last hidden activation; no output layer.

    Fields:
        layers: number of hidden layers (0 returns the input unchanged).
        units: width of every hidden layer.
        act: activation name (see :func:`activation`): "silu" (DreamerV3), "mish" (TD-MPC2).
        norm: "rms" (:class:`RMSNorm`, DreamerV3) or "layer" (``nn.LayerNorm`` with
            ``use_fast_variance=False``, TD-MPC2).
        norm_eps: norm epsilon; ``None`` means 1e-4 for "rms", 1e-5 for "layer".
        kernel_init: Dense kernel initializer (default :func:`dreamerv3_kernel_init`).
        dropout: dropout rate of the first layer (TD-MPC2 Q members: 0.01).
        dtype: compute dtype of the Dense layers (:class:`Dense`; None: no cast). The norm
            returns its input's dtype and the activation keeps it, so with bfloat16 every
            layer's output is bfloat16 (DreamerV3's ``Linear``, ``nets.py:619-637``).

    Shapes: ``x [..., in] -> [..., units]``. Param tree::

        dense_{i}: {kernel: [in_i, units], bias: [units]}    in_0 = in, in_i = units
        norm_{i}:  {scale: [units]}                 (rms)
                   {scale: [units], bias: [units]}  (layer)
    """

    layers: int
    units: int
    act: str = "silu"
    norm: str = "rms"
    norm_eps: float | None = None
    kernel_init: Initializer = dreamerv3_kernel_init()
    dropout: float = 0.0
    dtype: Any = None

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool = True) -> jax.Array:
        act = activation(self.act)
        if self.norm not in ("rms", "layer"):
            raise ValueError(f"norm must be 'rms' or 'layer', got {self.norm!r}")
        for i in range(self.layers):
            x = linear(self.units, self.kernel_init, name=f"dense_{i}", dtype=self.dtype)(x)
            if i == 0 and self.dropout > 0.0:
                x = nn.Dropout(rate=self.dropout, name="dropout_0")(x, deterministic=deterministic)
            if self.norm == "rms":
                eps = 1e-4 if self.norm_eps is None else self.norm_eps
                x = RMSNorm(eps=eps, name=f"norm_{i}")(x)
            else:
                eps = 1e-5 if self.norm_eps is None else self.norm_eps
                x = nn.LayerNorm(epsilon=eps, use_fast_variance=False, name=f"norm_{i}")(x)
            x = act(x)
        return x
