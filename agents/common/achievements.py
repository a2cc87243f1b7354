"""Achievement metrics of evaluation episodes and the Crafter score (issue 46).

An env with achievements names them in ``EnvSpec.achievements`` and reports, per agent step,
the ones unlocked in ``EnvState.unlocked`` (``[K]`` bool). OR-ed over an episode's steps that
gives the episode's achievement set; over ``n`` evaluation episodes, ``[n, K]``. From it:

* ``Eval/achievements/<name>``: the success rate of achievement ``<name>``, in percent: the
  share of the episodes that unlocked it at least once (the Crafter paper's per-achievement
  success rate, Hafner 2021, arXiv 2109.06780);
* ``Eval/crafter_score``: the Crafter score ``S = exp(mean_i ln(1 + s_i)) - 1`` over the
  ``K`` success rates ``s_i`` in percent (same paper): a geometric mean
  shifted by one, so 0 when nothing is ever unlocked and 100 when everything always is.

The paper computes the rates over every training episode of a run's 1M-step budget; here they
are over each evaluation's episodes (deviation D37).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

SCORE_KEY = "Eval/crafter_score"
RATE_PREFIX = "Eval/achievements/"


def success_rates(unlocked: jax.Array) -> jax.Array:
    """Per-achievement success rate in percent, ``[K]`` float32, of ``unlocked [n, K]`` bool
    (episode i unlocked achievement k at least once)."""
    return 100.0 * jnp.mean(unlocked.astype(jnp.float32), axis=0)


def crafter_score(rates: jax.Array) -> jax.Array:
    """The Crafter score of success rates in percent ``[..., K]`` -> ``[...]``:
    ``exp(mean_k ln(1 + s_k)) - 1`` (module docstring)."""
    rates = jnp.asarray(rates, jnp.float32)
    return jnp.expm1(jnp.mean(jnp.log1p(rates), axis=-1))


def achievement_metrics(names: Sequence[str], unlocked: jax.Array) -> dict[str, jax.Array]:
    """``Eval/achievements/<name>`` for each of ``names`` (the env's ``spec.achievements``)
    and ``Eval/crafter_score`` of ``unlocked [n, K]`` bool, K = len(names)."""
    rates = success_rates(unlocked)
    out = {f"{RATE_PREFIX}{name}": rates[k] for k, name in enumerate(names)}
    out[SCORE_KEY] = crafter_score(rates)
    return out
