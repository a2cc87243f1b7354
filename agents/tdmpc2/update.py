"""TD-MPC2 update as a pure, jittable function (docs/design.md §7.2).

Reproduces ``TDMPC2.update`` / ``update_pi`` / ``_td_target`` of the reference
(``tdmpc2/tdmpc2.py:169-286`` at b67b21c; identical at 5f6fade) step by step:

1. TD target (no grad, *pre-step* params): ``next_z = encode(obs[1:])`` with the online
   encoder, ``a' = pi(next_z)`` sampled with ``noise.eps_td``, ``td = r + gamma * min`` of the
   two *target* Q members ``noise.pair_td`` (dropout pass 0).
2. Latent rollout from ``encode(obs[0])`` through the dynamics; consistency loss
   ``sum_t rho^t mse(z_{t+1}, next_z[t]) / H``.
3. Reward / value soft cross-entropies on ``zs[:-1]``, weighted by ``rho^t``, normalised by
   ``H`` and ``H * num_q`` (value: all Q members, dropout pass 1);
   ``total = 20 consistency + 0.1 reward + 0.1 value``.
4. Gradient of ``total`` w.r.t. encoder, dynamics, reward and Q; clipped with torch's
   ``clip_grad_norm_`` formula whose total norm also contains the *previous* update's
   post-clip policy gradient (the reference's stale ``_pi`` grads, tdmpc2@5f6fade
   tdmpc2/tdmpc2.py:184,271; carried as the scalar ``pi_grad_sq``); Adam (eps 1e-8), encoder lr x
   ``enc_lr_scale``.
5. Policy loss on the detached pre-step latents ``zs`` with fresh ``noise.eps_pi`` and the
   *post-step* online Q (mean of members ``noise.pair_pi``, dropout pass 2, no gradient to Q);
   RunningScale updated with ``q[0]`` then used to divide; ``mean_t rho^t mean_B(
   entropy_coef log_pi - q)`` over ``t = 0..H``; clip (torch formula) and Adam (eps ``pi_eps``).
6. Target-Q EMA ``target <- lerp(target, q, tau)`` with the post-step Q.

Randomness enters only through :class:`UpdateNoise` (docs/design.md §7.2 randomness seams). Jit with
``jax.jit(update, static_argnums=(0, 1, 5))`` (``wm``, ``cfg``, ``return_grads``).

Multi-task (docs/design.md §7.6): every function here takes an optional ``task``, a
:class:`~agents.tdmpc2.task_context.TaskContext` of the batch's task ids ``[B]``; ``None`` (the
default) is the single-task computation, unchanged. With a context the heads read the task
embedding, the TD target uses the per-task discounts, the embedding is renormalised (max norm
1) and written back at the reference's two renorming look-ups (before the TD target; after
the world-model Adam step, before the policy loss; T45), and the policy loss reads it
stop-gradiented (5f6fade ``track_q_grad(False)``).

Deviations (``docs/deviations.md``): T1 (random draws from JAX keys), T2 (only
the drawn pair of Q members is evaluated), T3 (stale policy-gradient norm carried as a scalar;
torch-formula clips applied before the optax Adam), T4 (policy-squash numerics).

The learner state, its constructors, the two optimizers and the torch-formula clip are in
:mod:`agents.tdmpc2.train_state`; the noise in
:mod:`agents.tdmpc2.update_noise`; this module holds the losses and the update.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax

from agents.common.normalizers import RunningScale
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.task_context import TaskContext
from agents.tdmpc2.train_state import (
    TDMPC2TrainState,
    global_norm_sq,
    make_optimizers,
    torch_clip_by_global_norm,
    wm_subtree,
)
from agents.tdmpc2.update_noise import UpdateNoise, draw_update_noise
from agents.tdmpc2.world_model import TASK_EMB, Params, WorldModel

__all__ = [
    "UpdateNoise",
    "draw_update_noise",
    "model_losses",
    "policy_loss",
    "td_target",
    "update",
]


def _dropout_key(noise: UpdateNoise, i: int) -> jax.Array | None:
    return None if noise.dropout_keys is None else noise.dropout_keys[i]


# ---------------------------------------------------------------------------------- losses
def td_target(
    wm: WorldModel,
    params: Mapping[str, Any],
    target_qs: Params,
    next_z: jax.Array,
    reward: jax.Array,
    eps: jax.Array,
    pair: jax.Array,
    dropout_key: jax.Array | None,
    task: TaskContext | None = None,
) -> jax.Array:
    """TD target ``[H, B, 1]`` = ``reward [H, B]`` + gamma * min of the target pair.

    ``next_z [H, B, L]``: online-encoder latents of ``obs[1:]``; the action is the
    pre-step policy sample with ``eps [H, B, A]`` (``tdmpc2.py:201-216``). No gradient.
    Multi-task: gamma is the task's float32 discount ``[B, 1]`` (``tdmpc2.py:215``) and the
    target Q reads the online embedding ``params["task_emb"]``.
    """
    _, a, _, _ = wm.pi(params, next_z, eps, task=task)
    target, gamma = {"qs": target_qs}, wm.cfg.gamma
    if task is not None:
        target, gamma = {**target, TASK_EMB: params[TASK_EMB]}, task.discount[..., None]
    q = wm.q_value(target, next_z, a, pair, dropout_key, reduce="min", task=task)
    return jax.lax.stop_gradient(reward[..., None] + gamma * q)


def model_losses(
    wm: WorldModel,
    wm_params: Mapping[str, Any],
    obs0: jax.Array,
    action: jax.Array,
    reward: jax.Array,
    next_z: jax.Array,
    td: jax.Array,
    dropout_key: jax.Array | None,
    task: TaskContext | None = None,
    shift0: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """World-model objective (``tdmpc2.py:239-267``).

    Args:
        wm_params: ``{"encoder", "dynamics", "reward", "qs"}`` (extra keys ignored), plus
            ``task_emb`` with a ``task`` context (every head then reads it).
        obs0: ``[B, O]`` first observations; action ``[H, B, A]``; reward ``[H, B]``.
        next_z: ``[H, B, L]`` consistency targets (no gradient); td ``[H, B, 1]``.
        dropout_key: the value-loss Q pass key (or None).
        shift0: pixel models: ``int32 [B, 2]`` ShiftAug draws for ``obs0`` (or None).

    Returns:
        ``(total, aux)`` with aux ``consistency_loss``, ``reward_loss``, ``value_loss``
        (scalars, already normalised by H, H, H * num_q) and ``zs [H+1, B, L]``.
    """
    cfg = wm.cfg
    H = cfg.horizon
    next_z = jax.lax.stop_gradient(next_z)
    td = jax.lax.stop_gradient(td)
    z = wm.encode(wm_params, obs0, task=task, shift=shift0)
    zs = [z]
    consistency = jnp.zeros((), jnp.float32)
    for t in range(H):
        z = wm.next(wm_params, z, action[t], task=task)
        consistency = consistency + jnp.mean(jnp.square(z - next_z[t])) * cfg.rho**t
        zs.append(z)
    zs = jnp.stack(zs)
    rho = jnp.asarray([cfg.rho**t for t in range(H)], jnp.float32)  # [H]
    th = wm.twohot
    reward_logits = wm.reward(wm_params, zs[:-1], action, task=task)  # [H, B, K]
    q_logits = wm.q(wm_params, zs[:-1], action, dropout_key=dropout_key, task=task)  # [Q,H,B,K]
    reward_ce = jnp.mean(th.loss(reward_logits, reward), axis=-1)  # [H]
    value_ce = jnp.mean(th.loss(q_logits, td[None, ..., 0]), axis=-1)  # [Q, H]
    reward_loss = jnp.sum(reward_ce * rho) * (1.0 / H)
    value_loss = jnp.sum(value_ce * rho) * (1.0 / (H * cfg.num_q))
    consistency = consistency * (1.0 / H)
    total = (
        cfg.consistency_coef * consistency
        + cfg.reward_coef * reward_loss
        + cfg.value_coef * value_loss
    )
    aux = {
        "consistency_loss": consistency,
        "reward_loss": reward_loss,
        "value_loss": value_loss,
        "zs": zs,
    }
    return total, aux


def policy_loss(
    wm: WorldModel,
    pi_params: Params,
    q_params: Params,
    zs: jax.Array,
    eps: jax.Array,
    pair: jax.Array,
    dropout_key: jax.Array | None,
    q_scale: jax.Array,
    task: TaskContext | None = None,
    task_emb: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Policy loss (``tdmpc2.py:173-199``) on latents ``zs [H+1, B, L]`` (no gradient).

    ``q_params``: the (post-step) online Q ensemble, stop-gradiented; ``eps [H+1, B, A]``;
    ``pair [2]``: members averaged. The RunningScale ``q_scale []`` is updated with ``q[0]``
    (``[B, 1]``) before dividing (tdmpc2@5f6fade tdmpc2/tdmpc2.py:188-189); ``q_scale [K]`` is
    the what-if of one scale per task (T49, :func:`_scale_rows`). Returns ``(loss, aux)`` with aux
    ``q_scale`` (new value), ``log_pi [H+1, B, 1]``. Multi-task: ``task_emb [num_tasks, T_d]`` (the
    post-step table, renormed) is read by pi and Q stop-gradiented (5f6fade
    ``track_q_grad(False)``).
    """
    cfg = wm.cfg
    zs = jax.lax.stop_gradient(zs)
    q_params = jax.lax.stop_gradient(q_params)
    pi_in, q_in = {"pi": pi_params}, {"qs": q_params}
    if task is not None:
        emb = jax.lax.stop_gradient(task_emb)
        pi_in, q_in = {**pi_in, TASK_EMB: emb}, {**q_in, TASK_EMB: emb}
    _, a, log_pi, _ = wm.pi(pi_in, zs, eps, task=task)
    q = wm.q_value(q_in, zs, a, pair, dropout_key, reduce="avg", task=task)  # [H+1, B, 1]
    new_scale, divisor = _scale_rows(cfg.tau, q_scale, q, task)
    q = q * (1.0 / divisor)
    rho = jnp.asarray([cfg.rho**t for t in range(cfg.horizon + 1)], jnp.float32)
    loss = jnp.mean(jnp.mean(cfg.entropy_coef * log_pi - q, axis=(1, 2)) * rho)
    return loss, {"q_scale": new_scale, "log_pi": log_pi}


