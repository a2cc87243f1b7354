"""DreamerV3 RSSM: block GRU core, posterior (observe) and prior (imagine) steps.

Reference 2411f7d ``nets.py:16-220`` (``RSSM``, cell ``blockgru``) and ``nets.py:638-701``
(``BlockLinear``). One step at a time over a batch; the callers scan over time.

State ("latent"): ``deter [B, D]`` and ``stoch [B, S, C]`` one-hot (straight-through), both in
the compute dtype ``dtype`` (float32 or bfloat16, :attr:`agents.dreamerv3.networks.Networks.dtype`).
Features for every head: ``concat(deter, flatten(stoch))`` (:func:`features`).

Compute dtype (the reference's ``cast`` calls, 29eb964 ``nets.py:40-45,58,76,82-95,151-173,
207-220``): :meth:`RSSM.observe` and :meth:`RSSM.imagine` cast the carried latent and the action
to ``dtype``; every Linear / BlockLinear, the norms' outputs, SiLU, the GRU gates, the new
``deter`` and the unimix softmax and log of the logits are in ``dtype``. The logits are then
upcast to float32, as the reference's ``_dist`` does: the sample (``argmax(logits + gumbel)``),
the KL and the entropies are float32, and the one-hot sample is cast back to ``dtype``.

Block GRU (``nets.py:119-173``), g = ``blocks``:

* ``action / sg(max(1, |action|))`` elementwise;
* ``x0, x1, x2`` = Linear(H) + RMSNorm + SiLU of ``deter``, ``flatten(stoch)``, ``action``
  (``dynin0..2``);
* per group ``[deter_g (D/g), x0, x1, x2]`` flattened to ``D + 3 g H``;
* ``dyn0`` = BlockLinear(D) + RMSNorm over all D + SiLU; ``dyncore`` = BlockLinear(3 D);
* output as ``(g, 3 D/g)`` split into reset | cand | update per group, each flattened to D;
  ``r = sigmoid(reset)``, ``c = tanh(r * cand)``, ``u = sigmoid(update - 1)``,
  ``deter' = u c + (1 - u) deter``.

Posterior logits: ``obs0`` (Linear(H) + norm + act) of ``concat(deter', embed)`` then
``obslogit`` Linear(S C); prior logits: ``img0``, ``img1`` then ``imglogit``; both with 1%
unimix (:func:`agents.dreamerv3.latents.unimix_logits`). Kernels: fan-in truncated normal
(D23), with BlockLinear's fan-in the FULL input width (``block_fans: False``).

Param tree (names as the reference's, with single layers as one-layer ``NormedMLP``)::

    dynin{0,1,2}: {dense_0: {kernel [D|SC|A, H], bias [H]}, norm_0: {scale [H]}}
    dyn0:    {kernel [g, D/g + 3H, D/g], bias [D], norm: {scale [D]}}
    dyncore: {kernel [g, D/g, 3D/g], bias [3D]}
    obs0, img0, img1: {dense_0: ..., norm_0: ...};  obslogit, imglogit: {kernel, bias [S C]}
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from agents.common import NormedMLP, RMSNorm, dreamerv3_kernel_init, linear
from agents.common.blocks import cast
from agents.dreamerv3.latents import onehot_sample, unimix_logits

__all__ = ["RSSM", "BlockLinear", "features"]

Latent = dict[str, jax.Array]


def features(deter: jax.Array, stoch: jax.Array) -> jax.Array:
    """``concat(deter [..., D], flatten(stoch [..., S, C]))`` -> ``[..., D + S C]``."""
    return jnp.concatenate([deter, stoch.reshape(*stoch.shape[:-2], -1)], -1)


class BlockLinear(nn.Module):
    """Block-diagonal linear layer (``nets.py:638-701``) on group-major inputs.

    ``x [g, ..., in/g] -> [g, ..., units/g]``: slice ``k`` is multiplied by
    ``kernel[k] [in/g, units/g]`` and gets its slice of the full-width ``bias [units]``. The
    reference takes ``[..., in]`` (zero-padded to a multiple of ``g``) and returns
    ``[..., units]``; the block GRU, our only user, keeps its state group-major instead, so
    the ``g`` batched dots read and write contiguous rows and the gate fusion after them
    reads its operands in order (docs/PERFORMANCE.md, DreamerV3 "What changed"). Kernel init:
    fan-in truncated normal with the fan-in of the whole layer, ``in``
    (``block_fans: False``, ``nets.py:873-884``). ``dtype``: the compute dtype, as
    :class:`agents.common.blocks.Dense` (``nets.py:671-705``).
    """

    units: int
    groups: int
    outscale: float = 1.0
    dtype: Any = None

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        g = self.groups
        if x.shape[0] != g or self.units % g:
            raise ValueError(
                f"BlockLinear({self.units}, groups={g}) needs x [{g}, ..., in/{g}] and "
                f"units divisible by {g}; got x {x.shape}"
            )
        shape = (g, x.shape[-1], self.units // g)
        # variance_scaling's fan-in of a [g, in/g, out/g] kernel is in/g * g = in: the full
        # input width, as the reference's block_fans=False.
        kernel = self.param("kernel", dreamerv3_kernel_init(self.outscale), shape)
        bias = self.param("bias", nn.initializers.zeros, (self.units,))
        lead = x.shape[1:-1]
        x, kernel, bias = (cast(v, self.dtype) for v in (x, kernel, bias))
        y = jnp.einsum("g...i,gio->g...o", x, kernel)
        return y + bias.reshape(g, *(1,) * len(lead), self.units // g)


class RSSM(nn.Module):
    """Recurrent state-space model (module docstring). All methods act on one time step."""

    deter: int
    hidden: int
    stoch: int
    classes: int
    blocks: int = 8
    img_layers: int = 2
    obs_layers: int = 1
    dyn_layers: int = 1
    unimix: float = 0.01
    dtype: Any = jnp.float32

    def setup(self) -> None:
        dt = self.dtype
        mlp = lambda name: NormedMLP(1, self.hidden, name=name, dtype=dt)  # noqa: E731
        self.dynin = [mlp(f"dynin{i}") for i in range(3)]
        self.dyn = [
            BlockLinear(self.deter, self.blocks, name=f"dyn{i}", dtype=dt)
            for i in range(self.dyn_layers)
        ]
        self.dyn_norm = [RMSNorm(grouped=True, name=f"dyn{i}_norm") for i in range(self.dyn_layers)]
        self.dyncore = BlockLinear(3 * self.deter, self.blocks, name="dyncore", dtype=dt)
        self.obs = [mlp(f"obs{i}") for i in range(self.obs_layers)]
        self.img = [mlp(f"img{i}") for i in range(self.img_layers)]
        logit = lambda name: linear(  # noqa: E731
            self.stoch * self.classes, dreamerv3_kernel_init(1.0), name=name, dtype=dt
        )
        self.obslogit = logit("obslogit")
        self.imglogit = logit("imglogit")

    def initial(self, batch: int) -> Latent:
        """Zero latent (``nets.py:39-45``): ``deter [B, D]``, ``stoch [B, S, C]``."""
        return self.cast(
            {
                "deter": jnp.zeros((batch, self.deter), jnp.float32),
                "stoch": jnp.zeros((batch, self.stoch, self.classes), jnp.float32),
            }
        )

    def cast(self, lat: Latent) -> Latent:
        """A latent in the compute dtype (the reference's ``cast(carry)``)."""
        return {k: cast(v, self.dtype) for k, v in lat.items()}

    def gru(self, deter: jax.Array, stoch: jax.Array, action: jax.Array) -> jax.Array:
        """Block GRU step: ``deter [B, D], stoch [B, S, C], action [B, A] -> deter' [B, D]``.

        Inside, everything after the ``dynin`` layers is group-major, ``[g, B, .]`` (see
        :class:`BlockLinear`): the reference's per-group ``[deter_g, x0, x1, x2]`` rows are
        ``concat([deter as [g, B, D/g], broadcast x])``, the reset | cand | update split is
        along the last axis of ``[g, B, 3 D/g]``, and ``deter'`` returns to ``[B, D]`` once.
        """
        g = self.blocks
        action = action / jax.lax.stop_gradient(jnp.maximum(1.0, jnp.abs(action)))
        flat_stoch = stoch.reshape(*stoch.shape[:-2], -1)
        x = jnp.concatenate(
            [f(v) for f, v in zip(self.dynin, (deter, flat_stoch, action), strict=True)], -1
        )
        lead = deter.shape[:-1]
        deter_g = jnp.moveaxis(deter.reshape(*lead, g, -1), -2, 0)
        x = jnp.concatenate([deter_g, jnp.broadcast_to(x, (g, *x.shape))], -1)
        for layer, norm in zip(self.dyn, self.dyn_norm, strict=True):
            x = jax.nn.silu(norm(layer(x)))
        reset, cand, update = jnp.split(self.dyncore(x), 3, -1)
        reset = jax.nn.sigmoid(reset)
        cand = jnp.tanh(reset * cand)
        update = jax.nn.sigmoid(update - 1.0)
        out = update * cand + (1.0 - update) * deter_g
        return jnp.moveaxis(out, 0, -2).reshape(*lead, -1)

    def _logits(self, layer: nn.Module, x: jax.Array) -> jax.Array:
        """float32 logits ``[B, S, C]``: unimixed in the compute dtype, then upcast
        (``nets.py:207-220``: ``_logit`` in the compute dtype, ``_dist`` upcasts)."""
        logits = layer(x).reshape(*x.shape[:-1], self.stoch, self.classes)
        return cast(unimix_logits(logits, self.unimix), jnp.float32)

    def _sample(self, logits: jax.Array, gumbel: jax.Array) -> jax.Array:
        """The float32 straight-through sample, cast to the compute dtype (``nets.py:70, 89``)."""
        return cast(onehot_sample(logits, gumbel), self.dtype)

    def prior(self, deter: jax.Array) -> jax.Array:
        """Prior logits ``[B, S, C]`` (unimixed) from ``deter [B, D]`` (``nets.py:112-117``)."""
        x = deter
        for layer in self.img:
            x = layer(x)
        return self._logits(self.imglogit, x)

    def posterior(self, deter: jax.Array, embed: jax.Array) -> jax.Array:
        """Posterior logits ``[B, S, C]`` from ``concat(deter, embed)`` (``nets.py:70-73``)."""
        x = jnp.concatenate([deter, embed], -1)
        for layer in self.obs:
            x = layer(x)
        return self._logits(self.obslogit, x)

    def observe(
        self,
        lat: Latent,
        action: jax.Array,
        embed: jax.Array,
        is_first: jax.Array,
        gumbel: jax.Array,
    ) -> tuple[Latent, jax.Array]:
        """Posterior step (``nets.py:53-76``); returns ``(latent', logits [B, S, C])``.

        ``is_first [B]`` zeroes ``deter``, ``stoch`` and ``action`` before the GRU;
        ``gumbel [B, S, C]`` is the posterior sample's noise. The latent, the action and the
        embedding may come in any float dtype; they are cast to the compute dtype first.
        """
        lat, action, embed = self.cast(lat), cast(action, self.dtype), cast(embed, self.dtype)
        keep = 1.0 - is_first.astype(self.dtype)
        deter = lat["deter"] * keep[:, None]
        stoch = lat["stoch"] * keep[:, None, None]
        action = action * keep[:, None]
        deter = self.gru(deter, stoch, action)
        logits = self.posterior(deter, embed)
        return {"deter": deter, "stoch": self._sample(logits, gumbel)}, logits

    def imagine(
        self, lat: Latent, action: jax.Array, gumbel: jax.Array
    ) -> tuple[Latent, jax.Array]:
        """Prior step (``nets.py:78-95``); returns ``(latent', logits [B, S, C])``."""
        lat, action = self.cast(lat), cast(action, self.dtype)
        deter = self.gru(lat["deter"], lat["stoch"], action)
        logits = self.prior(deter)
        return {"deter": deter, "stoch": self._sample(logits, gumbel)}, logits

    def __call__(
        self, lat: Latent, action: jax.Array, embed: jax.Array, is_first: jax.Array
    ) -> jax.Array:
        """Init entry: touches every parameter (observe, then the prior)."""
        gumbel = jnp.zeros((action.shape[0], self.stoch, self.classes), jnp.float32)
        lat, _ = self.observe(lat, action, embed, is_first, gumbel)
        return self.prior(lat["deter"])
