"""DreamerV3 imagination and the actor, critic and replay-critic losses.

Reference 2411f7d ``agent.py:264-373``, ``jaxutils.py:301-395,732-757``. Settings of the paper-era
code, fixed here (no flags): ``imag_start: all``, ``ac_grads: none``, ``slowtar: False``,
``contdisc: True``, valnorm and advnorm off, ``replay_critic_bootstrap: imag``.

* :func:`imagine`: from every posterior state (``N = B T`` starts), ``H = imag_horizon``
  prior steps, actions sampled from the actor at every state; trajectory of ``H + 1``
  states and actions. All of it is computed from stop-gradiented parameters and starts: no
  loss differentiates through imagination (the reference's losses only see ``sg`` of it).
* :func:`behavior_losses`: rewards ``[reward_t (data), rew head mean at 1..H]``, continues
  ``[1 - is_terminal_t, con head mean at 1..H]``, ``weight = cumprod(con)``; λ-return with the
  online critic; retnorm updated, then read; REINFORCE actor loss with the entropy bonus;
  critic loss on ``sg(ret)`` plus the slow-critic regulariser; replay critic on the posterior
  features (gradient into the world model) with the imagination return as bootstrap.

Compute dtype (``nets.dtype``): the imagined latents and actions are in it (each sampled action
is cast, ``agent.py:256, 275``: the GRU and the losses see the rounded action); the heads'
outputs, λ-returns, the return normaliser and every loss are float32.

Two-hot means (``TwoHotDist.mean``) are only ever used as stop-gradient constants; the parity
tests may inject the reference's values through ``means`` (deviation D22: its pairwise sum is
not reproducible bit for bit under another XLA build). Computing imagination from
stop-gradiented parameters changes no value or gradient: D33.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from agents.common import ReturnNormalizer, ReturnNormState, TwoHot
from agents.common.blocks import cast
from agents.dreamerv3.heads import bernoulli_mean
from agents.dreamerv3.networks import Networks
from agents.dreamerv3.returns import lambda_return, replay_return
from agents.dreamerv3.rssm import features
from agents.dreamerv3.world_model import Batch, Posterior

__all__ = ["MEAN_KEYS", "behavior_losses", "imagine"]

sg = jax.lax.stop_gradient

# Two-hot means that enter the losses (as constants), with their shapes.
MEAN_KEYS = {
    "imag_reward": "[N, H + 1] reward head on the imagined states (index 0 unused)",
    "imag_value": "[N, H + 1] critic on the imagined states",
    "imag_slow_value": "[N, H + 1] slow critic on the imagined states (regulariser target)",
    "replay_slow_value": "[B, T] slow critic on the posterior states (regulariser target)",
}


def imagine(
    nets: Networks,
    params: dict[str, Any],
    post: Posterior,
    gumbel: jax.Array,
    act_noise: jax.Array,
) -> dict[str, jax.Array]:
    """Imagined trajectories from all ``N = B T`` posterior states (b-major order).

    ``gumbel [H, N, S, C]`` (prior samples), ``act_noise [H + 1, N, A]`` (index 0: the start
    action). Returns ``deter [N, H+1, D]``, ``stoch [N, H+1, S, C]``, ``action [N, H+1, A]``,
    all stop-gradiented and in the compute dtype.
    """
    params = sg(params)
    n = post.deter.shape[0] * post.deter.shape[1]
    lat = {
        "deter": sg(post.deter.reshape(n, -1)),
        "stoch": sg(post.stoch.reshape(n, *post.stoch.shape[2:])),
    }
    actor = nets.actor.bind({"params": params["actor"]})
    rssm = nets.rssm.bind({"params": params["dyn"]})
    dist = lambda lat: actor(features(lat["deter"], lat["stoch"]))  # noqa: E731
    act = cast(dist(lat).sample(act_noise[0]), nets.dtype)

    def step(carry: tuple, x: tuple) -> tuple[tuple, tuple]:
        lat, act = carry
        g, noise = x
        lat, _ = rssm.imagine(lat, act, g)
        lat = {"deter": lat["deter"], "stoch": sg(lat["stoch"])}
        act = cast(dist(lat).sample(noise), nets.dtype)
        return (lat, act), (lat["deter"], lat["stoch"], act)

    _, (deter, stoch, acts) = jax.lax.scan(step, (lat, act), (gumbel, act_noise[1:]))
    first = lambda a, seq: jnp.concatenate([a[:, None], jnp.swapaxes(seq, 0, 1)], 1)  # noqa: E731
    return sg(
        {
            "deter": first(lat["deter"], deter),
            "stoch": first(lat["stoch"], stoch),
            "action": first(act, acts),
        }
    )


def _means(
    nets: Networks,
    params: dict,
    slow: dict,
    feat: jax.Array,
    replay_feat: jax.Array,
    critic_logits: jax.Array | None = None,
) -> dict[str, jax.Array]:
    """Our two-hot means (D22's exact symmetric decode), stop-gradiented. ``critic_logits``:
    the critic's on ``feat`` when the caller has them (the loss computes them once for
    both); computed here otherwise."""
    twohot = TwoHot.dreamerv3(nets.cfg.bins)
    head = lambda module, p, x: twohot.decode(module.apply({"params": p}, x))  # noqa: E731
    p = sg(params)
    if critic_logits is None:
        critic_logits = nets.critic.apply({"params": p["critic"]}, feat)
    return sg(
        {
            "imag_reward": head(nets.reward, p["rew"], feat),
            "imag_value": twohot.decode(critic_logits),
            "imag_slow_value": head(nets.critic, slow, feat),
            "replay_slow_value": head(nets.critic, slow, replay_feat),
        }
    )


def behavior_losses(
    nets: Networks,
    params: dict[str, Any],
    slow: dict[str, Any],
    retnorm: ReturnNormState,
    batch: Batch,
    post: Posterior,
    traj: dict[str, jax.Array],
    means: dict[str, jax.Array] | None = None,
) -> tuple[dict[str, jax.Array], ReturnNormState, dict[str, jax.Array]]:
    """Per-element ``actor [N, H]``, ``critic [N, H]``, ``replay_critic [B, T-1]`` losses
    (unscaled), the updated retnorm state and metrics. ``means`` overrides the two-hot means
    (keys :data:`MEAN_KEYS`)."""
    cfg = nets.cfg
    twohot = TwoHot.dreamerv3(cfg.bins)
    feat = features(traj["deter"], traj["stoch"])
    b, t = batch.reward.shape[0], batch.reward.shape[1] - 1
    replay_feat = post.feat
    critic_all = nets.critic.apply({"params": params["critic"]}, feat)  # [N, H + 1, K]
    if means is None:
        m = _means(nets, params, slow, feat, sg(replay_feat), sg(critic_all))
    else:
        m = sg(means)
    start_rew = batch.reward[:, 1:].reshape(-1)
    start_con = 1.0 - batch.is_terminal[:, 1:].reshape(-1).astype(jnp.float32)
    con_logit = nets.cont.apply({"params": sg(params["con"])}, feat)
    rew = jnp.concatenate([start_rew[:, None], m["imag_reward"][:, 1:]], 1)
    con = jnp.concatenate([start_con[:, None], bernoulli_mean(con_logit)[:, 1:]], 1)
    val = m["imag_value"]
    weight = sg(jnp.cumprod(con, 1))
    ret = sg(lambda_return(rew, con, val, cfg.lam))

    normalizer = ReturnNormalizer(cfg.retnorm_rate, cfg.retnorm_limit, cfg.retnorm_percentiles)
    retnorm = normalizer.update(retnorm, ret)
    _, rscale = normalizer.scale(retnorm)
    adv = sg((ret - val[:, :-1]) / rscale)

    policy = nets.actor.apply({"params": params["actor"]}, feat)
    logpi = policy.log_prob(traj["action"])[:, :-1]
    ent = policy.entropy()[:, :-1]
    actor_loss = weight[:, :-1] * -(logpi * adv + cfg.actent * ent)

    critic_logits = critic_all[:, :-1]
    critic_loss = weight[:, :-1] * (
        twohot.loss(critic_logits, ret)
        + cfg.slowreg * twohot.loss(critic_logits, m["imag_slow_value"][:, :-1])
    )

    boot = ret[:, 0].reshape(b, t)
    rets = sg(
        replay_return(
            batch.reward[:, 1:],
            batch.is_terminal[:, 1:],
            batch.is_last[:, 1:],
            boot,
            cfg.gamma,
            cfg.repval_lam,
        )
    )
    rc_logits = nets.critic.apply({"params": params["critic"]}, replay_feat)[:, :-1]
    live = 1.0 - batch.is_last[:, 1:-1].astype(jnp.float32)
    replay_loss = live * (
        twohot.loss(rc_logits, rets)
        + cfg.slowreg * twohot.loss(rc_logits, m["replay_slow_value"][:, :-1])
    )
    losses = {"actor": actor_loss, "critic": critic_loss, "replay_critic": replay_loss}
    metrics = _metrics(adv, rew, weight, val, ret, rets, ent, traj["action"], nets)
    return losses, retnorm, metrics


def _stats(x: jax.Array, name: str) -> dict[str, jax.Array]:
    """The reference's ``tensorstats`` (mean, std, mag, min, max) under ``name/``."""
    return {
        f"{name}/mean": jnp.mean(x),
        f"{name}/std": jnp.std(x),
        f"{name}/mag": jnp.mean(jnp.abs(x)),
        f"{name}/min": jnp.min(x),
        f"{name}/max": jnp.max(x),
    }


def _metrics(adv, rew, weight, val, ret, replay_ret, ent, acts, nets) -> dict[str, jax.Array]:
    out = {}
    for name, x in (
        ("adv", adv),
        ("rew", rew),
        ("weight", weight),
        ("val", val),
        ("ret", ret),
        ("replay_ret", replay_ret),
        ("ent/action", ent),
    ):
        out.update(_stats(x, name))
    act = jnp.argmax(acts, -1).astype(jnp.float32) if nets.discrete else cast(acts, jnp.float32)
    out.update(_stats(act, "act/action"))
    out["td_error"] = jnp.mean(jnp.abs(ret - val[:, :-1]))
    out["ret_rate"] = jnp.mean((jnp.abs(ret) > 1.0).astype(jnp.float32))
    return out
