"""TD-MPC2 learner state and its optimizers (docs/design.md §7.2).

Holds :class:`TDMPC2TrainState` (parameters, target Q, the two optimizer states, the
RunningScale value, the stale policy-gradient norm, the update count), its constructors
(:func:`train_state_from_params`, :func:`init_train_state`), the reference's two Adam
optimizers (:func:`make_optimizers`, ``tdmpc2/tdmpc2.py:21-28`` at b67b21c; identical at
5f6fade) and torch's ``clip_grad_norm_`` formula (:func:`torch_clip_by_global_norm`), which
:func:`agents.tdmpc2.update.update` applies before the optax transforms.

The target Q starts as a copy of the online Q (the reference's deepcopy,
``world_model.py:31``). The world-model clip also sees the previous update's post-clip policy
gradient (the reference's stale ``_pi`` grads, tdmpc2@5f6fade tdmpc2/tdmpc2.py:184,271), carried as
the scalar ``pi_grad_sq``. Deviations (``docs/deviations.md``): T3 (stale policy-gradient norm
carried as a scalar; torch-formula clips applied before the optax Adam).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from agents.common.normalizers import RunningScale
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.world_model import TASK_EMB, Params, WorldModel

__all__ = [
    "WM_KEYS",
    "TDMPC2TrainState",
    "global_norm_sq",
    "init_train_state",
    "make_optimizers",
    "torch_clip_by_global_norm",
    "train_state_from_params",
    "wm_subtree",
]

# World-model modules trained by the world-model optimizer (``tdmpc2.py:21-27``).
WM_KEYS: tuple[str, ...] = ("encoder", "dynamics", "reward", "qs")


def wm_subtree(params: Mapping[str, Any]) -> dict[str, Any]:
    """What the world-model optimizer trains: ``{k: params[k] for k in WM_KEYS}``, plus the
    multi-task embedding ``task_emb`` when present (``tdmpc2.py:21-27``: its own param group
    at the full learning rate, inside the world-model clip)."""
    keys = WM_KEYS + ((TASK_EMB,) if TASK_EMB in params else ())
    return {k: params[k] for k in keys}


# ---------------------------------------------------------------------------------- state
@struct.dataclass
class TDMPC2TrainState:
    """Learner state of one TD-MPC2 agent.

    Attributes:
        params: world-model tree ``{"encoder", "dynamics", "reward", "qs", "pi"}`` (plus
            ``"task_emb"`` in a multi-task model).
        target_qs: target Q ensemble (same structure as ``params["qs"]``).
        wm_opt_state: Adam state over :func:`wm_subtree` (``WM_KEYS``, plus ``task_emb``
            in a multi-task model).
        pi_opt_state: Adam state over ``params["pi"]``.
        q_scale: RunningScale value, float32 ``[]`` (init 1); ``[num_tasks]`` in the what-if
            of one scale per task (deviation T49, ``agent.q_scale_per_task``).
        pi_grad_sq: squared global norm of the previous update's *post-clip* policy gradient,
            float32 ``[]`` (0 before the first update); enters the next world-model clip (T3).
        step: number of updates done, int32 ``[]``.
    """

    params: Params
    target_qs: Params
    wm_opt_state: optax.OptState
    pi_opt_state: optax.OptState
    q_scale: jax.Array
    pi_grad_sq: jax.Array
    step: jax.Array


def _wm_labels(wm_params: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: jax.tree_util.tree_map(lambda _, k=k: "encoder" if k == "encoder" else "model", v)
        for k, v in wm_params.items()
    }


def make_optimizers(
    cfg: TDMPC2Config,
) -> tuple[optax.GradientTransformation, optax.GradientTransformation]:
    """``(wm_tx, pi_tx)``: the reference's two Adam optimizers (``tdmpc2.py:21-28``).

    ``wm_tx`` acts on :func:`wm_subtree`: Adam(b1 0.9, b2 0.999, eps 1e-8) with lr
    ``learning_rate * enc_lr_scale`` on the encoder and ``learning_rate`` elsewhere (the
    task embedding included).
    ``pi_tx``: Adam(``learning_rate``, eps ``pi_eps``). Gradient clipping is *not* part of
    these transforms: :func:`update` applies :func:`torch_clip_by_global_norm` first (T3),
    because the world-model clip also sees the stale policy-gradient norm.
    ``learning_rate`` may be a float or an optax schedule.
    """
    lr = cfg.learning_rate
    scale = cfg.enc_lr_scale
    enc_lr = (lambda step: lr(step) * scale) if callable(lr) else lr * scale
    wm_tx = optax.multi_transform(
        {"encoder": optax.adam(enc_lr, eps=1e-8), "model": optax.adam(lr, eps=1e-8)},
        _wm_labels,
    )
    pi_tx = optax.adam(lr, eps=cfg.pi_eps)
    return wm_tx, pi_tx


def train_state_from_params(
    wm: WorldModel, params: Params, target_qs: Params | None = None
) -> TDMPC2TrainState:
    """Learner state around given parameters: fresh optimizer states, ``q_scale = 1``,
    ``pi_grad_sq = 0``, ``step = 0``; ``target_qs`` defaults to a copy of ``params["qs"]``
    (the reference's deepcopy, ``world_model.py:31``)."""
    wm_tx, pi_tx = make_optimizers(wm.cfg)
    params = jax.tree_util.tree_map(jnp.asarray, dict(params))
    if target_qs is None:
        target_qs = params["qs"]
    return TDMPC2TrainState(
        params=params,
        target_qs=jax.tree_util.tree_map(jnp.array, target_qs),
        wm_opt_state=wm_tx.init(wm_subtree(params)),
        pi_opt_state=pi_tx.init(params["pi"]),
        q_scale=RunningScale(tau=wm.cfg.tau).init(),
        pi_grad_sq=jnp.zeros((), jnp.float32),
        step=jnp.zeros((), jnp.int32),
    )


def init_train_state(wm: WorldModel, key: jax.Array) -> TDMPC2TrainState:
    """Fresh learner state: ``wm.init(key)``, target Q = copy of Q, optimizer states,
    ``q_scale = 1``, ``pi_grad_sq = 0``, ``step = 0``."""
    return train_state_from_params(wm, wm.init(key))


# ---------------------------------------------------------------------------------- clip
def global_norm_sq(tree: Any) -> jax.Array:
    """Sum of squares of every leaf of ``tree`` (float32 ``[]``)."""
    leaves = jax.tree_util.tree_leaves(tree)
    return sum((jnp.sum(jnp.square(x)) for x in leaves), jnp.zeros((), jnp.float32))


def torch_clip_by_global_norm(
    grads: Any, max_norm: float, extra_sq: jax.Array | float = 0.0
) -> tuple[Any, jax.Array]:
    """torch ``clip_grad_norm_``: ``(grads * min(1, max_norm / (norm + 1e-6)), norm)``.

    ``norm = sqrt(|grads|^2 + extra_sq)`` where ``extra_sq`` is the squared norm of gradients
    that the reference's clip also sees but that are discarded afterwards (the stale policy
    gradient, T3). Returns the clipped tree and the pre-clip total norm ``[]``.
    """
    norm = jnp.sqrt(global_norm_sq(grads) + extra_sq)
    coef = jnp.minimum(max_norm / (norm + 1e-6), 1.0)
    return jax.tree_util.tree_map(lambda g: g * coef, grads), norm
