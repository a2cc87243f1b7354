"""TD-MPC2 update: gradient routing, the stale-policy-gradient clip, target EMA, call order,
optimizer groups, dropout passes, noise draws and a single compilation (docs/design.md §7.2)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.common.normalizers import RunningScale
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.train_state import WM_KEYS, global_norm_sq, init_train_state
from agents.tdmpc2.update import (
    draw_update_noise,
    model_losses,
    policy_loss,
    td_target,
    update,
)
from agents.tdmpc2.world_model import WorldModel

# Tiny, pairwise-distinct sizes; every other hyperparameter at its reference default.
OBS, A, B = 7, 3, 5
CFG = TDMPC2Config(enc_dim=12, mlp_dim=20, latent_dim=16, num_q=3, num_bins=11, batch_size=B)
N_UPDATES = 3


def perturb(tree, key, scale):
    leaves, td = jax.tree_util.tree_flatten(tree)
    keys = jax.random.split(key, len(leaves))
    new = [
        x + scale * jax.random.normal(k, x.shape, x.dtype)
        for k, x in zip(keys, leaves, strict=True)
    ]
    return jax.tree_util.tree_unflatten(td, new)


def make_batch(key):
    k1, k2, k3 = jax.random.split(key, 3)
    H = CFG.horizon
    return dict(
        obs=jax.random.normal(k1, (H + 1, B, OBS)),
        action=jax.random.uniform(k2, (H, B, A), minval=-1, maxval=1),
        reward=3.0 * jax.random.normal(k3, (H, B)),
    )


@pytest.fixture(scope="module")
def run():
    """Three chained jitted updates from a perturbed ("trained-like") state: the zero last
    layers are made non-zero so that every path carries gradient; with the default clip 20
    the policy clip binds in update 0 and (through the stale policy gradient) the
    world-model clip binds in update 1."""
    cfg = CFG.resolve(500, A)
    wm = WorldModel(cfg, OBS, A)

    @jax.jit
    def init(key):
        st = init_train_state(wm, key)
        params = perturb(st.params, jax.random.key(9), 0.5)
        return st.replace(params=params, target_qs=perturb(params["qs"], jax.random.key(8), 0.05))

    states = [init(jax.random.key(0))]
    batches = [make_batch(jax.random.key(100 + k)) for k in range(N_UPDATES)]
    noises = [draw_update_noise(jax.random.key(200 + k), cfg, A) for k in range(N_UPDATES)]
    f = jax.jit(update, static_argnums=(0, 1, 5))
    metrics = []
    n_compiled = f._cache_size()  # jit caches are shared by every jax.jit(update) wrapper
    for k in range(N_UPDATES):
        st, m = f(wm, cfg, states[-1], batches[k], noises[k], True)
        states.append(st)
        metrics.append(m)
    return dict(
        wm=wm,
        cfg=cfg,
        new_compilations=f._cache_size() - n_compiled,
        states=states,
        batches=batches,
        noises=noises,
        metrics=metrics,
    )


def _nz(tree) -> list[bool]:
    return [bool(np.any(np.asarray(x) != 0)) for x in jax.tree_util.tree_leaves(tree)]


def reached(tree) -> bool:
    """Every leaf has a non-zero gradient entry."""
    return all(_nz(tree))


def untouched(tree) -> bool:
    """Every leaf's gradient is exactly zero."""
    return not any(_nz(tree))


# ----------------------------------------------------------------------------- compile
def test_jit_once_and_finite(run):
    assert run["new_compilations"] <= 1
    for m in run["metrics"]:
        for k, v in m.items():
            if k not in ("grads", "td_target"):
                assert np.isfinite(float(v)), k
    assert int(run["states"][-1].step) == N_UPDATES


