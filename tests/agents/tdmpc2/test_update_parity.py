"""Parity of our jitted TD-MPC2 update with the real reference (5f6fade) on recorded fixtures.

Fixtures (``fixtures/tdmpc2_update*.npz``; generator and key layout in ``parity/README.md``):
consecutive real ``TDMPC2.update()`` calls at a tiny config (dropout 0) with every random draw
recorded. We map the reference's parameter names onto our tree
(:mod:`agents.tdmpc2.reference_names`) and inject the draws through :class:`UpdateNoise`.

* **Chained** (both fixtures): our jitted ``update`` runs the fixture's updates one after the
  other, each from *our* previous state, and every output is compared: loss terms, TD targets,
  gradient norms and clip coefficients, the stale policy-gradient norm, all parameters after
  each update (target Q included), the RunningScale and the step count. For the reference-init
  fixture also every forward intermediate and every pre-clip gradient.
* **Teacher-forced stages** (both fixtures): each stage of each update recomputed from the
  reference's own inputs to that stage (pre-update parameters, ``next_z``, ``zs``, TD targets,
  sampled actions, post-step Q, scale before): forward intermediates, loss terms, the pre-clip
  gradients of both clips and the clip norms. The perturbed fixture ("trained-like" weights
  with gain 4, Q values up to ~400) amplifies float32 rounding differences along a chain by
  its large input sensitivities, so its intermediates are compared stage by stage.

Tolerance: ``|ours - ref| <= 1e-5 + 1e-5 |ref|`` (float32, matmul precision highest; the
relative part matters only for the large decoded Q values, ~100, whose float32 ulp is ~1e-5).

One documented exception, checked exactly rather than tolerated: torch's CPU ``tanh`` (SLEEF,
1 ulp) and ours (:func:`agents.tdmpc2.world_model.tanh`, correctly rounded away from ties) can
round a near-tie value near +-1 differently by one ulp; the reference's squash term
``log(1 - tanh(u)^2 + 1e-6)`` turns that into up to ~1e-3 in ``log_pi``. Where a sampled action
differs from the reference's, it must differ by at most one ulp, and our ``log_pi`` with the
squash term recomputed at the reference's action must match within the tolerance
(:func:`close_log_probs`).
"""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.reference_names import from_reference, q_member_names, to_reference
from agents.tdmpc2.train_state import WM_KEYS, global_norm_sq, train_state_from_params
from agents.tdmpc2.update import UpdateNoise, model_losses, policy_loss, update
from agents.tdmpc2.world_model import WorldModel, count_params

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
PLAIN, PERTURBED = "tdmpc2_update.npz", "tdmpc2_update_perturbed.npz"
FILES = (PLAIN, PERTURBED)
ATOL = RTOL = 1e-5


# ----------------------------------------------------------------------------- helpers
def close(ours, ref, what):
    np.testing.assert_allclose(
        np.asarray(ours, np.float64),
        np.asarray(ref, np.float64),
        atol=ATOL,
        rtol=RTOL,
        err_msg=what,
    )


def _squash_np(a):
    """The reference's squash term per action dim, in float32 with torch's rounding."""
    a = np.asarray(a, np.float32)
    return np.log(np.maximum(np.float32(1) - a * a, 0) + np.float32(1e-6))


def close_log_probs(lp, a, ref_lp, ref_a, what):
    """``log_pi`` parity up to one-ulp tanh rounding differences (module docstring).

    Where a sampled action component differs from the reference's by exactly one ulp, our
    squash term for that component is replaced by the one at the reference's action; every
    other component is compared as computed (the actions themselves are compared elsewhere).
    """
    a, ref_a = np.asarray(a, np.float32), np.asarray(ref_a, np.float32)
    ulp = np.spacing(np.maximum(np.abs(a), np.abs(ref_a)))
    tie = (a != ref_a) & (np.abs(a.astype(np.float64) - ref_a) <= ulp)
    corr = np.where(tie, _squash_np(a) - _squash_np(ref_a), 0.0).sum(-1, keepdims=True)
    close(np.asarray(lp, np.float64) + corr, ref_lp, what)


