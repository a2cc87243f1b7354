"""DreamerV3 training step and policy step as pure, jittable functions.

Reference 2411f7d + 29eb964 ``agent.py:145-218`` (``policy``, ``train``), ``agent.py:413-420``
(loss combination), ``jaxutils.py:398-550`` (optimizer), ``jaxutils.py:737-757`` (slow
critic); docs/design.md §8.2.

:func:`train_step` = one forward pass and ONE ``jax.value_and_grad`` of the total loss
``sum_k scale_k mean(loss_k)`` over the world model, actor and critic at their pre-update
values (world-model losses, imagination, the retnorm update, the replay critic and the
write-back latents all come from that forward); then three LaProp instances (world model,
actor, critic; equal to one optimizer over all modules) and the slow-critic update
(hard copy after the first step, then a 0.02 EMA, with the post-step critic).

Randomness enters only as arrays (docs/design.md §8.2 seams): :class:`TrainNoise` and
:class:`PolicyNoise`, drawn by :func:`draw_train_noise` / :func:`draw_policy_noise`.

Deviations: D29 (draws as arrays from JAX keys), D32 (outputs returned in the same call, not
one call late), D22 (the ``means`` seam of the parity tests), D30 (compute dtype).

Compute dtype (``nets.dtype``): the forward pass computes in it; parameters, gradients,
optimizer state, the slow-critic EMA, the return normaliser and the loss are float32. What
leaves a step is float32: the write-back and carried latents (bfloat16 values, held exactly;
the reference stores ``deter`` in float32 too, ``agent.py:107-110``) and the metrics.

Jit with ``jax.jit(train_step, static_argnums=0)`` (``nets`` is a frozen dataclass).
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from agents.common import ReturnNormalizer, ReturnNormState
from agents.common.blocks import cast
from agents.dreamerv3.behavior import behavior_losses, imagine
from agents.dreamerv3.latents import gumbel_noise
from agents.dreamerv3.networks import GROUPS, Networks
from agents.dreamerv3.optimizer import grouped, laprop
from agents.dreamerv3.rssm import features
from agents.dreamerv3.world_model import Batch, observe_sequence, world_model_losses

__all__ = [
    "Carry",
    "PolicyNoise",
    "TrainNoise",
    "TrainState",
    "draw_policy_noise",
    "draw_train_noise",
    "init_carry",
    "init_train_state",
    "loss_scales",
    "make_optimizer",
    "policy_step",
    "train_step",
]

sg = jax.lax.stop_gradient


@flax.struct.dataclass
class TrainState:
    """One seed's learner state.

    params: trained tree (:class:`Networks`); slow_critic: the critic-shaped EMA tree;
    opt_state: ``{group: LaProp state}`` for :data:`GROUPS`; retnorm: return-normaliser
    EMAs; updates: int32 count of slow-critic updates (= optimizer steps taken).
    """

    params: dict[str, Any]
    slow_critic: dict[str, Any]
    opt_state: dict[str, Any]
    retnorm: ReturnNormState
    updates: jax.Array


@flax.struct.dataclass
class TrainNoise:
    """Draws of one train step: post ``[T, B, S, C]`` Gumbel (posterior samples), imag_stoch
    ``[H, N, S, C]`` Gumbel (prior samples), imag_act ``[H + 1, N, A]`` (standard normal or
    Gumbel; index 0 = start action). ``N = B T`` in b-major order."""

    post: jax.Array
    imag_stoch: jax.Array
    imag_act: jax.Array


@flax.struct.dataclass
class PolicyNoise:
    """Draws of one policy step for ``N`` envs: post ``[N, S, C]`` Gumbel, act ``[N, A]``."""

    post: jax.Array
    act: jax.Array


@flax.struct.dataclass
class Carry:
    """Policy carry per env: deter ``[N, D]``, stoch ``[N, S, C]`` one-hot, prevact ``[N, A]``
    (raw sample; one-hot for discrete actions)."""

    deter: jax.Array
    stoch: jax.Array
    prevact: jax.Array


def make_optimizer(nets: Networks) -> optax.GradientTransformation:
    """The reference's three optimizer instances (world model, actor, critic: one LaProp
    each, the config's settings, docs/design.md §8.2) over :func:`by_group` trees; all three step on
    the one joint gradient."""
    c = nets.cfg
    one = dict(
        lr=c.learning_rate,
        beta1=c.beta1,
        beta2=c.beta2,
        eps=c.eps,
        agc=c.agc,
        agc_pmin=c.agc_pmin,
        warmup=c.warmup,
    )
    return grouped({g: laprop(**one) for g in GROUPS})


def by_group(tree: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{module: ...}`` -> ``{group: {module: ...}}`` (:data:`GROUPS`)."""
    return {g: {k: tree[k] for k in GROUPS[g]} for g in GROUPS}