# ----------------------------------------------------------------------------- routing
def test_gradient_routing(run):
    """consistency -> encoder, dynamics; reward -> + reward; value -> encoder, dynamics, qs;
    policy loss -> pi only; target Q and (in the world-model loss) pi never."""
    wm, st, batch, noise = run["wm"], run["states"][0], run["batches"][0], run["noises"][0]

    @jax.jit
    def grads():
        def terms(params, target_qs):
            next_z = wm.encode(params, batch["obs"][1:])
            td = td_target(
                wm,
                params,
                target_qs,
                next_z,
                batch["reward"],
                noise.eps_td,
                noise.pair_td,
                noise.dropout_keys[0],
            )
            total, aux = model_losses(
                wm,
                params,
                batch["obs"][0],
                batch["action"],
                batch["reward"],
                next_z,
                td,
                noise.dropout_keys[1],
            )
            return total, aux

        out = {}
        for name in ("consistency_loss", "reward_loss", "value_loss"):
            out[name] = jax.grad(lambda p, t, n=name: terms(p, t)[1][n], argnums=(0, 1))(
                st.params, st.target_qs
            )
        out["total"] = jax.grad(lambda p, t: terms(p, t)[0], argnums=(0, 1))(
            st.params, st.target_qs
        )
        zs = terms(st.params, st.target_qs)[1]["zs"]

        def pl(pi, qs, zs):
            return policy_loss(
                wm, pi, qs, zs, noise.eps_pi, noise.pair_pi, noise.dropout_keys[2], st.q_scale
            )[0]

        out["pi"] = jax.grad(pl, argnums=(0, 1, 2))(st.params["pi"], st.params["qs"], zs)
        return out

    g = grads()
    routes = {
        "consistency_loss": {"encoder", "dynamics"},
        "reward_loss": {"encoder", "dynamics", "reward"},
        "value_loss": {"encoder", "dynamics", "qs"},
        "total": {"encoder", "dynamics", "reward", "qs"},
    }
    for term, mods in routes.items():
        gp, gt = g[term]
        for mod in ("encoder", "dynamics", "reward", "qs", "pi"):
            if mod in mods:
                assert reached(gp[mod]), (term, mod)
            else:
                assert untouched(gp[mod]), (term, mod)
        assert untouched(gt), term  # target Q never receives gradient
    g_pi, g_q, g_zs = g["pi"]
    assert reached(g_pi) and untouched(g_q) and untouched(g_zs)
    # the update's own gradients: world-model tree without pi, policy tree
    m = run["metrics"][0]["grads"]
    assert set(m["wm"]) == set(WM_KEYS) and reached(m["wm"]) and reached(m["pi"])


# ----------------------------------------------------------------------------- clip
def test_stale_policy_gradient_enters_world_model_clip(run):
    """tdmpc2@5f6fade tdmpc2/tdmpc2.py:184,271: the world-model clip norm includes the previous
    update's post-clip policy gradient; here it makes that clip bind although |g_wm| < 20."""
    s, m = run["states"], run["metrics"]
    max_norm = run["cfg"].grad_clip_norm
    g0_wm = float(global_norm_sq(m[0]["grads"]["wm"]))
    np.testing.assert_allclose(float(m[0]["grad_norm"]) ** 2, g0_wm, rtol=1e-5)
    assert float(s[0].pi_grad_sq) == 0.0
    # the policy clip binds in update 0: post-clip norm = max_norm * n / (n + 1e-6)
    pn = float(m[0]["pi_grad_norm"])
    assert pn > max_norm
    np.testing.assert_allclose(float(s[1].pi_grad_sq), max_norm**2, rtol=1e-5)
    # update 1: grad_norm^2 = |g_wm|^2 + |stale pi|^2, and the stale part makes the clip bind
    g1_wm = float(global_norm_sq(m[1]["grads"]["wm"]))
    gn1 = float(m[1]["grad_norm"])
    np.testing.assert_allclose(gn1**2, g1_wm + float(s[1].pi_grad_sq), rtol=1e-5)
    assert np.sqrt(g1_wm) < max_norm < gn1
    # the applied coefficient, read from Adam's first moment of the non-encoder group:
    # mu_1 = b1 mu_0 + (1 - b1) g_1 coef_1 with mu_0 = (1 - b1) g_0 coef_0
    coef = [min(1.0, max_norm / (float(m[k]["grad_norm"]) + 1e-6)) for k in (0, 1)]
    assert coef[0] == 1.0 and coef[1] < 0.999
    mu = s[2].wm_opt_state.inner_states["model"].inner_state[0].mu["dynamics"]["out"]["kernel"]
    g0 = np.asarray(m[0]["grads"]["wm"]["dynamics"]["out"]["kernel"])
    g1 = np.asarray(m[1]["grads"]["wm"]["dynamics"]["out"]["kernel"])
    want = 0.9 * (0.1 * g0 * coef[0]) + 0.1 * g1 * coef[1]
    np.testing.assert_allclose(mu, want, rtol=1e-5, atol=1e-9)