def load(name):
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"fixture {path} not generated")
    with np.load(path) as d:
        return {k: d[k] for k in d.files}


def build(d):
    """Our config from the fixture's metadata; pins our defaults to the reference's."""
    m = {k[len("meta/cfg/") :]: d[k].item() for k in d if k.startswith("meta/cfg/")}
    assert not m["multitask"] and m["task_dim"] == 0
    cfg = TDMPC2Config(
        enc_dim=m["enc_dim"],
        num_enc_layers=m["num_enc_layers"],
        mlp_dim=m["mlp_dim"],
        latent_dim=m["latent_dim"],
        num_q=m["num_q"],
        num_bins=m["num_bins"],
        horizon=m["horizon"],
        batch_size=m["batch_size"],
        dropout=m["dropout"],
    ).resolve(m["episode_length"], m["action_dim"])
    # every other hyperparameter is the reference default: ours must equal it
    pinned = dict(
        simnorm_dim="simnorm_dim",
        rho="rho",
        consistency_coef="consistency_coef",
        reward_coef="reward_coef",
        value_coef="value_coef",
        learning_rate="lr",
        enc_lr_scale="enc_lr_scale",
        grad_clip_norm="grad_clip_norm",
        tau="tau",
        entropy_coef="entropy_coef",
        log_std_min="log_std_min",
        log_std_max="log_std_max",
        discount_denom="discount_denom",
        discount_min="discount_min",
        discount_max="discount_max",
        gamma="discount",
        vmax="vmax",
    )
    for ours, ref in pinned.items():
        assert getattr(cfg, ours) == m[ref], (ours, getattr(cfg, ours), m[ref])
    assert m["vmin"] == -m["vmax"] and m["bin_size"] == 2 * m["vmax"] / (m["num_bins"] - 1)
    assert cfg.pi_eps == 1e-5
    lrs = d["meta/optim_group_lrs"]
    np.testing.assert_allclose(lrs[0], cfg.learning_rate * cfg.enc_lr_scale, rtol=1e-12)
    np.testing.assert_allclose(lrs[1:], cfg.learning_rate, rtol=1e-12)
    return cfg, WorldModel(cfg, m["obs_dim"], m["action_dim"])


def ref_params(d, prefix):
    return {k[len(prefix) :]: d[k] for k in d if k.startswith(prefix)}


def inputs(d, k):
    p = f"u{k}/"
    batch = dict(
        obs=jnp.asarray(d[p + "batch/obs"]),
        action=jnp.asarray(d[p + "batch/action"]),
        reward=jnp.asarray(d[p + "batch/reward"][..., 0]),
    )
    noise = UpdateNoise(
        eps_td=jnp.asarray(d[p + "draw/td_pi_eps"]),
        pair_td=jnp.asarray(d[p + "draw/td_q_pair"], jnp.int32),
        eps_pi=jnp.asarray(d[p + "draw/pi_eps"]),
        pair_pi=jnp.asarray(d[p + "draw/pi_q_pair"], jnp.int32),
        dropout_keys=None,
    )
    return batch, noise