def _scale_rows(
    tau: float, q_scale: jax.Array, q: jax.Array, task: TaskContext | None
) -> tuple[jax.Array, jax.Array]:
    """The updated RunningScale and the divisor of ``q [H+1, B, 1]``'s rows.

    ``q_scale []``: the reference's one scale (tdmpc2@5f6fade tdmpc2/tdmpc2.py:188-189), updated
    with ``q[0]``, divides every row. ``q_scale [K]`` (``agent.q_scale_per_task``, deviation T49,
    a what-if only): task k's scale is updated with the rows of task k and divides them.
    Returns ``(new_scale, divisor)``, the divisor ``[]`` or ``[1, B, 1]``.
    """
    rs, q0 = RunningScale(tau=tau), jax.lax.stop_gradient(q[0])
    if q_scale.ndim == 0:
        new = rs.update(q_scale, q0)
        return new, new
    if task is None:
        raise ValueError(f"q_scale of shape {q_scale.shape} is one per task: pass the batch's task")
    new = rs.update_per_group(q_scale, q0, task.ids)
    return new, new[task.ids][None, :, None]


def _mean_scale(q_scale: jax.Array) -> jax.Array:
    """The logged scale: the one scale, or T49's per-task scales' mean (no op for ``[]``:
    the single-task program stays as recorded, test_multitask.py)."""
    return q_scale if q_scale.ndim == 0 else jnp.mean(q_scale)