# ----------------------------------------------------------------------------- EMA, order
def test_target_ema(run):
    s = run["states"]
    for k in range(N_UPDATES):
        for t0, q1, t1 in zip(
            jax.tree_util.tree_leaves(s[k].target_qs),
            jax.tree_util.tree_leaves(s[k + 1].params["qs"]),
            jax.tree_util.tree_leaves(s[k + 1].target_qs),
            strict=True,
        ):
            t0, q1 = np.asarray(t0), np.asarray(q1)
            want = t0 + np.float32(0.01) * (q1 - t0)
            np.testing.assert_allclose(t1, want, rtol=1e-6, atol=1e-8)


def test_update_order_and_freshness(run):
    """TD target from pre-step params; policy loss on pre-step latents with the post-step Q;
    RunningScale updated before dividing (tdmpc2@5f6fade tdmpc2/tdmpc2.py:232-233,188-189)."""
    wm, s0, s1 = run["wm"], run["states"][0], run["states"][1]
    batch, noise, m = run["batches"][0], run["noises"][0], run["metrics"][0]
    keys = noise.dropout_keys

    @jax.jit
    def recompute():
        def td_of(st):
            next_z = wm.encode(st.params, batch["obs"][1:])
            args = (batch["reward"], noise.eps_td, noise.pair_td, keys[0])
            return next_z, td_target(wm, st.params, st.target_qs, next_z, *args)

        next_z, td = td_of(s0)
        _, td_post = td_of(s1)
        obs0, act, rew = batch["obs"][0], batch["action"], batch["reward"]
        _, aux = model_losses(wm, s0.params, obs0, act, rew, next_z, td, keys[1])

        def pl(qs):
            args = (aux["zs"], noise.eps_pi, noise.pair_pi, keys[2], s0.q_scale)
            return policy_loss(wm, s0.params["pi"], qs, *args)

        post, post_aux = pl(s1.params["qs"])
        pre, _ = pl(s0.params["qs"])
        _, a, _, _ = wm.pi(s0.params, aux["zs"], noise.eps_pi)
        q = wm.q_value(s1.params, aux["zs"], a, noise.pair_pi, keys[2], reduce="avg")
        scale = RunningScale(tau=0.01).update(s0.q_scale, q[0])
        return td, td_post, aux, post, post_aux, pre, scale

    td, td_post, aux, post, post_aux, pre, scale = recompute()
    np.testing.assert_allclose(m["td_target"], td, rtol=1e-5, atol=1e-5)
    assert np.max(np.abs(np.asarray(td_post) - np.asarray(td))) > 1e-2
    for name in ("consistency_loss", "reward_loss", "value_loss"):
        np.testing.assert_allclose(m[name], aux[name], rtol=1e-5)
    np.testing.assert_allclose(m["pi_loss"], post, rtol=1e-5)
    assert abs(float(pre) - float(post)) > 1e-3 * abs(float(post))
    # the scale recomputed in other programs agrees to float32 rounding of the Q chain, like
    # the losses above (2.5e-6 seen when XLA fuses the programs differently, at -O0)
    np.testing.assert_allclose(s1.q_scale, post_aux["q_scale"], rtol=1e-5)
    np.testing.assert_allclose(m["pi_scale"], s1.q_scale, rtol=0)
    assert float(s1.q_scale) > 1.0  # above the floor: the scale really divides
    # the policy-loss Q pass: online post-step pair mean, q[0] feeds the scale
    np.testing.assert_allclose(s1.q_scale, scale, rtol=1e-5)