# ----------------------------------------------------------------------------- chained run
def run_chain(name):
    """Our jitted update chained over the fixture's batches and recorded draws."""
    d = load(name)
    cfg, wm = build(d)
    init = ref_params(d, "init/")
    assert set(init) == set(d["meta/param_names"]) and len(init) == 60
    assert list(d["meta/q_member_param_names"]) == q_member_names()
    params, target_qs = from_reference(init, wm)
    assert count_params(params) == int(d["meta/total_params"])
    state = train_state_from_params(wm, params, target_qs)
    f = jax.jit(update, static_argnums=(0, 1, 5))

    @jax.jit
    def forward(state, batch, noise):
        """Intermediates of the update from our pre-update state (dropout off)."""
        p = state.params
        next_z = wm.encode(p, batch["obs"][1:])
        td_mu, td_a, td_lp, td_ls = wm.pi(p, next_z, noise.eps_td)
        td_q = wm.twohot.decode(wm.q({"qs": state.target_qs}, next_z, td_a, members=noise.pair_td))
        obs0, act, rew = batch["obs"][0], batch["action"], batch["reward"]
        _, aux = model_losses(wm, p, obs0, act, rew, next_z, rew[..., None], None)
        zs = aux["zs"]
        pi_mu, pi_a, pi_lp, pi_ls = wm.pi(p, zs, noise.eps_pi)
        return dict(
            next_z=next_z,
            td_pi_mu=td_mu,
            td_pi_actions=td_a,
            td_pi_log_probs=td_lp,
            td_pi_log_std=td_ls,
            td_q1=td_q[0][..., None],
            td_q2=td_q[1][..., None],
            zs=zs,
            q_logits=wm.q(p, zs[:-1], act),
            reward_logits=wm.reward(p, zs[:-1], act),
            pi_mu=pi_mu,
            pi_actions=pi_a,
            pi_log_probs=pi_lp,
            pi_log_std=pi_ls,
        )

    @jax.jit
    def post_pi_q(state, zs, pi_actions, noise):
        """Decoded post-step online Q of the policy-loss pair ``[2, H+1, B, 1]``."""
        q = wm.twohot.decode(wm.q(state.params, zs, pi_actions, members=noise.pair_pi))
        return q[..., None]

    steps = []
    n_compiled = f._cache_size()  # jit caches are shared by every jax.jit(update) wrapper
    for k in range(int(d["meta/n_updates"])):
        batch, noise = inputs(d, k)
        fwd = forward(state, batch, noise)
        new_state, metrics = f(wm, cfg, state, batch, noise, True)
        fwd["pi_q"] = post_pi_q(new_state, fwd["zs"], fwd["pi_actions"], noise)
        steps.append(dict(pre=state, post=new_state, metrics=metrics, fwd=fwd))
        state = new_state
    assert f._cache_size() - n_compiled <= 1
    return dict(d=d, wm=wm, cfg=cfg, steps=steps, name=name)


@pytest.fixture(scope="module", params=FILES)
def chain(request):
    return run_chain(request.param)


def test_chained_outputs(chain):
    """Losses, TD targets, norms, clip coefficients, post-update state (both fixtures)."""
    d, wm, cfg = chain["d"], chain["wm"], chain["cfg"]
    for k, s in enumerate(chain["steps"]):
        m, p, post = s["metrics"], f"u{k}/", s["post"]
        for name in ("consistency_loss", "reward_loss", "value_loss", "pi_loss", "total_loss"):
            close(m[name], d[p + f"out/{name}"], f"{p}{name}")
            close(m[name], d[p + f"fwd/{name}"], f"{p}fwd {name}")
        close(m["pi_scale"], d[p + "out/pi_scale"], f"{p}pi_scale")
        if chain["name"] == PLAIN:  # perturbed: an intermediate, compared stage by stage
            close(m["td_target"], d[p + "fwd/td_targets"], f"{p}td_targets")
        # world-model clip: total norm incl. the stale policy gradient, its parts, coefficient
        gn = float(m["grad_norm"])
        close(gn, d[p + "out/grad_norm"], f"{p}grad_norm")
        close(gn, d[p + "clip_wm/total_norm"], f"{p}clip_wm total")
        wm_only = np.sqrt(float(global_norm_sq(m["grads"]["wm"])))
        close(wm_only, d[p + "clip_wm/norm_world_model_only"], f"{p}wm-only norm")
        close(np.sqrt(float(s["pre"].pi_grad_sq)), d[p + "clip_wm/norm_stale_pi"], f"{p}stale")
        assert bool(d[p + "clip_wm/has_stale_pi_grads"]) == (k > 0)
        close(min(1.0, cfg.grad_clip_norm / (gn + 1e-6)), d[p + "clip_wm/coef"], f"{p}wm coef")
        # policy clip
        pn = float(m["pi_grad_norm"])
        close(pn, d[p + "clip_pi/total_norm"], f"{p}clip_pi total")
        pi_coef = min(1.0, cfg.grad_clip_norm / (pn + 1e-6))
        close(pi_coef, d[p + "clip_pi/coef"], f"{p}pi coef")
        close(float(post.pi_grad_sq), (pn * pi_coef) ** 2, f"{p}pi_grad_sq")
        # every parameter after the update, target Q included; scale; step
        ours = to_reference(post.params, post.target_qs, wm)
        assert set(ours) == set(ref_params(d, p + "post/"))
        for n, v in ours.items():
            close(v, d[p + f"post/{n}"], f"{p}post/{n}")
        close(post.q_scale, d[p + "scale/after"][0], f"{p}scale after")
        close(s["pre"].q_scale, d[p + "scale/before"][0], f"{p}scale before")
        assert int(post.step) == int(d[p + "optim_step"])