def init_train_state(nets: Networks, key: jax.Array) -> TrainState:
    """Fresh parameters, optimizer states, zero retnorm, zero update count."""
    params, slow = nets.init(key)
    opt = make_optimizer(nets)
    c = nets.cfg
    norm = ReturnNormalizer(c.retnorm_rate, c.retnorm_limit, c.retnorm_percentiles)
    return TrainState(
        params=params,
        slow_critic=slow,
        opt_state=opt.init(by_group(params)),
        retnorm=norm.init(),
        updates=jnp.zeros((), jnp.int32),
    )


def draw_train_noise(nets: Networks, key: jax.Array, batch: int, length: int) -> TrainNoise:
    """Noise for :func:`train_step` on ``batch`` x ``length`` trained rows."""
    c = nets.cfg
    n, s, k, h, a = batch * length, c.stoch, c.classes_size, c.imag_horizon, nets.action_size
    k1, k2, k3 = jax.random.split(key, 3)
    act_shape = (h + 1, n, a)
    act = gumbel_noise(k3, act_shape) if nets.discrete else jax.random.normal(k3, act_shape)
    return TrainNoise(
        post=gumbel_noise(k1, (length, batch, s, k)),
        imag_stoch=gumbel_noise(k2, (h, n, s, k)),
        imag_act=act,
    )


def draw_policy_noise(nets: Networks, key: jax.Array, n_envs: int) -> PolicyNoise:
    """Noise for :func:`policy_step` on ``n_envs`` envs."""
    c = nets.cfg
    k1, k2 = jax.random.split(key)
    shape = (n_envs, nets.action_size)
    act = gumbel_noise(k2, shape) if nets.discrete else jax.random.normal(k2, shape)
    return PolicyNoise(post=gumbel_noise(k1, (n_envs, c.stoch, c.classes_size)), act=act)


def loss_scales(nets: Networks) -> dict[str, float]:
    """Scale of every loss term (the reference's ``loss_scales``), in its summation order:
    an image model has ``image`` (``dec_cnn``) and ``vector`` only with a vector part."""
    c = nets.cfg
    rec = {"vector": c.rec_scale}
    if nets.image_shape is not None:
        rec = {"vector": c.rec_scale} if nets.obs_size else {}
        rec["image"] = c.image_scale
    return {
        **rec,
        "reward": c.rew_scale,
        "cont": c.con_scale,
        "dyn": c.dyn_scale,
        "rep": c.rep_scale,
        "actor": c.actor_scale,
        "critic": c.critic_scale,
        "replay_critic": c.repval_scale,
    }


def _loss(
    params: dict[str, Any],
    nets: Networks,
    state: TrainState,
    batch: Batch,
    noise: TrainNoise,
    means: dict[str, jax.Array] | None,
) -> tuple[jax.Array, tuple]:
    """Total loss and everything else the forward pass produces (module docstring)."""
    last, post = observe_sequence(nets, params, batch, noise.post)
    wm_losses, wm_metrics = world_model_losses(nets, params, batch, post)
    traj = imagine(nets, params, post, noise.imag_stoch, noise.imag_act)
    ac_losses, retnorm, ac_metrics = behavior_losses(
        nets, params, state.slow_critic, state.retnorm, batch, post, traj, means
    )
    losses = {**wm_losses, **ac_losses}
    scales = loss_scales(nets)
    total = jnp.stack([scales[k] * jnp.mean(losses[k]) for k in scales]).sum()
    metrics = {**wm_metrics, **ac_metrics}
    for k, v in losses.items():
        metrics[f"{k}_loss"] = jnp.mean(v)
        metrics[f"{k}_loss_std"] = jnp.std(v)
    return total, (last, post, traj, retnorm, losses, metrics)