def test_optimizer_groups(run):
    """First Adam step moves each parameter by ~lr: encoder lr 3e-4 * 0.3, others 3e-4."""
    s0, s1 = run["states"][0], run["states"][1]
    lr = run["cfg"].learning_rate
    for mod, want in (("encoder", lr * 0.3), ("dynamics", lr), ("qs", lr), ("pi", lr)):
        d = [
            np.max(np.abs(np.asarray(b) - np.asarray(a)))
            for a, b in zip(
                jax.tree_util.tree_leaves(s0.params[mod]),
                jax.tree_util.tree_leaves(s1.params[mod]),
                strict=True,
            )
        ]
        np.testing.assert_allclose(max(d), want, rtol=2e-3)


# ----------------------------------------------------------------------------- dropout
def test_dropout_active_in_every_q_pass(run):
    """With dropout > 0 each of the three Q passes (target, value, policy) uses its key."""
    wm, st, batch, noise = run["wm"], run["states"][0], run["batches"][0], run["noises"][0]
    assert wm.cfg.dropout == 0.01

    @jax.jit
    def on_off():
        next_z = wm.encode(st.params, batch["obs"][1:])
        args = (wm, st.params, st.target_qs, next_z, batch["reward"], noise.eps_td, noise.pair_td)
        td_on, td_off = td_target(*args, noise.dropout_keys[0]), td_target(*args, None)
        margs = (wm, st.params, batch["obs"][0], batch["action"], batch["reward"], next_z, td_off)
        v_on = model_losses(*margs, noise.dropout_keys[1])[1]["value_loss"]
        v_off, aux = model_losses(*margs, None)
        pargs = (wm, st.params["pi"], st.params["qs"], aux["zs"], noise.eps_pi, noise.pair_pi)
        p_on = policy_loss(*pargs, noise.dropout_keys[2], st.q_scale)[0]
        p_off = policy_loss(*pargs, None, st.q_scale)[0]
        return (td_on, td_off), (v_on, aux["value_loss"]), (p_on, p_off)

    for on, off in on_off():
        assert not np.allclose(on, off, rtol=1e-6, atol=0), (on, off)


# ----------------------------------------------------------------------------- noise
def test_draw_update_noise():
    cfg = CFG.resolve(500, A)
    n = draw_update_noise(jax.random.key(0), cfg, A)
    assert n.eps_td.shape == (cfg.horizon, B, A) and n.eps_pi.shape == (cfg.horizon + 1, B, A)
    assert n.pair_td.dtype == jnp.int32 and n.pair_td.shape == (2,)
    assert n.dropout_keys.shape == (3,)
    pairs = jax.vmap(lambda k: draw_update_noise(k, cfg, A).pair_td)(
        jax.random.split(jax.random.key(1), 3000)
    )
    pairs = np.asarray(pairs)
    assert np.all(pairs[:, 0] != pairs[:, 1]) and pairs.min() == 0 and pairs.max() == 2
    # uniform over the 6 ordered pairs of distinct members
    counts = np.bincount(pairs[:, 0] * 3 + pairs[:, 1], minlength=9)[[1, 2, 3, 5, 6, 7]]
    assert np.all(np.abs(counts - 500) < 100), counts
