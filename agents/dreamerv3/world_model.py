"""DreamerV3 world-model pass over a replayed batch: posterior rollout and its losses.

Reference 2411f7d + 29eb964 ``agent.py:188-262`` (replay context, ``loss`` replay rollout),
``nets.py:53-110`` (``observe``, ``loss``).

Batch layout (:class:`Batch`): ``B`` sequences of ``T + 1`` rows; row 0 is the replay context
(its stored latent starts the rollout, its action is the first previous action: the 29eb964
fix), rows ``1..T`` are trained. Per trained row ``t``: previous action ``action[t - 1]``,
embedding of ``obs[t]``, ``is_first[t]``.

Per-element losses ``[B, T]`` (unscaled; :func:`world_model_losses`):

* ``vector``: symlog MSE of the decoder (one output layer for the whole observation vector
  equals the reference's per-key output layers side by side: D31);
* ``image`` (image models, issue 47): summed squared error of the decoded image
  (:func:`agents.dreamerv3.images.image_loss`), before ``reward``, after ``vector`` (the
  reference's order: vector keys, then image keys);
* ``reward``: two-hot cross-entropy of ``reward[t]`` (gradient into the world model,
  ``reward_grad: True``);
* ``cont``: Bernoulli cross-entropy of the soft label ``(1 - is_terminal) (1 - 1/horizon)``;
* ``dyn = max(KL(sg(post) || prior), free)``, ``rep = max(KL(post || sg(prior)), free)``,
  summed over the S latents, the prior recomputed from the posterior ``deter`` WITHOUT a stop
  gradient (so the dyn loss also trains the GRU core, ``nets.py:99``).

Compute dtype (``nets.dtype``): the posterior ``deter``, ``stoch`` and the embedding are in it
(the reference's ``cast(carry)``, ``nets.py:58``); the logits and every loss are float32.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from agents.common import TwoHot
from agents.common.blocks import cast
from agents.dreamerv3.heads import bernoulli_nll, symlog_mse
from agents.dreamerv3.images import image_loss
from agents.dreamerv3.latents import categorical_entropy, categorical_kl
from agents.dreamerv3.networks import Networks
from agents.dreamerv3.rssm import features

__all__ = ["Batch", "Posterior", "observe_sequence", "world_model_losses"]

sg = jax.lax.stop_gradient


@flax.struct.dataclass
class Batch:
    """A training batch of ``B`` windows of ``T + 1`` rows (row 0 = replay context).

    obs ``[B, T+1, O]`` f32, or for an image model the dict ``{"image" [B, T+1, H, W, C]
    (uint8 or float in [0, 1]), "vector" [B, T+1, O]}`` (agents/dreamerv3/images.py);
    action ``[B, T+1, A]`` f32 (one-hot for discrete actions; row k holds the action taken
    at row k); reward ``[B, T+1]`` f32; is_first, is_last, is_terminal ``[B, T+1]`` bool;
    deter ``[B, T+1, D]`` f32 and stoch ``[B, T+1, S]`` int32: the latents stored in replay
    (only row 0's are read).
    """

    obs: jax.Array | dict[str, jax.Array]
    action: jax.Array
    reward: jax.Array
    is_first: jax.Array
    is_last: jax.Array
    is_terminal: jax.Array
    deter: jax.Array
    stoch: jax.Array


@flax.struct.dataclass
class Posterior:
    """Posterior rollout over the trained rows: deter ``[B, T, D]``, stoch ``[B, T, S, C]``
    (straight-through one-hot), logits ``[B, T, S, C]`` (unimixed, float32), embed
    ``[B, T, E]``; deter, stoch and embed in the compute dtype."""

    deter: jax.Array
    stoch: jax.Array
    logits: jax.Array
    embed: jax.Array

    @property
    def feat(self) -> jax.Array:
        return features(self.deter, self.stoch)


def context_latent(nets: Networks, batch: Batch) -> dict[str, jax.Array]:
    """The stored latent of row 0: ``deter [B, D]``, one-hot ``stoch [B, S, C]``."""
    stoch = jax.nn.one_hot(batch.stoch[:, 0], nets.cfg.classes_size, dtype=jnp.float32)
    return {"deter": batch.deter[:, 0], "stoch": stoch}


def observe_sequence(
    nets: Networks, params: dict[str, Any], batch: Batch, gumbel: jax.Array
) -> tuple[dict[str, jax.Array], Posterior]:
    """Posterior rollout of rows ``1..T`` from the context; ``gumbel [T, B, S, C]``.

    Returns ``(last latent {deter [B, D], stoch [B, S, C]}, Posterior)``, latents in the
    compute dtype (the stored float32 context is cast, as the reference's ``observe``).
    """
    rssm = nets.rssm
    obs = jax.tree_util.tree_map(lambda x: x[:, 1:], batch.obs)
    embed = nets.encoder.apply({"params": params["enc"]}, obs)
    xs = (
        jnp.swapaxes(batch.action[:, :-1], 0, 1),
        jnp.swapaxes(embed, 0, 1),
        jnp.swapaxes(batch.is_first[:, 1:], 0, 1),
        gumbel,
    )

    def step(lat: dict, x: tuple) -> tuple[dict, tuple]:
        lat, logits = rssm.apply({"params": params["dyn"]}, lat, *x, method="observe")
        return lat, (lat["deter"], lat["stoch"], logits)

    start = {k: cast(v, nets.dtype) for k, v in context_latent(nets, batch).items()}
    last, (deter, stoch, logits) = jax.lax.scan(step, start, xs)
    tb = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    return last, Posterior(deter=tb(deter), stoch=tb(stoch), logits=tb(logits), embed=embed)


def world_model_losses(
    nets: Networks, params: dict[str, Any], batch: Batch, post: Posterior
) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
    """Per-element world-model losses ``[B, T]`` and their metrics (module docstring)."""
    cfg = nets.cfg
    feat = post.feat
    recon = nets.decoder.apply({"params": params["dec"]}, feat)
    rew_logits = nets.reward.apply({"params": params["rew"]}, feat)
    con_logit = nets.cont.apply({"params": params["con"]}, feat)
    cont = 1.0 - batch.is_terminal[:, 1:].astype(jnp.float32)
    prior = nets.rssm.apply({"params": params["dyn"]}, post.deter, method="prior")
    dyn = jnp.sum(categorical_kl(sg(post.logits), prior), -1)
    rep = jnp.sum(categorical_kl(post.logits, sg(prior)), -1)
    obs = jax.tree_util.tree_map(lambda x: x[:, 1:], batch.obs)
    if nets.image_shape is None:
        rec = {"vector": symlog_mse(recon, obs)}
    else:
        rec = {"vector": symlog_mse(recon["vector"], obs["vector"])} if nets.obs_size else {}
        rec["image"] = image_loss(recon["image"], obs["image"], nets.dtype)
    losses = {
        **rec,
        "reward": TwoHot.dreamerv3(cfg.bins).loss(rew_logits, batch.reward[:, 1:]),
        "cont": bernoulli_nll(con_logit, cont * (1.0 - 1.0 / cfg.return_horizon)),
        "dyn": jnp.maximum(dyn, cfg.free_nats),
        "rep": jnp.maximum(rep, cfg.free_nats),
    }
    metrics = {
        "prior_ent/mean": jnp.mean(jnp.sum(categorical_entropy(prior), -1)),
        "post_ent/mean": jnp.mean(jnp.sum(categorical_entropy(post.logits), -1)),
        "activation/embed": cast(jnp.mean(jnp.abs(post.embed)), jnp.float32),
    }
    return losses, metrics
