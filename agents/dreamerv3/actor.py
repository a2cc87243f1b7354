"""DreamerV3 actor: bounded normal (continuous) or unimix one-hot (discrete) policy.

Reference 2411f7d ``nets.py:486-529`` (``Dist`` ``normal`` and ``onehot``), ``agent.py:
56-66``. Trunk: ``actor_layers`` x (Linear -> RMSNorm -> SiLU) of the features;
output layers with outscale 0.01.

* Continuous (``normal``): ``mean = tanh(out)``, ``std = (maxstd - minstd) sigmoid(std_raw +
  2) + minstd``, ``Independent(Normal(mean, std), 1)``: NOT squashed, samples may leave
  [-1, 1] (the env clips; replay keeps the raw sample). Sample ``noise * std + mean`` with
  standard normal ``noise`` (tfp's ``Normal._sample_n``).
* Discrete (``onehot``): logits ``log((1 - unimix) softmax(out) + unimix / A)``,
  straight-through one-hot sample from Gumbel ``noise``; log-prob and entropy of the mixed
  distribution.

The layers compute in ``dtype``; ``out`` and ``std`` are cast to float32 before the
distribution (``nets.py:441-448``), so the distribution, its samples, log-probs and entropies
are float32.

Param tree: ``{mlp: {dense_i, norm_i}, out: {kernel [units, A], bias}, [std: {kernel, bias}]}``.
Shapes: ``feat [..., F]``; a distribution's leaves ``[..., A]``; actions ``[..., A]`` (one-hot
for discrete); log-prob and entropy ``[...]``.
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from agents.common import NormedMLP, dreamerv3_kernel_init, linear
from agents.common.blocks import cast
from agents.dreamerv3.latents import (
    categorical_entropy,
    categorical_log_prob,
    onehot_sample,
    unimix_logits,
)

__all__ = ["Actor", "ActorDist"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@flax.struct.dataclass
class ActorDist:
    """Policy distribution over ``[..., A]``: ``loc``/``scale`` (continuous) or ``logits``."""

    loc: jax.Array | None = None
    scale: jax.Array | None = None
    logits: jax.Array | None = None

    @property
    def discrete(self) -> bool:
        return self.logits is not None

    def sample(self, noise: jax.Array) -> jax.Array:
        """Action ``[..., A]`` from standard normal (continuous) or Gumbel (discrete) noise."""
        if self.discrete:
            return onehot_sample(self.logits, noise)
        return noise * self.scale + self.loc

    def log_prob(self, action: jax.Array) -> jax.Array:
        """``[..., A] -> [...]``, summed over the action dims (tfp ``Independent``)."""
        if self.discrete:
            return categorical_log_prob(self.logits, action)
        z = action / self.scale - self.loc / self.scale
        return jnp.sum(-0.5 * jnp.square(z) - (_HALF_LOG_2PI + jnp.log(self.scale)), -1)

    def entropy(self) -> jax.Array:
        """``[...]``: the Normal's ``sum(0.5 + 0.5 log 2 pi + log std)``, or the categorical's."""
        if self.discrete:
            return categorical_entropy(self.logits)
        return jnp.sum(0.5 + (_HALF_LOG_2PI + jnp.log(self.scale)), -1)


class Actor(nn.Module):
    """``feat [..., F] -> ActorDist`` (module docstring)."""

    layers: int
    units: int
    action_size: int
    discrete: bool
    minstd: float = 0.1
    maxstd: float = 1.0
    unimix: float = 0.01
    outscale: float = 0.01
    dtype: Any = None

    @nn.compact
    def __call__(self, feat: jax.Array) -> ActorDist:
        dt = self.dtype
        x = NormedMLP(self.layers, self.units, name="mlp", dtype=dt)(feat)
        init = dreamerv3_kernel_init(self.outscale)
        out = cast(linear(self.action_size, init, name="out", dtype=dt)(x), jnp.float32)
        if self.discrete:
            return ActorDist(logits=unimix_logits(out, self.unimix))
        std = cast(linear(self.action_size, init, name="std", dtype=dt)(x), jnp.float32)
        scale = (self.maxstd - self.minstd) * jax.nn.sigmoid(std + 2.0) + self.minstd
        return ActorDist(loc=jnp.tanh(out), scale=scale)