@pytest.mark.parametrize("chain", [PLAIN], indirect=True)
def test_chained_intermediates_and_gradients(chain):
    """Reference-init fixture: every forward intermediate and pre-clip gradient, chained.
    (The perturbed fixture's intermediates are compared stage by stage, below.)"""
    d, wm = chain["d"], chain["wm"]
    for k, s in enumerate(chain["steps"]):
        p, fwd = f"u{k}/fwd/", s["fwd"]
        for name, v in fwd.items():
            if name == "pi_q":
                close(v[0], d[p + "pi_q1"], p + "pi_q1")
                close(v[1], d[p + "pi_q2"], p + "pi_q2")
                close((v[0] + v[1]) / 2, d[p + "pi_q_avg"], p + "pi_q_avg")
            elif name.endswith("log_probs"):
                a = name.replace("log_probs", "actions")
                close_log_probs(v, fwd[a], d[p + name], d[p + a], p + name)
            else:
                close(v, d[p + name], p + name)
        g = s["metrics"]["grads"]
        _check_grads(d, f"u{k}/", wm, g["wm"], g["pi"])


def _check_grads(d, p, wm, g_wm, g_pi):
    ours = to_reference({**g_wm, "pi": g_pi}, None, wm)
    for n, v in ours.items():
        tag = "grad_pi" if n.startswith("_pi.") else "grad_wm"
        close(v, d[p + f"{tag}/{n}"], f"{p}{tag}/{n}")
    if p != "u0/":  # the stale grads are the previous update's post-clip policy grads
        prev = f"u{int(p[1:-1]) - 1}/"
        for n in ours:
            if n.startswith("_pi."):
                want = d[prev + f"grad_pi/{n}"] * d[prev + "clip_pi/coef"]
                close(d[p + f"grad_wm/{n}"], want, f"{p}stale {n}")