def _get(batch: Any, name: str) -> jax.Array:
    return batch[name] if isinstance(batch, Mapping) else getattr(batch, name)


# ---------------------------------------------------------------------------------- update
def update(
    wm: WorldModel,
    cfg: TDMPC2Config,
    state: TDMPC2TrainState,
    batch: Any,
    noise: UpdateNoise,
    return_grads: bool = False,
    task: TaskContext | None = None,
) -> tuple[TDMPC2TrainState, dict[str, Any]]:
    """One TD-MPC2 update (module docstring; ``tdmpc2.py:218-286``). Pure and jittable with
    ``wm``, ``cfg`` and ``return_grads`` static.

    Args:
        batch: ``obs [H+1, B, O]`` (pixel model: ``[H+1, B, 64, 64, C]``, 0..255, any dtype),
            ``action [H, B, A]``, ``reward [H, B]`` (time-major; attributes or mapping keys).
        noise: :class:`UpdateNoise`.
        return_grads: also return ``metrics["grads"] = {"wm": ..., "pi": ...}``, the
            pre-clip gradients (the ones torch's ``clip_grad_norm_`` sees).
        task: the batch's :class:`~agents.tdmpc2.task_context.TaskContext` (task ids ``[B]``)
            for a multi-task model; ``None``: single-task (module docstring).

    Returns:
        ``(new_state, metrics)``; metrics (float32 scalars): consistency_loss, reward_loss,
        value_loss, pi_loss, total_loss, grad_norm (pre-clip, including the stale policy
        gradient), pi_grad_norm (pre-clip), pi_scale (new RunningScale value), pi_entropy
        (``-mean log_pi`` of the policy-loss sample).
    """
    del cfg  # == wm.cfg; kept in the signature for callers that pass both
    c = wm.cfg
    wm_tx, pi_tx = make_optimizers(c)
    obs = jnp.asarray(_get(batch, "obs"))
    if wm.image_shape is None:  # pixel stacks stay uint8 up to the crop (shift_crop casts)
        obs = obs.astype(jnp.float32)
    action = jnp.asarray(_get(batch, "action"), jnp.float32)
    reward = jnp.asarray(_get(batch, "reward"), jnp.float32)
    params = state.params
    if task is not None:  # renorm point 1: the look-up of encode(obs[1:]) (written back)
        params = task.renorm(params)

    # 1. TD targets with the pre-step parameters (online encoder, pre-step pi, target Q).
    next_z = jax.lax.stop_gradient(wm.encode(params, obs[1:], task=task, shift=noise.shift_next))
    td = td_target(
        wm,
        params,
        state.target_qs,
        next_z,
        reward,
        noise.eps_td,
        noise.pair_td,
        _dropout_key(noise, 0),
        task=task,
    )

    # 2-4. World-model loss, gradient, clip (with the stale pi gradient), Adam.
    wm_params = wm_subtree(params)

    def wm_objective(p: Params) -> tuple[jax.Array, dict[str, jax.Array]]:
        return model_losses(
            wm,
            p,
            obs[0],
            action,
            reward,
            next_z,
            td,
            _dropout_key(noise, 1),
            task=task,
            shift0=noise.shift_obs0,
        )

    (total, aux), wm_grads = jax.value_and_grad(wm_objective, has_aux=True)(wm_params)
    clipped, grad_norm = torch_clip_by_global_norm(wm_grads, c.grad_clip_norm, state.pi_grad_sq)
    wm_updates, wm_opt_state = wm_tx.update(clipped, state.wm_opt_state, wm_params)
    new_wm = optax.apply_updates(wm_params, wm_updates)
    if task is not None:  # renorm point 2: update_pi's look-up of pi(zs) (written back)
        new_wm = task.renorm(new_wm)

    # 5. Policy loss: pre-step latents (detached), post-step online Q (no gradient).
    def pi_objective(pp: Params) -> tuple[jax.Array, dict[str, jax.Array]]:
        return policy_loss(
            wm,
            pp,
            new_wm["qs"],
            aux["zs"],
            noise.eps_pi,
            noise.pair_pi,
            _dropout_key(noise, 2),
            state.q_scale,
            task=task,
            task_emb=new_wm.get(TASK_EMB),
        )

    (pi_loss, pi_aux), pi_grads = jax.value_and_grad(pi_objective, has_aux=True)(params["pi"])
    pi_clipped, pi_grad_norm = torch_clip_by_global_norm(pi_grads, c.grad_clip_norm)
    pi_updates, pi_opt_state = pi_tx.update(pi_clipped, state.pi_opt_state, params["pi"])
    new_pi = optax.apply_updates(params["pi"], pi_updates)

    # 6. Target-Q EMA with the post-step Q (torch ``lerp_``: t + tau (q - t), tau < 0.5).
    tau = jnp.float32(c.tau)
    target_qs = jax.tree_util.tree_map(
        lambda t, q: t + tau * (q - t), state.target_qs, new_wm["qs"]
    )

    new_state = state.replace(
        params={**new_wm, "pi": new_pi},
        target_qs=target_qs,
        wm_opt_state=wm_opt_state,
        pi_opt_state=pi_opt_state,
        q_scale=pi_aux["q_scale"],
        pi_grad_sq=global_norm_sq(pi_clipped),
        step=state.step + 1,
    )
    metrics: dict[str, Any] = {
        "consistency_loss": aux["consistency_loss"],
        "reward_loss": aux["reward_loss"],
        "value_loss": aux["value_loss"],
        "pi_loss": pi_loss,
        "total_loss": total,
        "grad_norm": grad_norm,
        "pi_grad_norm": pi_grad_norm,
        "pi_scale": _mean_scale(pi_aux["q_scale"]),
        "pi_entropy": -jnp.mean(pi_aux["log_pi"]),
    }
    if return_grads:
        metrics["grads"] = {"wm": wm_grads, "pi": pi_grads}
        metrics["td_target"] = td
    return new_state, metrics
