"""DreamerV3 image observations: the CNN encoder and decoder and the image loss (issue 47).

Reference 29eb964 (= 2411f7d + the prevact fix) ``nets.py:223-367`` (``SimpleEncoder``,
``SimpleDecoder``), ``nets.py:538-595`` (``Conv2D``), ``agent.py:36-43, 92-97, 241, 466-475``
(keys, loss scales, loss, ``preprocess``), ``configs.yaml`` ``enc/dec.simple``.

Observation (docs/design.md, "Image observations"): a vector-only model takes ``obs [..., O]``
as before; an image model (``Networks.image_shape`` set) takes a dict ``{"image": [..., H, W,
C], "vector": [..., O]}``, ``"vector"`` only when ``obs_size > 0`` (one image key, one vector
key: D41). A uint8 image is scaled to
``[0, 1]`` in the compute dtype (``cast(x) / 255``); a float image is taken as it is
(:func:`image_input`).

* :class:`CNNEncoder`: ``image - 0.5`` -> ``len(mults)`` convolutions (``depth * mults[i]``
  channels, kernel ``k``, SAME padding, stride 1 for the first (``outer: True``), 2 after),
  each with bias, RMSNorm over channels and SiLU -> ``[..., minres, minres, depth mults[-1]]``
  flattened row-major (h, w, c) to ``minres^2 depth mults[-1]`` features (64 d at the
  defaults).
* :class:`CNNDecoder` (``block_space: 8``, ``hidden_stoch: True``): ``space0`` =
  BlockLinear(g groups, no norm) of ``deter`` to ``minres^2 C`` (``C = depth mults[-1]``),
  each group's output read as ``(h, w, C/g)`` and the groups laid side by side on channels;
  plus ``space1`` = Linear(``minres^2 C``) of ``space1hid`` = Linear(2 units) + RMSNorm +
  SiLU of ``flatten(stoch)``, read as ``(h, w, C)``; the sum -> RMSNorm + SiLU; then
  transposed convolutions (stride 2, SAME, norm + SiLU) with channels ``depth mults[i]`` for
  ``i = len(mults) - 2 .. 0``; then ``imgout``, a transposed convolution to the image's
  channels (stride 1, outscale 1, no norm) and a sigmoid (in the compute dtype) ->
  ``[..., H, W, C_img]`` float32.
* :class:`ObsEncoder` / :class:`ObsDecoder`: the vector MLP (``mlp``, the vector model's
  :class:`~agents.dreamerv3.heads.Encoder` / ``Decoder`` layers) and the CNN (``cnn``) of one
  observation; the embedding is ``concat(vector MLP out, CNN out)`` (``nets.py:275``).
* :func:`image_loss`: ``sum over (H, W, C) of (pred - target)^2`` (``MSEDist(out, 3,
  'sum')``, no 1/2, no tolerance), the target the preprocessed image in float32.

Sizes: ``depth = cnn_depth`` (the preset's ``width / 16``: 12m 16 ... 200m 64, 1m 4), mults
``(1, 2, 3, 4, 4)``, kernel 5, minres 4, so a 64 x 64 image (``minres 2^(len(mults) - 1)``).
Parameter trees::

    enc: {mlp: ... (vector), cnn: {conv_i: {kernel [k, k, in, out], bias, norm: {scale}}}}
    dec: {mlp, out (vector), cnn: {space0: {kernel [g, D/g, m^2 C/g], bias},
          space1hid: {dense_0, norm_0}, space1: {kernel, bias}, spacenorm: {scale},
          conv_i: {kernel [k, k, in, out], bias, norm: {scale}}, imgout: {kernel, bias}}}

Compute dtype as the vector layers: kernels and biases cast to it, norms D28, sigmoid in it,
the reconstruction returned in float32.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from agents.common import NormedMLP, RMSNorm, dreamerv3_kernel_init, linear, symlog
from agents.common.blocks import cast
from agents.dreamerv3.convolution import conv_transpose
from agents.dreamerv3.rssm import BlockLinear

__all__ = [
    "CNNDecoder",
    "CNNEncoder",
    "Conv",
    "ObsDecoder",
    "ObsEncoder",
    "image_input",
    "image_loss",
]

_DIMS = ("NHWC", "HWIO", "NHWC")


def image_input(image: jax.Array, dtype: Any) -> jax.Array:
    """The image as the networks see it (``agent.py:466-475``): uint8 -> ``cast(x, dtype) /
    255`` in ``dtype``; any other dtype unchanged (the reference does not rescale floats)."""
    if image.dtype == jnp.uint8:
        return cast(image, dtype) / 255.0
    return image


class Conv(nn.Module):
    """A convolution (``transpose=False``) or transposed convolution, SAME padding, NHWC,
    with bias, optionally followed by RMSNorm over channels and SiLU (``nets.py:538-595``).

    ``x [N, H, W, Cin] -> [N, H', W', features]`` (``H' = H / stride`` resp. ``H stride``).
    Kernel ``[k, k, Cin, features]`` (HWIO, fan-in ``k^2 Cin``, truncated normal, D23),
    bias zeros; both cast to ``dtype``. The transposed form is ``lax.conv_transpose``
    without kernel flipping, as the reference calls it, with the kernel gradient of
    :func:`~agents.dreamerv3.convolution.conv_transpose` on the CPU."""

    features: int
    kernel: int
    stride: int
    transpose: bool = False
    norm: bool = True
    outscale: float = 1.0
    dtype: Any = None

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        shape = (self.kernel, self.kernel, x.shape[-1], self.features)
        kernel = self.param("kernel", dreamerv3_kernel_init(self.outscale), shape)
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        x, kernel, bias = (cast(v, self.dtype) for v in (x, kernel, bias))
        if self.transpose:
            y = conv_transpose(x, kernel, self.stride)
        else:
            strides = (self.stride, self.stride)
            y = jax.lax.conv_general_dilated(x, kernel, strides, "SAME", dimension_numbers=_DIMS)
        y = y + bias
        if self.norm:
            y = jax.nn.silu(RMSNorm(name="norm")(y))
        return y


class CNNEncoder(nn.Module):
    """``image [N, H, W, C]`` (preprocessed, in [0, 1]) -> ``[N, minres^2 depth mults[-1]]``
    (module docstring; ``nets.py:263-272``). Layers ``conv_i`` (each with its ``norm``)."""

    depth: int
    mults: tuple[int, ...]
    kernel: int
    minres: int
    dtype: Any = None

    @nn.compact
    def __call__(self, image: jax.Array) -> jax.Array:
        x = cast(image, self.dtype) - 0.5
        for i, mult in enumerate(self.mults):
            stride = 1 if i == 0 else 2  # outer: True, the first layer keeps the resolution
            x = Conv(self.depth * mult, self.kernel, stride, name=f"conv_{i}", dtype=self.dtype)(x)
        if x.shape[-3:-1] != (self.minres, self.minres):
            raise ValueError(f"CNN output {x.shape[1:]} is not minres={self.minres} square")
        return x.reshape(x.shape[0], -1)


class CNNDecoder(nn.Module):
    """``deter [N, D]``, ``stoch [N, S C]`` -> ``image [N, H, W, channels]`` float32 in (0, 1)
    (module docstring; ``nets.py:328-363``)."""

    depth: int
    mults: tuple[int, ...]
    kernel: int
    minres: int
    blocks: int
    units: int
    channels: int
    dtype: Any = None

    @nn.compact
    def __call__(self, deter: jax.Array, stoch: jax.Array) -> jax.Array:
        dt, g, m = self.dtype, self.blocks, self.minres
        top = self.depth * self.mults[-1]
        n = deter.shape[0]
        # space0: groups of deter -> (h, w, top/g) each, side by side on channels
        x0 = BlockLinear(m * m * top, g, name="space0", dtype=dt)(
            cast(deter, dt).reshape(n, g, -1).transpose(1, 0, 2)
        )
        x0 = x0.reshape(g, n, m, m, top // g).transpose(1, 2, 3, 0, 4).reshape(n, m, m, top)
        x1 = NormedMLP(1, 2 * self.units, name="space1hid", dtype=dt)(cast(stoch, dt))
        x1 = linear(m * m * top, dreamerv3_kernel_init(), name="space1", dtype=dt)(x1)
        x = jax.nn.silu(RMSNorm(name="spacenorm")(x0 + x1.reshape(n, m, m, top)))
        for i in reversed(range(len(self.mults) - 1)):
            x = Conv(self.depth * self.mults[i], self.kernel, 2, True, name=f"conv_{i}", dtype=dt)(
                x
            )
        x = Conv(self.channels, self.kernel, 1, True, norm=False, name="imgout", dtype=dt)(x)
        return cast(jax.nn.sigmoid(x), jnp.float32)


def _flat(fn, x: jax.Array, event: int) -> jax.Array:
    """``fn`` on ``x [..., *event dims]`` with the leading dims flattened to one."""
    lead = x.shape[: x.ndim - event]
    y = fn(x.reshape(-1, *x.shape[x.ndim - event :]))
    return y.reshape(*lead, *y.shape[1:])


class ObsEncoder(nn.Module):
    """``{"image" [..., H, W, C], "vector" [..., O]}`` -> ``embed [..., units + cnn]``, the
    vector MLP's output first (``nets.py:254-275``); ``vector`` only if ``layers`` apply
    (``has_vector``)."""

    layers: int
    units: int
    depth: int
    mults: tuple[int, ...]
    kernel: int
    minres: int
    has_vector: bool
    dtype: Any = None

    @nn.compact
    def __call__(self, obs: dict[str, jax.Array]) -> jax.Array:
        outs = []
        if self.has_vector:
            x = symlog(obs["vector"].astype(jnp.float32))
            outs.append(NormedMLP(self.layers, self.units, name="mlp", dtype=self.dtype)(x))
        cnn = CNNEncoder(
            self.depth, self.mults, self.kernel, self.minres, name="cnn", dtype=self.dtype
        )
        outs.append(_flat(cnn, image_input(obs["image"], self.dtype), 3))
        return jnp.concatenate(outs, -1)


class ObsDecoder(nn.Module):
    """``feat [..., D + S C]`` -> ``{"vector": [..., O] symlog-space (if has_vector),
    "image": [..., H, W, channels]}``, float32 (``nets.py:306-367``)."""

    layers: int
    units: int
    obs_size: int
    deter: int
    depth: int
    mults: tuple[int, ...]
    kernel: int
    minres: int
    blocks: int
    channels: int
    outscale: float = 0.1
    dtype: Any = None

    @nn.compact
    def __call__(self, feat: jax.Array) -> dict[str, jax.Array]:
        dt = self.dtype
        out = {}
        if self.obs_size:
            x = NormedMLP(self.layers, self.units, name="mlp", dtype=dt)(feat)
            head = linear(self.obs_size, dreamerv3_kernel_init(self.outscale), name="out", dtype=dt)
            out["vector"] = cast(head(x), jnp.float32)
        cnn = CNNDecoder(
            self.depth,
            self.mults,
            self.kernel,
            self.minres,
            self.blocks,
            self.units,
            self.channels,
            name="cnn",
            dtype=dt,
        )
        out["image"] = _flat(lambda f: cnn(f[:, : self.deter], f[:, self.deter :]), feat, 1)
        return out


def image_loss(pred: jax.Array, image: jax.Array, dtype: Any) -> jax.Array:
    """``sum_{h,w,c} (pred - target)^2`` with ``target = float32(image_input(image, dtype))``
    (``MSEDist(f32(out), 3, 'sum')``, ``agent.py:241``): ``[..., H, W, C] -> [...]``."""
    target = image_input(image, dtype).astype(jnp.float32)
    return jnp.sum(jnp.square(pred - target), (-3, -2, -1))
