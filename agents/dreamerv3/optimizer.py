"""DreamerV3's optimizer: AGC, then LaProp (RMS scaling followed by momentum), -lr, warmup.

Reference danijar/dreamerv3 2411f7d, ``dreamerv3/jaxutils.py`` and ``configs.yaml:99``
(``opt: {scaler: rms, lr: 4e-5, eps: 1e-20, momentum: True, wd: 0.0, warmup: 1000,
globclip: 0.0, agc: 0.3, beta1: 0.9, beta2: 0.999, pmin: 1e-3, anneal: 0,
schedule: constant}``). ``Optimizer.__init__`` (``jaxutils.py:427-457``) builds the chain
in this order, every step acting on each gradient leaf on its own:

1. AGC, ``scale_by_agc`` (``jaxutils.py:660-674``), per parameter tensor ``g`` with
   parameter ``p`` (Frobenius norms of the flattened tensors)::

       g * (1 / max(1, ||g|| / (clip * max(pmin, ||p||))))

2. RMS scaling, ``scale_by_rms`` (``jaxutils.py:677-692``): the count ``t`` is incremented
   *before* use (so ``t = 1`` on the first update), then
   ``nu = beta2 * nu + (1 - beta2) * (g * g)`` and the output is
   ``g / (sqrt(nu / (1 - beta2**t)) + eps)`` -- ``eps`` outside the square root.
3. Momentum, ``scale_by_momentum`` without Nesterov (``jaxutils.py:695-713``): count
   incremented first, ``mu = (1 - beta1) * g + beta1 * mu``, output
   ``mu / (1 - beta1**t)``.
4. ``optax.scale(-lr)`` (``jaxutils.py:454-455``; ``separate_lrs: False``,
   ``configs.yaml:100``).
5. Warmup, applied by ``Optimizer.__call__`` after the chain (``jaxutils.py:503-524``):
   ``updates * clip(step / warmup, 0, 1)`` with the optimizer's own int32 ``step`` that
   starts at 0 (``jaxutils.py:458``) and is incremented after the update
   (``jaxutils.py:539``), so the first update is exactly zero.

Global-norm clipping (``globclip: 0``, ``jaxutils.py:431-432``), weight decay (``wd: 0``,
``jaxutils.py:446-450``), the annealing schedule (``schedule: constant``) and float16 loss
scaling (float32 compute) are all off in the reference config and are not implemented.

The reference runs *one* optimizer over all trained modules (``agent.py:83-88``, called at
``agent.py:191``). Since every transformation above acts on each leaf independently and all
counters advance once per update, one instance per module group (world model, actor,
critic) applied to the same joint gradient gives the same updates; :func:`grouped` builds
that combination as a single :class:`optax.GradientTransformation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

__all__ = ["RmsState", "grouped", "laprop", "scale_by_agc", "scale_by_rms", "step_count"]


class RmsState(NamedTuple):
    """State of :func:`scale_by_rms` (reference ``(step, nu)``, ``jaxutils.py:679-682``)."""

    count: jax.Array  # int32 [], updates taken
    nu: Any  # float32 pytree shaped like params


def scale_by_agc(clip: float = 0.3, pmin: float = 1e-3) -> optax.GradientTransformation:
    """Adaptive gradient clipping per parameter tensor (``jaxutils.py:660-674``).

    Each gradient leaf ``g`` (any shape, same shape as its parameter ``p``) becomes
    ``g * (1 / max(1, ||g|| / (clip * max(pmin, ||p||))))`` with Frobenius norms over all of
    the tensor's elements. Stateless; ``update`` requires ``params``.

    Hand-written: ``optax.adaptive_grad_clip`` uses unit-wise norms (per output unit of a
    matrix, not per tensor) and the form ``where(||g|| < m, g, g * (m / max(||g||, 1e-6)))``,
    which rounds differently.
    """

    def init_fn(params: Any) -> optax.EmptyState:
        del params
        return optax.EmptyState()

    def update_fn(
        updates: Any, state: optax.EmptyState, params: Any = None
    ) -> tuple[Any, optax.EmptyState]:
        if params is None:
            raise ValueError("scale_by_agc needs the current params")

        def clip_leaf(g: jax.Array, p: jax.Array) -> jax.Array:
            gnorm = jnp.linalg.norm(g.ravel(), 2)
            pnorm = jnp.linalg.norm(p.ravel(), 2)
            limit = clip * jnp.maximum(pmin, pnorm)
            return g * (1 / jnp.maximum(1.0, gnorm / limit))

        return jax.tree_util.tree_map(clip_leaf, updates, params), state

    return optax.GradientTransformation(init_fn, update_fn)


def scale_by_rms(beta: float = 0.999, eps: float = 1e-20) -> optax.GradientTransformation:
    """Bias-corrected RMS scaling, the first half of LaProp (``jaxutils.py:677-692``).

    State :class:`RmsState`.
    Per leaf: ``t = count + 1``; ``nu = beta * nu + (1 - beta) * (g * g)``;
    output ``g / (sqrt(nu / (1 - beta**t)) + eps)``.

    Hand-written: ``optax.scale_by_rms(eps_in_sqrt=False, bias_correction=True)`` has the
    same math but computes ``(1 / (sqrt(nu_hat) + eps)) * g`` (two roundings instead of one
    division), so it is not bit-for-bit the reference.
    """
    beta = float(beta)
    eps = float(eps)

    def init_fn(params: Any) -> RmsState:
        nu = jax.tree_util.tree_map(lambda p: jnp.zeros_like(p, jnp.float32), params)
        return RmsState(count=jnp.zeros((), jnp.int32), nu=nu)

    def update_fn(updates: Any, state: RmsState, params: Any = None) -> tuple[Any, RmsState]:
        del params
        count = optax.safe_increment(state.count)
        nu = jax.tree_util.tree_map(lambda v, g: beta * v + (1 - beta) * (g * g), state.nu, updates)
        nu_hat = optax.tree_utils.tree_bias_correction(nu, beta, count)
        out = jax.tree_util.tree_map(lambda g, v: g / (jnp.sqrt(v) + eps), updates, nu_hat)
        return out, RmsState(count=count, nu=nu)

    return optax.GradientTransformation(init_fn, update_fn)


def laprop(
    lr: float = 4e-5,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-20,
    agc: float = 0.3,
    agc_pmin: float = 1e-3,
    warmup: int = 1000,
) -> optax.GradientTransformation:
    """The reference optimizer (module docstring): AGC -> RMS -> momentum -> -lr -> warmup.

    ``init(params)`` returns the chain state, a tuple
    ``(EmptyState, RmsState(count, nu), EmaState(count, ema=mu), EmptyState,
    ScaleByScheduleState(count))``; all counts are int32 scalars, ``nu`` / ``mu`` are float32
    pytrees shaped like ``params``. ``update(grads, state, params)`` needs ``params`` (AGC)
    and returns updates shaped like ``grads``, to be added to the params.

    ``optax.ema(beta1, debias=True)`` is exactly the reference momentum
    (``jaxutils.py:704-710``: increment, ``optax.update_moment``, ``optax.bias_correction``)
    and ``optax.scale_by_schedule`` evaluates its schedule at the pre-increment count, i.e.
    at the reference's ``step`` (0 on the first update, ``jaxutils.py:511-513, 539``), and
    multiplies after the ``-lr`` scale as the reference does (``jaxutils.py:524``).
    ``warmup <= 0`` means no warmup (the reference skips the factor; a factor of 1 is exact).
    """
    warmup = int(warmup)

    def warmup_factor(count: jax.Array) -> jax.Array:
        if warmup <= 0:
            return jnp.ones((), jnp.float32)
        return jnp.clip(count.astype(jnp.float32) / warmup, 0, 1)

    return optax.chain(
        scale_by_agc(agc, agc_pmin),
        scale_by_rms(beta2, eps),
        optax.ema(float(beta1), debias=True),
        optax.scale(-float(lr)),
        optax.scale_by_schedule(warmup_factor),
    )


def step_count(state: Any) -> jax.Array:
    """The warmup counter (the reference's ``Optimizer.step``, int32 []) of a
    :func:`laprop` state: the number of updates taken so far."""
    return state[-1].count


def grouped(
    transforms: Mapping[str, optax.GradientTransformation],
) -> optax.GradientTransformation:
    """One optimizer instance per top-level group of a params dict.

    ``params`` / ``grads`` are dicts whose keys are exactly ``transforms``' keys (e.g.
    ``{"wm": ..., "actor": ..., "critic": ...}``); group ``k`` is transformed by
    ``transforms[k]`` on its own subtree. The state is ``{k: state_k}``; ``update(grads,
    state, params)`` returns ``{k: updates_k}``. All groups are updated from the same joint
    gradient (no group sees another's update), which for :func:`laprop` equals one instance
    over the whole dict (module docstring).
    """
    transforms = dict(transforms)

    def check(tree: Mapping[str, Any], what: str) -> None:
        if set(tree) != set(transforms):
            raise ValueError(
                f"{what} groups {sorted(tree)} != optimizer groups {sorted(transforms)}"
            )

    def init_fn(params: Mapping[str, Any]) -> dict[str, Any]:
        check(params, "params")
        return {k: tx.init(params[k]) for k, tx in transforms.items()}

    def update_fn(
        updates: Mapping[str, Any], state: Mapping[str, Any], params: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        check(updates, "grads")
        if params is not None:
            check(params, "params")
        out, new_state = {}, {}
        for k, tx in transforms.items():
            p = None if params is None else params[k]
            out[k], new_state[k] = tx.update(updates[k], state[k], p)
        return out, new_state

    return optax.GradientTransformation(init_fn, update_fn)
