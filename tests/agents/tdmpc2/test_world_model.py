"""TD-MPC2 world model: parameter counts, init, forward oracles, SimNorm, policy log-prob,
Q-ensemble member selection and dropout (docs/design.md §7.2, §13)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.reference_names import from_reference, to_reference
from agents.tdmpc2.world_model import WorldModel, count_params, rounded, simnorm, tanh

# Tiny, pairwise-distinct sizes: OBS 5, A 3, enc 12, mlp 20, latent 16, num_q 4, bins 11.
TINY = dict(enc_dim=12, mlp_dim=20, latent_dim=16, num_q=4, num_bins=11, dropout=0.2)
OBS, A, B = 5, 3, 6


def make_wm(**kw) -> WorldModel:
    cfg = TDMPC2Config(**{**TINY, **kw}).resolve(500, A)
    return WorldModel(cfg, OBS, A)


@pytest.fixture(scope="module")
def wm():
    return make_wm()


def randomize(params, key, scale=0.3):
    """Params with every leaf random (so that no zero last layer hides a path)."""
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(key, len(leaves))
    new = [
        scale * jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)
    ]
    return jax.tree_util.tree_unflatten(tree, new)


@pytest.fixture(scope="module")
def rand_params(wm):
    return jax.jit(lambda k: randomize(wm.init(k), jax.random.key(1)))(jax.random.key(0))


# ----------------------------------------------------------------------------- counts
@pytest.mark.parametrize(
    "size,total,per_module",
    [
        (
            5,
            4_960_618,
            dict(encoder=139_520, dynamics=794_112, reward=582_245, pi=533_516, qs=2_911_225),
        ),
        (1, 1_214_651, None),
    ],
)
def test_param_count_walker(size, total, per_module):
    """The reference's own counts (fixtures/param_counts.json): walker dims OBS=24, A=6, target Q
    excluded."""
    cfg = TDMPC2Config(model_size=size).resolve(500, 6)
    shapes = jax.eval_shape(WorldModel(cfg, 24, 6).init, jax.random.key(0))
    assert count_params(shapes) == total
    if per_module is not None:
        assert {k: count_params(v) for k, v in shapes.items()} == per_module


def test_param_tree_layout(wm):
    shapes = jax.eval_shape(wm.init, jax.random.key(0))
    c = wm.cfg
    assert set(shapes) == {"encoder", "dynamics", "reward", "qs", "pi"}
    assert shapes["encoder"]["hidden"]["dense_0"]["kernel"].shape == (OBS, c.enc_dim)
    assert shapes["encoder"]["out"]["kernel"].shape == (c.enc_dim, c.latent_dim)
    assert "out_norm" in shapes["encoder"] and "out_norm" in shapes["dynamics"]
    assert "out_norm" not in shapes["reward"] and "out_norm" not in shapes["pi"]
    assert shapes["dynamics"]["hidden"]["dense_0"]["kernel"].shape == (c.latent_dim + A, c.mlp_dim)
    assert shapes["qs"]["hidden"]["dense_0"]["kernel"].shape == (
        c.num_q,
        c.latent_dim + A,
        c.mlp_dim,
    )
    assert shapes["qs"]["out"]["kernel"].shape == (c.num_q, c.mlp_dim, c.num_bins)
    assert shapes["pi"]["out"]["kernel"].shape == (c.mlp_dim, 2 * A)
    # num_enc_layers = 3 -> 2 hidden encoder layers; 1 -> still 1 (max(n - 1, 1))
    for n, hidden in ((3, 2), (1, 1)):
        s = jax.eval_shape(make_wm(num_enc_layers=n).init, jax.random.key(0))
        assert len([k for k in s["encoder"]["hidden"] if k.startswith("dense")]) == hidden


# ----------------------------------------------------------------------------- init
def test_init_statistics():
    """N(0, 0.02) untruncated kernels, zero biases, LN (1, 0), zero reward/Q last kernels."""
    wm = make_wm(enc_dim=64, mlp_dim=128, latent_dim=64, num_q=3, num_bins=101)
    params = jax.jit(wm.init)(jax.random.key(3))
    kernels = []
    for path, x in jax.tree_util.tree_leaves_with_path(params):
        names = [getattr(k, "key", None) for k in path]
        x = np.asarray(x)
        if names[-1] == "bias":
            assert np.all(x == 0), names
        elif names[-1] == "scale":
            assert np.all(x == 1), names
        elif names[0] in ("reward", "qs") and "out" in names:
            assert np.all(x == 0), names
        else:
            kernels.append(x.ravel())
    k = np.concatenate(kernels)
    assert k.size > 100_000
    assert abs(k.std() - 0.02) < 2e-4 and abs(k.mean()) < 1e-4
    # untruncated: a +-2 sigma truncated normal would never exceed 0.04
    assert np.abs(k).max() > 4 * 0.02
    # Q members are initialised independently
    q0 = np.asarray(params["qs"]["hidden"]["dense_0"]["kernel"])
    assert not np.array_equal(q0[0], q0[1])
    # zero last layers -> uniform logits -> decoded reward and Q exactly 0
    z = wm.encode(params, jax.random.normal(jax.random.key(4), (B, OBS)))
    a = jnp.tanh(jax.random.normal(jax.random.key(5), (B, A)))
    assert np.all(np.asarray(wm.twohot.decode(wm.reward(params, z, a))) == 0.0)
    assert np.all(np.asarray(wm.twohot.decode(wm.q(params, z, a))) == 0.0)
    pair = jnp.array([1, 0])
    for red in ("min", "avg"):
        assert np.all(np.asarray(wm.q_value(params, z, a, pair, reduce=red)) == 0.0)


# ----------------------------------------------------------------------------- forward oracle
def _np_mish(x):
    return x * np.tanh(np.log1p(np.exp(x)))


def _np_ln(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def _np_mlp(sd, prefix, hidden, x, simnorm_dim=0, member=None):
    """NumPy (float64) forward of a reference ``mlp()`` from reference-named arrays."""

    def get(name):
        v = np.asarray(sd[prefix + name], np.float64)
        return v[member] if member is not None else v

    for i in range(hidden):
        x = _np_mish(_np_ln(x @ get(f"{i}.weight").T + get(f"{i}.bias"), *_ln(get, i)))
    x = x @ get(f"{hidden}.weight").T + get(f"{hidden}.bias")
    if simnorm_dim:
        x = _np_ln(x, *_ln(get, hidden))
        g = x.reshape(*x.shape[:-1], -1, simnorm_dim)
        g = np.exp(g - g.max(-1, keepdims=True))
        x = (g / g.sum(-1, keepdims=True)).reshape(x.shape)
    return x


def _ln(get, i):
    return get(f"{i}.ln.weight"), get(f"{i}.ln.bias")


def _q_member_sd(sd, num_q):
    """``_Qs.params.{j}`` stacked arrays -> per-layer names with a member axis."""
    names = ["0.weight", "0.bias", "0.ln.weight", "0.ln.bias"]
    names += ["1.weight", "1.bias", "1.ln.weight", "1.ln.bias", "2.weight", "2.bias"]
    return {"q." + n: sd[f"_Qs.params.{j}"] for j, n in enumerate(names)}


def test_forward_matches_numpy_oracle(wm, rand_params):
    """Every head against a float64 NumPy port of the reference ``mlp()`` (Linear -> LN ->
    Mish, SimNorm heads end Linear -> LN -> SimNorm), via the reference parameter names."""
    sd = to_reference(rand_params, None, wm)
    obs = np.asarray(jax.random.normal(jax.random.key(2), (2, B, OBS)))
    a = np.asarray(jnp.tanh(jax.random.normal(jax.random.key(3), (2, B, A))))
    z = wm.encode(rand_params, obs)
    np.testing.assert_allclose(z, _np_mlp(sd, "_encoder.state.", 1, obs, 8), atol=1e-5)
    zn = np.asarray(z, np.float64)
    za = np.concatenate([zn, a], -1)
    np.testing.assert_allclose(
        wm.next(rand_params, z, a), _np_mlp(sd, "_dynamics.", 2, za, 8), atol=1e-5
    )
    np.testing.assert_allclose(
        wm.reward(rand_params, z, a), _np_mlp(sd, "_reward.", 2, za), atol=1e-5
    )
    qsd = _q_member_sd(sd, wm.cfg.num_q)
    want = np.stack([_np_mlp(qsd, "q.", 2, za, member=m) for m in range(wm.cfg.num_q)])
    np.testing.assert_allclose(wm.q(rand_params, z, a), want, atol=1e-5)
    # the name map round-trips
    p2, _ = from_reference(to_reference(rand_params, rand_params["qs"], wm), wm)
    leaves = jax.tree_util.tree_leaves(rand_params)
    for x, y in zip(leaves, jax.tree_util.tree_leaves(p2), strict=True):
        assert np.array_equal(np.asarray(x), y)


def test_simnorm_groups_sum_to_one(wm, rand_params):
    x = 5.0 * jax.random.normal(jax.random.key(0), (3, 4, 32))
    y = np.asarray(simnorm(x, 8)).reshape(3, 4, 4, 8)
    np.testing.assert_allclose(y.sum(-1), 1.0, atol=1e-6)
    assert np.all(y >= 0)
    z = np.asarray(wm.encode(rand_params, jax.random.normal(jax.random.key(1), (B, OBS))))
    np.testing.assert_allclose(z.reshape(B, -1, 8).sum(-1), 1.0, atol=1e-6)
    with pytest.raises(ValueError):
        simnorm(jnp.ones((2, 12)), 8)


# ----------------------------------------------------------------------------- policy
def test_pi_matches_numpy_oracle(wm, rand_params):
    """tdmpc2@5f6fade tdmpc2/common/math.py:13-46: log_std tanh map, log_pi = (sum(-eps^2/2 -
    log_std) - ln(2 pi)/2) * A minus the unscaled squash correction; returns (tanh mu, tanh(mu + eps
    sigma), log_pi, log_std)."""
    c = wm.cfg
    z = wm.encode(rand_params, jax.random.normal(jax.random.key(0), (2, B, OBS)))
    eps = jax.random.normal(jax.random.key(1), (2, B, A))
    mu, act, log_pi, log_std = wm.pi(rand_params, z, eps)
    out = np.asarray(wm.pi_module.apply({"params": rand_params["pi"]}, z), np.float64)
    mu_raw, raw = out[..., :A], out[..., A:]
    e = np.asarray(eps, np.float64)
    ls = c.log_std_min + 0.5 * (c.log_std_max - c.log_std_min) * (np.tanh(raw) + 1)
    lp = ((-0.5 * e**2 - ls).sum(-1, keepdims=True) - 0.5 * math.log(2 * math.pi)) * A
    u = np.tanh(mu_raw + e * np.exp(ls))
    lp = lp - np.log(np.maximum(1 - u**2, 0) + 1e-6).sum(-1, keepdims=True)
    assert mu.shape == act.shape == log_std.shape == (2, B, A) and log_pi.shape == (2, B, 1)
    np.testing.assert_allclose(mu, np.tanh(mu_raw), atol=1e-6)
    np.testing.assert_allclose(act, u, atol=1e-6)
    np.testing.assert_allclose(log_std, ls, atol=1e-5)
    np.testing.assert_allclose(log_pi, lp, rtol=1e-5, atol=1e-4)
    assert np.all(np.asarray(log_std) >= c.log_std_min) and np.all(np.asarray(log_std) <= 2.0)


# ----------------------------------------------------------------------------- Q ensemble
def test_q_members_and_dropout(wm, rand_params):
    z = wm.encode(rand_params, jax.random.normal(jax.random.key(0), (B, OBS)))
    a = jnp.tanh(jax.random.normal(jax.random.key(1), (B, A)))
    full = np.asarray(wm.q(rand_params, z, a))
    assert full.shape == (wm.cfg.num_q, B, wm.cfg.num_bins)
    members = jnp.array([3, 1])
    np.testing.assert_array_equal(wm.q(rand_params, z, a, members=members), full[[3, 1]])
    # no key -> deterministic and equal to the full evaluation
    np.testing.assert_array_equal(wm.q(rand_params, z, a), full)
    k1, k2 = jax.random.key(10), jax.random.key(11)
    d1 = np.asarray(wm.q(rand_params, z, a, dropout_key=k1))
    d1b = np.asarray(wm.q(rand_params, z, a, dropout_key=k1))
    d2 = np.asarray(wm.q(rand_params, z, a, dropout_key=k2))
    np.testing.assert_array_equal(d1, d1b)
    assert not np.allclose(d1, full) and not np.allclose(d1, d2)
    # every member is perturbed, each with its own mask
    for m in range(wm.cfg.num_q):
        assert not np.allclose(d1[m], full[m])
    # a subset with the same key is the matching slice of the all-members evaluation
    np.testing.assert_array_equal(
        wm.q(rand_params, z, a, members=members, dropout_key=k1), d1[[3, 1]]
    )
    # target trees are accepted as {"qs": ...}
    np.testing.assert_array_equal(wm.q({"qs": rand_params["qs"]}, z, a), full)
    # dropout = 0 -> a key changes nothing
    wm0 = make_wm(dropout=0.0)
    np.testing.assert_array_equal(wm0.q(rand_params, z, a, dropout_key=k1), full)


def test_dropout_before_layernorm(wm, rand_params):
    """Dropout acts on the first Linear's output, before its LayerNorm (``layers.py:50-65``):
    the dropped first-layer pre-activations are exactly those zeroed, kept ones scaled by
    1/(1-p), and the rest of the member is the deterministic forward of that tensor."""
    z = wm.encode(rand_params, jax.random.normal(jax.random.key(0), (B, OBS)))
    a = jnp.tanh(jax.random.normal(jax.random.key(1), (B, A)))
    x = jnp.concatenate([z, a], -1)
    key = jax.random.key(5)
    m = 2
    pm = jax.tree_util.tree_map(lambda p: p[m], rand_params["qs"])
    _, inter = wm.q_module.apply(
        {"params": pm},
        x,
        deterministic=False,
        rngs={"dropout": jax.random.fold_in(key, m)},
        capture_intermediates=True,
    )
    h = inter["intermediates"]["hidden"]
    dense = np.asarray(h["dense_0"]["__call__"][0])
    dropped = np.asarray(h["dropout_0"]["__call__"][0])
    keep = dropped != 0
    assert 0 < (~keep).sum() < keep.sum()
    np.testing.assert_allclose(dropped[keep], dense[keep] / (1 - wm.cfg.dropout), rtol=1e-6)
    # LayerNorm input is the dropped tensor
    ln_out = np.asarray(h["norm_0"]["__call__"][0])
    p0 = pm["hidden"]["norm_0"]
    np.testing.assert_allclose(
        ln_out, _np_ln(dropped.astype(np.float64), p0["scale"], p0["bias"]), atol=1e-5
    )
    out = wm.q(rand_params, z, a, members=jnp.array([m]), dropout_key=key)[0]
    np.testing.assert_array_equal(out, inter["intermediates"]["__call__"][0])


def test_tanh_is_torch_accurate_near_saturation():
    """T4: within 1 ulp of the correctly rounded tanh for |x| >= 0.625 (4 below), not
    saturated before |x| ~ 9.01 (XLA's tanh returns +-1 from ~7.9), gradient 1 - y^2 as
    torch's; ``rounded`` is an identity."""
    x = np.concatenate([np.linspace(-12, 12, 200_001), np.logspace(-20, 1.1, 2_000)])
    x = x.astype(np.float32)
    want = np.tanh(x.astype(np.float64)).astype(np.float32)  # correctly rounded
    got = np.asarray(jax.jit(tanh)(x))
    ulp = np.spacing(np.abs(want)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - want) / ulp
    assert np.max(err[np.abs(x) >= 0.625]) <= 1.0  # 1 - 2 / (exp(2|x|) + 1)
    assert np.max(err) <= 4.0  # XLA's tanh below 0.625
    sat = np.asarray(jax.jit(tanh)(jnp.array([8.5, 9.0, 9.1, -8.5], jnp.float32)))
    np.testing.assert_array_equal(sat, np.float32([1 - 2**-24, 1 - 2**-24, 1.0, -(1 - 2**-24)]))
    xs = jnp.array([-3.0, -0.3, 0.0, 0.5, 4.0], jnp.float32)
    g = jax.vmap(jax.grad(tanh))(xs)
    y = tanh(xs)
    np.testing.assert_array_equal(g, 1 - y * y)
    np.testing.assert_array_equal(jax.jit(rounded)(xs * 3), xs * 3)
