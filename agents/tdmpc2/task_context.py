"""The task context of multi-task TD-MPC2: what the single-task code's ``task`` hooks take
(:class:`TaskContext`), and the embedding-row renormalisation it applies.

The single-task code (:mod:`agents.tdmpc2.world_model`, :mod:`~agents.tdmpc2.update`,
:mod:`~agents.tdmpc2.planner`) takes an optional ``task`` argument of this type; the
multi-task mechanisms that build it live in :mod:`agents.tdmpc2.multitask` (module
docstring: the reference's ``wm.py`` lines cited below are 5f6fade
``tdmpc2/common/world_model.py``'s). This module imports neither, so both import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

__all__ = ["RENORM_EPS", "TASK_EMB", "TaskContext", "renorm_rows"]

# key of the multi-task embedding table in the world-model parameters (docs/design.md §7.6)
TASK_EMB = "task_emb"
RENORM_EPS = 1e-7  # torch ``embedding_renorm_``: scale = max_norm / (norm + 1e-7)


# ------------------------------------------------------------------------------ renorm
def renorm_rows(table: jax.Array, ids: jax.Array, max_norm: float = 1.0) -> jax.Array:
    """torch ``embedding_renorm_`` (what ``nn.Embedding(max_norm=1)`` does at a look-up):
    every row of ``table [T, D]`` whose index occurs in ``ids`` (any shape) and whose L2
    norm exceeds ``max_norm`` is scaled by ``max_norm / (norm + 1e-7)``; other rows are
    unchanged. (torch computes the scale in float64 and rounds it to float32; here it is
    float32: at most one rounding step apart.)"""
    looked_up = jnp.zeros(table.shape[:1], bool).at[jnp.reshape(ids, (-1,))].set(True)
    norm = jnp.sqrt(jnp.sum(jnp.square(table), axis=-1))
    scale = jnp.where(looked_up & (norm > max_norm), max_norm / (norm + RENORM_EPS), 1.0)
    return table * scale[:, None]


# ------------------------------------------------------------------------------ context
@struct.dataclass
class TaskContext:
    """Task ids and what they select, for the single-task code's ``task`` hooks.

    Attributes:
        ids: int32 ``[*S]``: ``[B]`` for an update batch (shared by every time step),
            ``[]`` for one env's planning decision.
        action_mask: float32 ``[*S, A_max]``, the tasks' prefix masks.
        discount: float32 ``[*S]``, the tasks' discounts.

    Leading shapes broadcast right-aligned: an input ``[H, B, D]`` with ids ``[B]`` gets the
    same embedding row at every time step (``wm.py:87-88``).
    """

    ids: jax.Array
    action_mask: jax.Array
    discount: jax.Array

    @property
    def n_valid(self) -> jax.Array:
        """float32 ``[*S, 1]``: the number of valid action dims, the policy log-prob's
        scale (``wm.py:140``)."""
        return jnp.sum(self.action_mask, axis=-1, keepdims=True)

    def embedding(self, params: Mapping[str, Any]) -> jax.Array:
        """The looked-up rows ``params["task_emb"][ids]`` ``[*S, task_dim]``."""
        return jnp.take(params[TASK_EMB], self.ids, axis=0)

    def embed(self, params: Mapping[str, Any], x: jax.Array) -> jax.Array:
        """``x [..., D] -> concat([x, e], -1) [..., D + task_dim]`` (``wm.py:78-91``)."""
        e = self.embedding(params)
        e = jnp.broadcast_to(e, (*x.shape[:-1], e.shape[-1]))
        return jnp.concatenate([x, e], axis=-1)

    def mask(self, x: jax.Array) -> jax.Array:
        """``x [..., A_max] * action_mask`` (broadcast right-aligned)."""
        return x * self.action_mask

    def renorm(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` with the looked-up embedding rows renormalised (:func:`renorm_rows`)."""
        return {**params, TASK_EMB: renorm_rows(params[TASK_EMB], self.ids)}
