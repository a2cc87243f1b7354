"""TD-MPC2 layers and numerics of the world model (tdmpc2@5f6fade ``tdmpc2/common/layers.py``).

``MLPHead`` (NormedLinear stack + output layer, optional SimNorm output), ``simnorm``, the
torch-matching ``tanh`` and ``rounded``, parameter counting and the zero-init of output
kernels. :mod:`agents.tdmpc2.world_model` composes them into the five heads.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from agents.common.blocks import NormedMLP, linear, tdmpc2_kernel_init

__all__ = [
    "SHIFT_PAD",
    "MLPHead",
    "PixelEncoder",
    "count_params",
    "draw_shifts",
    "pixel_preprocess",
    "rounded",
    "shift_crop",
    "simnorm",
    "tanh",
    "zero_out_kernel",
]

Params = dict[str, Any]


def simnorm(x: jax.Array, group: int) -> jax.Array:
    """Simplicial normalisation: softmax over consecutive groups of ``group`` features.

    ``x [..., D] -> [..., D]`` with ``D % group == 0`` (reference ``layers.py:30-47``).
    """
    shape = x.shape
    if shape[-1] % group:
        raise ValueError(f"last dim {shape[-1]} is not a multiple of simnorm_dim={group}")
    y = jax.nn.softmax(x.reshape(*shape[:-1], shape[-1] // group, group), axis=-1)
    return y.reshape(shape)


class MLPHead(nn.Module):
    """TD-MPC2 ``mlp()`` (``layers.py:85-97``): NormedLinear(Mish) hidden layers + output layer.

    Fields:
        hidden_layers / hidden_units: the hidden stack (all layers equally wide).
        out_features: output width.
        simnorm_dim: when > 0 the output layer is Dense -> LayerNorm -> SimNorm(simnorm_dim)
            (encoder, dynamics); when 0 a plain Dense (reward, Q, pi).
        dropout: dropout rate on the first hidden layer's linear output (Q members).

    Shapes: ``x [..., in] -> [..., out_features]``.
    """

    hidden_layers: int
    hidden_units: int
    out_features: int
    simnorm_dim: int = 0
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool = True) -> jax.Array:
        init = tdmpc2_kernel_init()
        x = NormedMLP(
            layers=self.hidden_layers,
            units=self.hidden_units,
            act="mish",
            norm="layer",
            kernel_init=init,
            dropout=self.dropout,
            name="hidden",
        )(x, deterministic=deterministic)
        x = linear(self.out_features, init, name="out")(x)
        if self.simnorm_dim:
            x = nn.LayerNorm(epsilon=1e-5, use_fast_variance=False, name="out_norm")(x)
            x = simnorm(x, self.simnorm_dim)
        return x


_F32_MAX = float(np.finfo(np.float32).max)


def rounded(x: jax.Array) -> jax.Array:
    """``x`` unchanged (finite values), but rounded to float32 before any further arithmetic.

    XLA's CPU backend contracts ``a * b + c`` inside a fusion into one FMA (a single
    rounding), whereas torch rounds the product first. That is harmless almost everywhere,
    but the policy squash ``1 - tanh(u)^2`` cancels catastrophically near saturation, where
    one rounding step of ``tanh(u)^2`` changes ``log(1 - tanh(u)^2 + 1e-6)`` by up to ~0.06 (T4).
    ``max(x, -FLT_MAX)`` is an identity for finite ``x`` (gradient 1) that the compiler cannot
    fuse through, so the product is rounded exactly as the reference rounds it.
    """
    return jnp.maximum(x, -_F32_MAX)


@jax.custom_jvp
def tanh(x: jax.Array) -> jax.Array:
    """Elementwise tanh accurate to ~1 ulp near saturation, with torch's gradient ``1 - y^2``.

    XLA's ``tanh`` returns exactly +-1 for ``|x| >= ~7.9`` (the correctly rounded float32 value
    is ``1 - k 2^-24`` up to ``|x| ~ 9.01``), which turns the policy's squash term
    ``log(relu(1 - tanh(u)^2) + 1e-6)`` from ``log(1.19e-7 + 1e-6)`` into ``log(1e-6)`` (0.11
    lower per saturated dimension) and zeroes its gradient. The reference's torch ``tanh``
    is ~1 ulp accurate there. For ``|x| >= 0.625`` we use ``1 - 2 / (exp(2|x|) + 1)`` (within
    1 ulp of the correctly rounded value), below that XLA's ``tanh`` (within 4 ulp). T4.
    """
    ax = jnp.minimum(jnp.abs(x), 20.0)  # tanh(20) rounds to 1; avoids exp overflow
    big = 1.0 - 2.0 / (jnp.exp(2.0 * ax) + 1.0)
    return jnp.where(ax < 0.625, jnp.tanh(x), jnp.sign(x) * big)


@tanh.defjvp
def _tanh_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[jax.Array, jax.Array]:
    (x,), (t,) = primals, tangents
    y = tanh(x)
    return y, t * (1.0 - y * y)  # torch's tanh_backward


def count_params(params: Any) -> int:
    """Total number of scalars in a parameter pytree."""
    return int(sum(int(x.size) for x in jax.tree_util.tree_leaves(params)))


def zero_out_kernel(head: Params) -> Params:
    """Copy of an ``MLPHead`` tree with its output kernel set to 0 (``world_model.py:30``)."""
    out = dict(head["out"])
    out["kernel"] = jnp.zeros_like(out["kernel"])
    return {**head, "out": out}


# ------------------------------------------------------------------------------ pixels
SHIFT_PAD = 3  # ShiftAug() in conv() keeps its default pad=3 (layers.py:32,132), not DrQ's 4


def draw_shifts(key: jax.Array, batch_shape: tuple[int, ...]) -> jax.Array:
    """``int32 [*batch_shape, 2]`` shifts (x, y), each uniform in ``[0, 2 * SHIFT_PAD]``: the
    reference's ``torch.randint(0, 2 * pad + 1, (n, 1, 1, 2))`` (``layers.py:47``), one per image
    and per ``encode`` call (T1: drawn from a JAX key and passed in explicitly)."""
    return jax.random.randint(key, (*batch_shape, 2), 0, 2 * SHIFT_PAD + 1, jnp.int32)


def shift_crop(x: jax.Array, shift: jax.Array) -> jax.Array:
    """Random-shift augmentation with given shifts (reference ``ShiftAug``, ``layers.py:36-50``).

    ``x [..., S, S, C]`` (any dtype), ``shift int32 [..., 2]`` (x, y) ->
    ``[..., S, S, C]`` float32: edge-replicate pad by ``SHIFT_PAD``, then the ``S x S`` window
    whose top-left corner is ``(y, x)``. The reference samples the padded image with
    ``grid_sample`` (bilinear, ``align_corners=False``) at grid points that are pixel centres
    up to float rounding; here the window is cut out exactly (T51).

    Pad and window move ``x``'s own dtype (uint8 frames: a quarter of float32's bytes) and the
    float32 cast comes last: pure data movement, so the values are the same in either order.
    """
    p = SHIFT_PAD
    *batch, s, s2, c = x.shape
    flat = x.reshape(-1, s, s2, c)
    padded = jnp.pad(flat, ((0, 0), (p, p), (p, p), (0, 0)), mode="edge")
    sh = shift.reshape(-1, 2)

    def one(img: jax.Array, xy: jax.Array) -> jax.Array:
        return jax.lax.dynamic_slice(img, (xy[1], xy[0], 0), (s, s2, c))

    return jax.vmap(one)(padded, sh).reshape(*batch, s, s2, c).astype(jnp.float32)


def pixel_preprocess(x: jax.Array) -> jax.Array:
    """``x / 255 - 0.5`` (reference ``PixelPreprocess``, ``layers.py:61-62``), float32."""
    return x.astype(jnp.float32) / 255.0 - 0.5


def _torch_conv_init(fan_in: int) -> Any:
    """torch's default ``Conv2d`` init, kept by the reference (``init.weight_init`` only
    re-initialises Linear/Embedding/ParameterList, ``init.py:4-16``): U(-1/sqrt(fan_in), +)
    for the kernel (kaiming_uniform with a = sqrt(5)) and the bias alike."""
    bound = 1.0 / np.sqrt(fan_in)

    def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


class PixelEncoder(nn.Module):
    """The reference's pixel encoder ``conv(in_shape, num_channels, act=SimNorm)``
    (``layers.py:125-139``) after its shift augmentation (:func:`shift_crop`, applied by the
    caller so that the shifts stay explicit).

    Fields: ``channels`` (``num_channels``), ``simnorm_dim``.

    Shapes: ``x [..., 64, 64, C_in]`` float (0..255, already shifted) ->
    ``[..., channels * 4 * 4]``: preprocess, Conv 7x7/2 -> ReLU -> 5x5/2 -> ReLU -> 3x3/2 ->
    ReLU -> 3x3/1 (valid padding; 64 -> 29 -> 13 -> 6 -> 4), flattened in torch's (C, H, W)
    order so SimNorm's groups of ``simnorm_dim`` are the reference's, then SimNorm (no
    LayerNorm, unlike the MLP heads).
    """

    channels: int
    simnorm_dim: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        *batch, s, s2, c_in = x.shape
        if (s, s2) != (64, 64):
            raise ValueError(f"the reference's conv encoder takes 64x64 images, got {s}x{s2}")
        h = pixel_preprocess(x).reshape(-1, s, s2, c_in)
        c_prev = c_in
        for i, (k, stride) in enumerate(((7, 2), (5, 2), (3, 2), (3, 1))):
            init = _torch_conv_init(c_prev * k * k)
            conv = nn.Conv(
                self.channels,
                (k, k),
                (stride, stride),
                "VALID",
                kernel_init=init,
                bias_init=init,
                name=f"conv_{i}",
            )
            h = conv(h)
            h = jax.nn.relu(h) if i < 3 else h
            c_prev = self.channels
        h = jnp.transpose(h, (0, 3, 1, 2)).reshape(h.shape[0], -1)  # torch's Flatten order
        return simnorm(h.reshape(*batch, -1), self.simnorm_dim)