def train_step(
    nets: Networks,
    state: TrainState,
    batch: Batch,
    noise: TrainNoise,
    means: dict[str, jax.Array] | None = None,
    *,
    parity: bool = False,
) -> tuple[TrainState, dict[str, Any], dict[str, jax.Array]]:
    """One DreamerV3 update on ``batch`` (``B`` x ``T + 1`` rows, row 0 the replay context).

    The carry of the reference's ``train`` enters as the context row's stored latent and
    action (replay context, 29eb964); the carry it returns is in ``outs``.

    Returns ``(state', outs, metrics)`` with ``outs``: ``replay_deter [B, T, D]``,
    ``replay_stoch [B, T, S]`` int32 (write-back latents), ``carry`` (last posterior
    ``deter [B, D]``, ``stoch [B, S, C]``, ``prevact = action[:, -1]``). ``parity=True``
    (static: ``jax.jit(train_step, static_argnums=0, static_argnames="parity")``) adds what
    only the parity tests read: ``losses`` (per-element, unscaled), ``grads`` (per module),
    ``updates`` (optimizer updates), ``traj`` (imagined trajectory); 55 MiB at 1m, 358 MiB
    at 12m that a training step should not write. ``means`` overrides the two-hot means
    (parity tests, D22).
    """
    grad_fn = jax.value_and_grad(_loss, has_aux=True)
    (total, aux), grads = grad_fn(state.params, nets, state, batch, noise, means)
    last, post, traj, retnorm, losses, metrics = aux
    upd, opt_state = make_optimizer(nets).update(
        by_group(grads), state.opt_state, by_group(state.params)
    )
    updates = {k: v for g in GROUPS for k, v in upd[g].items()}
    params = optax.apply_updates(state.params, updates)
    mix = jnp.where(state.updates == 0, 1.0, nets.cfg.slow_rate).astype(jnp.float32)
    slow = jax.tree_util.tree_map(
        lambda c, s: mix * c + (1.0 - mix) * s, params["critic"], state.slow_critic
    )
    new_state = TrainState(
        params=params,
        slow_critic=slow,
        opt_state=opt_state,
        retnorm=retnorm,
        updates=state.updates + 1,
    )
    metrics = {**metrics, "loss": total, "opt/grad_norm": optax.tree.norm(grads)}
    f32 = lambda x: cast(x, jnp.float32)  # noqa: E731
    outs = {
        "replay_deter": f32(post.deter),
        "replay_stoch": jnp.argmax(post.stoch, -1).astype(jnp.int32),
        "carry": Carry(
            deter=f32(last["deter"]), stoch=f32(last["stoch"]), prevact=batch.action[:, -1]
        ),
    }
    if parity:
        outs.update(losses=losses, grads=grads, updates=updates, traj=traj)
    return new_state, outs, metrics


def init_carry(nets: Networks, n_envs: int) -> Carry:
    """Zero policy carry (``agent.py:118-122``)."""
    c = nets.cfg
    return Carry(
        deter=jnp.zeros((n_envs, c.deter_size), jnp.float32),
        stoch=jnp.zeros((n_envs, c.stoch, c.classes_size), jnp.float32),
        prevact=jnp.zeros((n_envs, nets.action_size), jnp.float32),
    )


def policy_step(
    nets: Networks,
    params: dict[str, Any],
    carry: Carry,
    obs: jax.Array | dict[str, jax.Array],
    is_first: jax.Array,
    noise: PolicyNoise,
) -> tuple[jax.Array, dict[str, jax.Array], Carry]:
    """Filter one observation per env and sample an action (``agent.py:145-180``).

    ``obs [N, O]`` (an image model: the dict ``{"image" [N, H, W, C], "vector" [N, O]}``),
    ``is_first [N]``. Returns ``(action, outs, carry')``: action ``[N, A]``
    raw sample (continuous) or ``[N]`` int32 class (discrete); outs ``deter [N, D]``,
    ``stoch [N, S]`` int32 (the latents replay stores); the policy always samples. The
    carry and ``deter`` are float32 whatever the compute dtype (they hold its values exactly);
    the action is the float32 sample, not rounded (the reference casts only imagined actions).
    """
    embed = nets.encoder.apply({"params": params["enc"]}, obs)
    lat = {"deter": carry.deter, "stoch": carry.stoch}
    lat, _ = nets.rssm.apply(
        {"params": params["dyn"]},
        lat,
        carry.prevact,
        embed,
        is_first,
        noise.post,
        method="observe",
    )
    dist = nets.actor.apply({"params": params["actor"]}, features(lat["deter"], lat["stoch"]))
    act = sg(dist.sample(noise.act))
    deter, stoch = cast(lat["deter"], jnp.float32), cast(lat["stoch"], jnp.float32)
    outs = {"deter": deter, "stoch": jnp.argmax(lat["stoch"], -1).astype(jnp.int32)}
    new_carry = Carry(deter=deter, stoch=sg(stoch), prevact=act)
    action = jnp.argmax(act, -1).astype(jnp.int32) if nets.discrete else act
    return action, outs, new_carry
