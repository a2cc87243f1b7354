"""TD-MPC2's MPPI planner for one environment, pure and jittable (docs/design.md §7.3).

Paper-era semantics (5f6fade ``tdmpc2/tdmpc2.py:94-171``; the planner is the same at b67b21c,
docs/design.md §1). Line numbers below are 5f6fade's:

1. ``z = encode(obs)``; P = ``num_pi_trajs`` policy trajectories: ``a_t = pi(z_t).sample``,
   ``z_{t+1} = next(z_t, a_t)`` for t < H (``tdmpc2.py:120-126``). They are drawn
   once per decision and re-scored, never resampled, in every iteration.
2. ``mean = 0 [H, A]``, shifted warm start ``mean[:-1] = prev_mean[1:]`` unless ``t0``;
   ``std = max_std`` at every decision (``:128-136``).
3. ``iterations`` MPPI iterations (``:139-162``): the N - P sampled candidates are
   ``clamp(mean + std * eps, -1, 1)``; the value of each of the N candidates is
   ``sum_t gamma^t r_hat(z_t, a_t) + gamma^H * avg of 2 online Q members at
   (z_H, pi(z_H).sample)`` (``_estimate_value``, ``:94-103``) with Q dropout active
   (docs/design.md §7.2), NaN -> 0; the top-K elites get scores ``softmax(temperature * V)``;
   ``mean`` and the (biased) ``std`` are their score-weighted moments, ``std`` clamped to
   ``[min_std, max_std]``.
4. The executed action is the first action of one elite drawn from the last iteration's
   scores (numpy ``np.random.choice(K, p=score)``, ``:165-166``), plus ``std[0] * eps``
   unless ``eval_mode`` (``:168-171``), clamped to ``[-1, 1]``. The last iteration's ``mean``
   is the next decision's warm start (``self._prev_mean``, ``:167``).

Randomness seam (docs/design.md §7.2): every random draw of one decision is an explicit array of
:class:`PlanNoise`, produced by :func:`draw_plan_noise`, so tests can inject the reference's
recorded draws. Deviations: T40 (only the drawn Q pair is evaluated), T41 (elite draw by a
float32 inverse CDF of one uniform), T42 (``lax.top_k`` tie order).

Multi-task (docs/design.md §7.6; ``tdmpc2.py:102,145-146,160-162``): :func:`plan` and
:func:`estimate_value` take an optional ``task``, the env's
:class:`~agents.tdmpc2.task_context.TaskContext` (a scalar task id); ``None`` (the default) is the
single-task computation, unchanged. With a context the heads read the task embedding (its row
renormalised at the look-up and not written back, T45), the candidates are multiplied by the
task's action mask after sampling and the mean and std after the std clamp, and the value's
discount products are the reference's float32 products of the task's discount.

Pieces, exposed for the parity tests: :func:`estimate_value` (one iteration's values),
:func:`mppi_update` (elites, scores, refit), :func:`elite_draw` (the final draw) and
:func:`plan` (one whole decision; callers ``jax.vmap`` it over envs, with ``wm``, ``cfg`` and
``eval_mode`` static).
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
from flax import struct

from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.layers import draw_shifts
from agents.tdmpc2.task_context import TaskContext

__all__ = [
    "PlanNoise",
    "draw_plan_noise",
    "elite_draw",
    "estimate_value",
    "mppi_update",
    "plan",
]


class _WorldModel(Protocol):
    """The subset of ``agents.tdmpc2.world_model.WorldModel`` the planner calls (``task`` is
    passed only for a multi-task decision)."""

    @property
    def twohot(self) -> Any: ...

    def encode(self, params: dict, obs: jax.Array, task: Any = None) -> jax.Array: ...

    def next(self, params: dict, z: jax.Array, a: jax.Array, task: Any = None) -> jax.Array: ...

    def reward(self, params: dict, z: jax.Array, a: jax.Array, task: Any = None) -> jax.Array: ...

    def pi(
        self, params: dict, z: jax.Array, eps: jax.Array, task: Any = None
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]: ...

    def q_value(
        self,
        params: dict,
        z: jax.Array,
        a: jax.Array,
        pair: jax.Array,
        dropout_key: jax.Array | None,
        reduce: str = "min",
        task: Any = None,
    ) -> jax.Array: ...


@struct.dataclass
class PlanNoise:
    """Every random draw of one planning decision (one env), in the reference's draw order.

    Shapes with H = ``horizon``, P = ``num_pi_trajs``, N = ``num_samples``,
    I = ``iterations``, A = action size:

    * ``pi_eps [H, P, A]``: N(0, 1) of the policy trajectories' ``pi(_z)`` samples
      (``torch.randn_like`` in ``model.pi``, one per horizon step; ``tdmpc2.py:120-126``).
    * ``sample_eps [I, H, N - P, A]``: N(0, 1) of the sampled candidates
      (``torch.randn(H, N - P, A)``, ``:142-144``).
    * ``terminal_eps [I, N, A]``: N(0, 1) of the terminal ``pi(z_H)`` sample in the value
      estimate (``:103``).
    * ``q_pair [I, 2] int32``: the two distinct online Q members averaged in the value
      estimate (``np.random.choice(num_q, 2, replace=False)``, ``common/world_model.py:170``).
    * ``dropout_keys [I, ...]``: one PRNG key per iteration for the Q pass's dropout masks
      (typed or raw, as produced by ``jax.random.split``).
    * ``u []`` float32 in ``[0, 1)``: the uniform of the final elite draw (T41).
    * ``explore_eps [A]``: N(0, 1) exploration noise (``torch.randn(A)``, ``:170``); unused
      in ``eval_mode``.
    * ``shift [2] int32`` or None: a pixel model's ShiftAug draw for ``encode(obs)`` in
      ``act`` (``tdmpc2.py:87``, drawn before the planner's; issue 48). None: unshifted / a
      vector model.
    """

    pi_eps: jax.Array
    sample_eps: jax.Array
    terminal_eps: jax.Array
    q_pair: jax.Array
    dropout_keys: jax.Array
    u: jax.Array
    explore_eps: jax.Array
    shift: jax.Array | None = None


def draw_plan_noise(key: jax.Array, cfg: TDMPC2Config, action_size: int) -> PlanNoise:
    """Draw one decision's :class:`PlanNoise` from ``key`` (shapes as documented there).

    The Q pair of each iteration is uniform over ordered pairs of distinct members (the
    distribution of numpy's ``choice(num_q, 2, replace=False)``); ``u`` is uniform in
    ``[0, 1)`` float32.
    """
    if cfg.num_q is None:
        raise ValueError("cfg must be resolved (TDMPC2Config.resolve) before planning")
    H, P, N, it, A = (
        cfg.horizon,
        cfg.num_pi_trajs,
        cfg.num_samples,
        cfg.iterations,
        action_size,
    )
    k_pi, k_smp, k_term, k_pair, k_drop, k_u, k_exp = jax.random.split(key, 7)
    pair_keys = jax.random.split(k_pair, it)
    q_pair = jax.vmap(lambda k: jax.random.choice(k, cfg.num_q, (2,), replace=False))(pair_keys)
    shift = None
    if cfg.obs == "rgb":  # a key folded off the others, so vector models draw as before
        shift = draw_shifts(jax.random.fold_in(key, 48), ())
    return PlanNoise(
        pi_eps=jax.random.normal(k_pi, (H, P, A), jnp.float32),
        sample_eps=jax.random.normal(k_smp, (it, H, N - P, A), jnp.float32),
        terminal_eps=jax.random.normal(k_term, (it, N, A), jnp.float32),
        q_pair=q_pair.astype(jnp.int32),
        dropout_keys=jax.random.split(k_drop, it),
        u=jax.random.uniform(k_u, (), jnp.float32),
        explore_eps=jax.random.normal(k_exp, (A,), jnp.float32),
        shift=shift,
    )


def _task_kw(task: TaskContext | None) -> dict[str, Any]:
    """``{"task": task}`` for a multi-task decision, else nothing: a single-task world model
    (any object with the protocol's methods) is called exactly as before the hooks."""
    return {} if task is None else {"task": task}


def elite_draw(score: jax.Array, u: jax.Array) -> jax.Array:
    """Index drawn from the categorical ``score [K]`` by the inverse CDF of ``u []``.

    numpy's legacy ``RandomState.choice(K, p=score)`` (the reference's final draw,
    ``tdmpc2.py:166 @5f6fade``) computes ``cdf = cumsum(p); cdf /= cdf[-1]`` and returns
    ``searchsorted(cdf, random_sample(), side="right")``, i.e. the number of CDF entries
    ``<= u``. Same here, in float32 (T41: numpy sums in float64; the two differ only when
    ``u`` lies within float32 rounding of a CDF boundary). Returns an int32 scalar in
    ``[0, K)``.
    """
    cdf = jnp.cumsum(score)
    cdf = cdf / cdf[-1]
    idx = jnp.sum(cdf <= u).astype(jnp.int32)
    return jnp.minimum(idx, score.shape[0] - 1)


def estimate_value(
    wm: _WorldModel,
    cfg: TDMPC2Config,
    params: dict,
    z: jax.Array,
    actions: jax.Array,
    terminal_eps: jax.Array,
    q_pair: jax.Array,
    dropout_key: jax.Array | None,
    task: TaskContext | None = None,
) -> jax.Array:
    """Values ``[N]`` of action sequences ``actions [H, N, A]`` from latents ``z [N, L]``.

    5f6fade ``_estimate_value`` (``tdmpc2.py:94-103``): ``G = sum_t gamma^t
    decode(reward(z_t, a_t))``, ``z_{t+1} = next(z_t, a_t)``, plus ``gamma^H`` times the mean
    of the online Q members ``q_pair [2]`` at ``(z_H, pi(z_H, terminal_eps [N, A]).sample)``,
    dropout keyed by ``dropout_key`` (docs/design.md §7.2). Only the drawn pair is evaluated (T40).
    ``gamma^t`` is the Python float64 product, rounded to float32 when applied, as the
    reference's ``discount *= self.discount``. NaNs are *not* replaced here (see ``plan``).
    Multi-task: gamma is the task's float32 discount and its powers float32 products, as the
    reference's ``discount *= self.discount[task]`` (``tdmpc2.py:102``).
    """
    gamma = float(cfg.gamma) if task is None else task.discount
    kw = _task_kw(task)
    G, discount = jnp.zeros(z.shape[:-1], jnp.float32), 1.0
    for t in range(cfg.horizon):
        r = wm.twohot.decode(wm.reward(params, z, actions[t], **kw))  # [N]
        z = wm.next(params, z, actions[t], **kw)
        G = G + discount * r
        discount *= gamma
    a_H = wm.pi(params, z, terminal_eps, **kw)[1]
    q = wm.q_value(params, z, a_H, q_pair, dropout_key, reduce="avg", **kw)[..., 0]  # [N]
    return G + discount * q


def mppi_update(
    cfg: TDMPC2Config, value: jax.Array, actions: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """One MPPI refit (``tdmpc2.py:150-159 @5f6fade``): values ``[N]``, actions ``[H, N, A]``.

    Returns ``(elite_idx [K] int32`` in descending value (``lax.top_k``; T42 for ties),
    ``score [K]`` = normalised ``exp(temperature (V_e - max V_e))``, ``mean [H, A]`` =
    ``sum_k s_k a_k / (sum s + 1e-9)``, ``std [H, A]`` = ``sqrt(sum_k s_k (a_k - mean)^2 /
    (sum s + 1e-9))`` clamped to ``[min_std, max_std]``).
    """
    elite_value, elite_idx = jax.lax.top_k(value, cfg.num_elites)
    elite_actions = actions[:, elite_idx]  # [H, K, A]
    score = jnp.exp(cfg.temperature * (elite_value - jnp.max(elite_value)))
    score = score / jnp.sum(score)
    denom = jnp.sum(score) + 1e-9
    w = score[None, :, None]
    mean = jnp.sum(w * elite_actions, axis=1) / denom
    var = jnp.sum(w * (elite_actions - mean[:, None]) ** 2, axis=1) / denom
    std = jnp.clip(jnp.sqrt(var), cfg.min_std, cfg.max_std)
    return elite_idx.astype(jnp.int32), score, mean, std


def plan(
    wm: _WorldModel,
    cfg: TDMPC2Config,
    params: dict,
    obs: jax.Array,
    prev_mean: jax.Array,
    t0: jax.Array,
    noise: PlanNoise,
    *,
    eval_mode: bool,
    task: TaskContext | None = None,
) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
    """One MPPI decision for one env (module docstring; docs/design.md §7.3).

    Args:
        wm: the world model (static; only its pure methods are called).
        cfg: resolved config (static): ``horizon`` H, ``num_samples`` N, ``num_elites`` K,
            ``num_pi_trajs`` P, ``iterations`` I, ``min_std``, ``max_std``,
            ``temperature`` (a multiplier on the values, i.e. an inverse temperature),
            ``gamma``.
        params: world-model parameters (``encoder``, ``dynamics``, ``reward``, ``qs``,
            ``pi``).
        obs: observation ``[O]``.
        prev_mean: the previous decision's returned mean ``[H, A]`` (ignored if ``t0``).
        t0: bool scalar, first observation of the episode (no warm start).
        noise: this decision's draws (:class:`PlanNoise`).
        eval_mode: static; drops the final exploration noise only (planning stays
            stochastic, as in the reference).
        task: multi-task only, the env's task context (scalar id; module docstring).

    Returns:
        ``(action [A], mean [H, A], info)`` with ``mean`` the last iteration's mean (the
        next warm start) and ``info`` holding, per iteration, ``values [I, N]``,
        ``elite_idxs [I, K]`` (descending value), ``scores [I, K]`` (normalised),
        ``means [I, H, A]``, ``stds [I, H, A]``, plus ``pi_actions [H, P, A]``, the final
        ``elite_choice []`` (index into the last elites) and that elite's action sequence
        ``chosen [H, A]`` (before the exploration noise).
    """
    if cfg.gamma is None:
        raise ValueError("cfg must be resolved (TDMPC2Config.resolve) before planning")
    H, N, K, P = cfg.horizon, cfg.num_samples, cfg.num_elites, cfg.num_pi_trajs
    A = prev_mean.shape[-1]

    kw = _task_kw(task)
    if task is not None:  # the look-up renorm of the task's row, not written back (T45)
        params = task.renorm(params)
    # pixel models only: the protocol's encode has no shift
    shift_kw = {} if noise.shift is None else {"shift": noise.shift}
    z = wm.encode(params, obs, **kw, **shift_kw)  # [L]

    # 1. policy trajectories [H, P, A] (tdmpc2.py:120-126 @5f6fade)
    pi_rows = []
    _z = jnp.broadcast_to(z, (P, z.shape[-1]))
    for t in range(H):
        a_t = wm.pi(params, _z, noise.pi_eps[t], **kw)[1]
        pi_rows.append(a_t)
        if t < H - 1:
            _z = wm.next(params, _z, a_t, **kw)
    pi_actions = jnp.stack(pi_rows)

    # 2. initial mean/std (:128-136): shifted warm start, last row 0; std reset to max_std
    shifted = jnp.concatenate([prev_mean[1:], jnp.zeros((1, A), prev_mean.dtype)], axis=0)
    mean0 = jnp.where(jnp.asarray(t0, bool), jnp.zeros((H, A), jnp.float32), shifted)
    std0 = jnp.full((H, A), cfg.max_std, jnp.float32)
    zN = jnp.broadcast_to(z, (N, z.shape[-1]))

    # 3. MPPI iterations (:139-162), one scan step per iteration's draws
    def iteration(carry, xs):
        mean, std, _, _ = carry
        eps, term_eps, pair, dkey = xs
        sampled = jnp.clip(mean[:, None] + std[:, None] * eps, -1.0, 1.0)  # [H, N-P, A]
        actions = jnp.concatenate([pi_actions, sampled], axis=1)  # [H, N, A]
        if task is not None:  # tdmpc2.py:145-146
            actions = task.mask(actions)
        value = estimate_value(wm, cfg, params, zN, actions, term_eps, pair, dkey, task=task)
        value = jnp.nan_to_num(value, nan=0.0)
        elite_idx, score, mean, std = mppi_update(cfg, value, actions)
        if task is not None:  # after the std clamp (tdmpc2.py:160-162)
            mean, std = task.mask(mean), task.mask(std)
        out = {
            "values": value,
            "elite_idxs": elite_idx,
            "scores": score,
            "means": mean,
            "stds": std,
        }
        return (mean, std, actions[:, elite_idx], score), out

    init = (
        mean0,
        std0,
        jnp.zeros((H, K, A), jnp.float32),
        jnp.zeros((K,), jnp.float32),
    )
    xs = (noise.sample_eps, noise.terminal_eps, noise.q_pair, noise.dropout_keys)
    (mean, std, elite_actions, score), info = jax.lax.scan(iteration, init, xs)

    # 4. final selection (:164-171)
    k = elite_draw(score, noise.u)
    action = elite_actions[0, k]
    if not eval_mode:
        action = action + std[0] * noise.explore_eps
    action = jnp.clip(action, -1.0, 1.0)
    info = {**info, "pi_actions": pi_actions, "elite_choice": k, "chosen": elite_actions[:, k]}
    return action, mean, info
