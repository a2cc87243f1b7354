"""Categorical latents and one-hot actions: unimix, Gumbel-max samples, log-prob, KL.

Reference (2411f7d): ``nets.py:207-220`` (``RSSM._logit`` unimix, ``_dist``), ``jaxutils.py:
103-116`` (``OneHotDist`` straight-through sample), tfp's ``OneHotCategorical`` (log-prob,
entropy, KL) and its JAX sampler (``argmax(logits + gumbel)``, tfp
``backend/numpy/random_generators.py:95-105``).

Shapes: ``logits [..., C]`` (the categorical axis last). A latent of S categoricals is
``[..., S, C]``; its log-prob, entropy and KL sum over S (tfp ``Independent(..., 1)``).

Randomness enters as Gumbel noise of the logits' shape (docs/design.md §8.2 randomness seams): the
sample is ``one_hot(argmax(logits + g))``, exactly what the reference's sampler computes from
its own draw ``g``, so recorded draws reproduce its samples (D29).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = [
    "categorical_entropy",
    "categorical_kl",
    "categorical_log_prob",
    "gumbel_noise",
    "onehot_sample",
    "unimix_logits",
]


def unimix_logits(logits: jax.Array, unimix: float) -> jax.Array:
    """``log((1 - unimix) softmax(logits) + unimix / C)`` over the last axis (``nets.py:207-217``).

    ``unimix == 0`` returns ``logits`` unchanged (as the reference does).
    """
    if not unimix:
        return logits
    probs = jax.nn.softmax(logits, -1)
    uniform = jnp.ones_like(probs) / probs.shape[-1]
    return jnp.log((1.0 - unimix) * probs + unimix * uniform)


def gumbel_noise(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Standard Gumbel draws of ``shape`` (float32), the noise of :func:`onehot_sample`."""
    return jax.random.gumbel(key, shape, jnp.float32)


def onehot_sample(logits: jax.Array, gumbel: jax.Array) -> jax.Array:
    """Straight-through one-hot sample ``[..., C]`` (``jaxutils.py:112-116``).

    Forward value: ``one_hot(argmax(logits + gumbel))`` exactly; gradient: that of
    ``softmax(logits)`` (``sample = sg(onehot) + probs - sg(probs)``).
    """
    index = jnp.argmax(logits + gumbel, -1)
    onehot = jax.nn.one_hot(index, logits.shape[-1], dtype=logits.dtype)
    probs = jax.nn.softmax(logits, -1)
    return jax.lax.stop_gradient(onehot) + (probs - jax.lax.stop_gradient(probs))


def categorical_log_prob(logits: jax.Array, onehot: jax.Array) -> jax.Array:
    """``sum(onehot * log_softmax(logits))`` over the last axis: ``[..., C] -> [...]``."""
    return jnp.sum(onehot * jax.nn.log_softmax(logits, -1), -1)


def categorical_entropy(logits: jax.Array) -> jax.Array:
    """``-sum(softmax * log_softmax)`` over the last axis: ``[..., C] -> [...]``."""
    return -jnp.sum(jax.nn.log_softmax(logits, -1) * jax.nn.softmax(logits, -1), -1)


def categorical_kl(lhs: jax.Array, rhs: jax.Array) -> jax.Array:
    """``KL(Cat(lhs) || Cat(rhs))`` over the last axis: ``[..., C] -> [...]``.

    tfp's categorical KL: ``sum(softmax(lhs) * (log_softmax(lhs) - log_softmax(rhs)))``.
    """
    logp = jax.nn.log_softmax(lhs, -1)
    return jnp.sum(jax.nn.softmax(lhs, -1) * (logp - jax.nn.log_softmax(rhs, -1)), -1)