# ----------------------------------------------------------------------------- stages
@pytest.mark.parametrize("name", FILES)
def test_teacher_forced_stages(name):
    """Every stage of every update from the reference's own inputs to that stage."""
    d = load(name)
    cfg, wm = build(d)

    @jax.jit
    def stages(pre, tq, q_post, scale, batch, noise, next_z, zs, td, td_a, pi_a):
        obs0, act, rew = batch["obs"][0], batch["action"], batch["reward"]
        wm_p = {k: pre[k] for k in WM_KEYS}

        def wm_obj(p):
            return model_losses(wm, p, obs0, act, rew, next_z, td, None)

        (total, aux), g_wm = jax.value_and_grad(wm_obj, has_aux=True)(wm_p)

        def pi_obj(pp):
            return policy_loss(wm, pp, q_post, zs, noise.eps_pi, noise.pair_pi, None, scale)

        (pi_loss, pi_aux), g_pi = jax.value_and_grad(pi_obj, has_aux=True)(pre["pi"])
        td_mu, td_act, td_lp, td_ls = wm.pi(pre, next_z, noise.eps_td)
        pi_mu, pi_act, pi_lp, pi_ls = wm.pi(pre, zs, noise.eps_pi)
        td_q = wm.twohot.decode(wm.q({"qs": tq}, next_z, td_a, members=noise.pair_td))
        pi_q = wm.twohot.decode(wm.q({"qs": q_post}, zs, pi_a, members=noise.pair_pi))
        fwd = dict(
            next_z=wm.encode(pre, batch["obs"][1:]),
            zs=aux["zs"],
            q_logits=wm.q(pre, zs[:-1], act),
            reward_logits=wm.reward(pre, zs[:-1], act),
            td_pi_mu=td_mu,
            td_pi_log_std=td_ls,
            td_pi_actions=td_act,
            td_q1=td_q[0][..., None],
            td_q2=td_q[1][..., None],
            pi_mu=pi_mu,
            pi_log_std=pi_ls,
            pi_actions=pi_act,
            pi_q1=pi_q[0][..., None],
            pi_q2=pi_q[1][..., None],
            pi_q_avg=((pi_q[0] + pi_q[1]) / 2)[..., None],
            total_loss=total,
            consistency_loss=aux["consistency_loss"],
            reward_loss=aux["reward_loss"],
            value_loss=aux["value_loss"],
            pi_loss=pi_loss,
        )
        # td_targets - reward = gamma * min(q1, q2): compared without the reward, whose
        # cancellation with the Q term would turn a Q rounding difference into a large
        # relative one
        fwd["td_bootstrap"] = cfg.gamma * jnp.minimum(fwd["td_q1"], fwd["td_q2"])
        logp = dict(td_pi=(td_lp, td_act), pi=(pi_lp, pi_act))
        return fwd, logp, g_wm, g_pi, pi_aux["q_scale"]

    for k in range(int(d["meta/n_updates"])):
        p = f"u{k}/"
        pre, tq = from_reference(ref_params(d, "init/" if k == 0 else f"u{k - 1}/post/"), wm)
        post, _ = from_reference(ref_params(d, p + "post/"), wm)
        batch, noise = inputs(d, k)
        r = {n: jnp.asarray(d[p + f"fwd/{n}"]) for n in ("next_z", "zs", "td_targets")}
        fwd, logp, g_wm, g_pi, scale = stages(
            pre,
            tq,
            post["qs"],  # the policy loss sees the post-step online Q (EMA touches the target)
            jnp.asarray(d[p + "scale/before"][0]),
            batch,
            noise,
            r["next_z"],
            r["zs"],
            r["td_targets"],
            jnp.asarray(d[p + "fwd/td_pi_actions"]),
            jnp.asarray(d[p + "fwd/pi_actions"]),
        )
        boot = fwd.pop("td_bootstrap")
        close(boot, d[p + "fwd/td_targets"] - d[p + "batch/reward"], f"{p}td bootstrap")
        for n, v in fwd.items():
            close(v, d[p + f"fwd/{n}"], f"{p}fwd/{n} (teacher-forced)")
        for tag, (lp, a) in logp.items():
            close_log_probs(
                lp, a, d[p + f"fwd/{tag}_log_probs"], d[p + f"fwd/{tag}_actions"], p + tag
            )
        close(fwd["pi_loss"], d[p + "out/pi_loss"], f"{p}pi_loss")
        close(scale, d[p + "scale/after"][0], f"{p}scale")
        _check_grads(d, p, wm, g_wm, g_pi)
        stale_sq = float(d[p + "clip_wm/norm_stale_pi"]) ** 2
        total = np.sqrt(float(global_norm_sq(g_wm)) + stale_sq)
        close(total, d[p + "clip_wm/total_norm"], f"{p}clip_wm total (teacher-forced)")
        close(np.sqrt(float(global_norm_sq(g_pi))), d[p + "clip_pi/total_norm"], f"{p}clip_pi")


@pytest.mark.parametrize("chain", [PERTURBED], indirect=True)
def test_fixture_exercises_the_clips(chain):
    """The perturbed chain is the one where both clips bind and the scale leaves its floor;
    our chained run reproduces that (README)."""
    d, s = chain["d"], chain["steps"]
    assert float(d["u0/clip_pi/coef"]) < 1.0 and float(d["u1/clip_wm/coef"]) < 1.0
    assert float(d["u1/clip_wm/norm_world_model_only"]) < 20.0
    assert float(s[0]["metrics"]["pi_grad_norm"]) > 20.0
    assert np.sqrt(float(global_norm_sq(s[1]["metrics"]["grads"]["wm"]))) < 20.0
    assert float(s[1]["metrics"]["grad_norm"]) > 20.0
    assert float(s[-1]["post"].q_scale) > 1.0
