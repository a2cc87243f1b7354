"""DreamerV3 vector encoder, decoder, reward / critic (two-hot) and continue heads.

Reference 2411f7d ``nets.py:223-531``. Every hidden layer is Linear ->
RMSNorm(1e-4) -> SiLU (:class:`agents.common.NormedMLP`), kernels fan-in truncated normal
with the output layer's ``outscale`` (D23), zero biases.

* :class:`Encoder`: ``symlog(obs)`` -> ``enc_layers`` x units; the last hidden is the embedding.
* :class:`Decoder`: features -> ``dec_layers`` x units -> Linear(O, outscale 0.1: the ``Dist``
  class default reaches the vector output, ``nets.py:316-321,408``); the prediction lives in
  symlog space; loss :func:`symlog_mse`. One output layer for the flat observation vector
  (the reference has one per observation key: D31).
* :class:`TwoHotHead` (reward, critic): -> Linear(bins + 1, outscale 0), the last logit
  dropped (``nets.py:432-438``); the distribution is ``TwoHot.dreamerv3(bins)`` in raw space.
* :class:`ContinueHead`: -> Linear(1, outscale 1) -> Bernoulli logit; loss
  :func:`bernoulli_nll` (soft targets allowed).

Compute dtype ``dtype`` (float32 or bfloat16): the layers compute in it (the encoder's symlog
is float32, then cast, ``nets.py:254-258``); the decoder, two-hot and continue outputs are cast
to float32 before any distribution or loss, as the reference's ``Dist`` (``nets.py:441-448``).
The embedding stays in ``dtype``.

Shapes: ``feat [..., F] -> embed [..., units]``, ``recon [..., O]``, ``logits [..., bins]``,
``logit [...]``. Param trees: ``{mlp: {dense_i: {kernel, bias}, norm_i: {scale}}, out:
{kernel, bias}}`` (the encoder has no ``out``).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from agents.common import NormedMLP, dreamerv3_kernel_init, linear, symlog
from agents.common.blocks import cast

__all__ = [
    "ContinueHead",
    "Decoder",
    "Encoder",
    "TwoHotHead",
    "bernoulli_mean",
    "bernoulli_nll",
    "symlog_mse",
]


class Encoder(nn.Module):
    """``obs [..., O] -> embed [..., units]`` (``nets.py:246-253``)."""

    layers: int
    units: int
    dtype: Any = None

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = symlog(obs.astype(jnp.float32))
        return NormedMLP(self.layers, self.units, name="mlp", dtype=self.dtype)(x)


class Decoder(nn.Module):
    """``feat [..., F] -> symlog-space reconstruction [..., O]`` (``nets.py:306-321``)."""

    layers: int
    units: int
    obs_size: int
    outscale: float = 0.1
    dtype: Any = None

    @nn.compact
    def __call__(self, feat: jax.Array) -> jax.Array:
        dt = self.dtype
        x = NormedMLP(self.layers, self.units, name="mlp", dtype=dt)(feat)
        out = linear(self.obs_size, dreamerv3_kernel_init(self.outscale), name="out", dtype=dt)
        return cast(out(x), jnp.float32)


class TwoHotHead(nn.Module):
    """``feat [..., F] -> logits [..., bins]`` of a symexp two-hot (``nets.py:432-471``)."""

    layers: int
    units: int
    bins: int = 255
    outscale: float = 0.0
    dtype: Any = None

    @nn.compact
    def __call__(self, feat: jax.Array) -> jax.Array:
        dt = self.dtype
        x = NormedMLP(self.layers, self.units, name="mlp", dtype=dt)(feat)
        width = self.bins + self.bins % 2  # 256 columns, the last one unused
        out = linear(width, dreamerv3_kernel_init(self.outscale), name="out", dtype=dt)(x)
        return cast(out, jnp.float32)[..., : self.bins]


class ContinueHead(nn.Module):
    """``feat [..., F] -> Bernoulli logit [...]`` (``nets.py:515-517``, ``binary``)."""

    layers: int
    units: int
    outscale: float = 1.0
    dtype: Any = None

    @nn.compact
    def __call__(self, feat: jax.Array) -> jax.Array:
        dt = self.dtype
        x = NormedMLP(self.layers, self.units, name="mlp", dtype=dt)(feat)
        out = linear(1, dreamerv3_kernel_init(self.outscale), name="out", dtype=dt)(x)
        return cast(out, jnp.float32)[..., 0]


def symlog_mse(pred: jax.Array, target: jax.Array, tol: float = 1e-8) -> jax.Array:
    """``sum((pred - symlog(target))^2)`` over the last axis, squares below ``tol`` set to 0.

    The reference's ``TransformedMseDist`` negative log-prob (``jaxutils.py:179-207``): no
    1/2 factor. ``[..., O] -> [...]``.
    """
    sq = jnp.square(pred - symlog(target))
    return jnp.sum(jnp.where(sq < tol, 0.0, sq), -1)


def bernoulli_nll(logit: jax.Array, target: jax.Array) -> jax.Array:
    """``-(target log sigmoid(l) + (1 - target) log sigmoid(-l))``, elementwise.

    tfp ``Bernoulli.log_prob`` with logits (``softplus`` forms), soft targets allowed
    (the continue head's ``(1 - is_terminal)(1 - 1/horizon)``, ``agent.py:258-261``).
    """
    return jax.nn.softplus(logit) * (1.0 - target) + jax.nn.softplus(-logit) * target


def bernoulli_mean(logit: jax.Array) -> jax.Array:
    """Mean of the continue head's Bernoulli: ``sigmoid(logit)``."""
    return jax.nn.sigmoid(logit)
