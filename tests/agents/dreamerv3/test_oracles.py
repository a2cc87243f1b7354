"""Float64 NumPy oracles of DreamerV3's numerics against our jitted float32 code.

Reference: dreamerv3@2411f7d ``dreamerv3/nets.py`` and ``dreamerv3/agent.py``.

The oracles are written from the math and never call our code. Each oracle is an ``E``: a
float64 value plus a worst-case first-order bound on how far a float32 evaluation of the same
expression can be from it. The bound follows these rules:

* IEEE ``+ - * /`` round with relative error at most ``u = 2^-24``. A Python constant (0.99,
  lam, gamma) also carries its exact float32 rounding.
* A length-K sum or dot product errs by at most ``gamma_K sum|terms|``, with
  ``gamma_K = K u / (1 - K u)`` (Higham, *Accuracy and Stability*, §3.1).
* ``exp``, ``log1p`` and ``rsqrt`` are within ``K_FN`` ulps, relative; ``tanh`` and
  ``logistic`` within ``K_FN u``, absolute; ``log`` within ``K_FN u max(1, |y|)``.
  :func:`test_transcendental_accuracy` checks this (measured: at most 4.5 ulps).
* An error already in an input propagates through each function's exact Lipschitz bound.

The inputs are float32 values, so float32 arithmetic is the only source of difference. Each
check asserts ``|ours - oracle| <= bound`` elementwise. The bound is a worst case, so a pass
does not rely on luck.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from agents.dreamerv3.heads import symlog_mse
from agents.dreamerv3.latents import categorical_kl, onehot_sample, unimix_logits
from agents.dreamerv3.returns import lambda_return, replay_return
from agents.dreamerv3.world_model import observe_sequence, world_model_losses
from tests.agents.dreamerv3.conftest import random_batch, random_params, tiny_nets

U, K_FN, f32 = 2.0**-24, 8, np.float32


@functools.cache
def _params(discrete: bool) -> dict:
    """Generic (non-zero) parameter values for the tiny nets (``conftest.random_params``)."""
    return random_params(tiny_nets(discrete))[0]


_gamma = lambda n: n * U / (1.0 - n * U)


class E:
    """A float64 value ``v`` and the bound ``e`` on the error of its float32 evaluation."""

    def __init__(self, v, e=0.0):
        self.v = np.asarray(v, np.float64)
        self.e = np.asarray(e, np.float64) + np.zeros_like(self.v)

    # a Python constant, rounded to float32 once (JAX weak typing)
    c = staticmethod(lambda x: E(x, np.abs(np.float64(f32(x)) - np.float64(x))))
    map = lambda self, f: E(f(self.v), f(self.e))  # structural (reshape, split): exact
    stack = staticmethod(
        lambda xs, ax: E(*(np.stack([getattr(x, k) for x in xs], ax) for k in "ve"))
    )
    __neg__ = lambda self: E(-self.v, self.e)
    __sub__ = lambda self, o: self + (-_e(o))
    __rsub__ = lambda self, o: _e(o) + (-self)

    def __add__(self, o):
        o = _e(o)
        return E(self.v + o.v, self.e + o.e + U * np.abs(self.v + o.v))

    def __mul__(self, o):
        o, v = _e(o), self.v * _e(o).v
        return E(v, abs(self.v) * o.e + abs(o.v) * self.e + self.e * o.e + U * abs(v))

    def __truediv__(self, o):
        o, v = _e(o), self.v / _e(o).v
        return E(v, (self.e + np.abs(v) * o.e) / (np.abs(o.v) - o.e) + U * np.abs(v))

    __radd__, __rmul__ = __add__, __mul__


_e = lambda x: x if isinstance(x, E) else E.c(x)
exp = lambda x: E(np.exp(x.v), np.exp(x.v) * (np.expm1(x.e) + K_FN * U))
log = lambda x: E(np.log(x.v), -np.log1p(-x.e / x.v) + K_FN * U * np.maximum(1, abs(np.log(x.v))))
log1p = lambda x: E(np.log1p(x.v), x.e / (1 + x.v - x.e) + K_FN * U * np.log1p(x.v))  # x >= 0
tanh = lambda x: E(np.tanh(x.v), x.e + K_FN * U)
sigmoid = lambda x: E(special.expit(x.v), 0.25 * x.e + K_FN * U)
rsqrt = lambda x: E(x.v**-0.5, 0.5 * x.e * (x.v - x.e) ** -1.5 + K_FN * U * x.v**-0.5)
cat = lambda xs: E(*(np.concatenate([getattr(x, k) for x in xs], -1) for k in "ve"))
vmax = lambda x: E(x.v.max(-1, keepdims=True), x.e.max(-1, keepdims=True))


def total(x, keepdims=False):
    s = lambda a: a.sum(-1, keepdims=keepdims)
    return E(s(x.v), s(x.e) + _gamma(x.v.shape[-1] - 1) * s(np.abs(x.v)))


def softmax(x):
    z = exp(x - vmax(x))
    return z / total(z, keepdims=True)


def log_softmax(x):
    z = x - vmax(x)
    return z - log(total(exp(z), keepdims=True))


# log((1 - mix) softmax(x) + mix / C) (dreamerv3@2411f7d dreamerv3/nets.py:207-217)
unimix = lambda x, mix=0.01: log(E.c(1 - mix) * softmax(x) + E.c(mix) * (E.c(1.0) / x.v.shape[-1]))


def check(ours, oracle, what):
    assert np.shape(ours) == oracle.v.shape, (what, np.shape(ours), oracle.v.shape)
    err = np.abs(np.float64(ours) - oracle.v)
    assert np.all(err <= oracle.e), f"{what}: max |err|/bound {np.max(err / (oracle.e + 1e-300))}"


def test_transcendental_accuracy():
    """The ``K_FN``-ulp assumption of every bound, checked on a dense float32 grid against
    float64 (relative for exp/log1p/rsqrt, absolute for tanh/logistic, of ``max(1, |y|)``
    for log)."""
    x = f32(np.concatenate([np.linspace(-30, 30, 200_001), np.geomspace(1e-20, 30, 20_001)]))
    x, pos = np.concatenate([x, -x]), f32(np.geomspace(1e-30, 1e6, 100_001))
    absolute, relative, log_ = lambda t: 1.0, np.abs, lambda t: np.maximum(1.0, np.abs(t))
    for ours, exact, grid, scale in [
        (jnp.tanh, np.tanh, x, absolute), (jax.nn.sigmoid, special.expit, x, absolute),
        (jnp.exp, np.exp, x, relative), (jnp.log1p, np.log1p, pos, relative),
        (jax.lax.rsqrt, lambda v: v**-0.5, pos, relative), (jnp.log, np.log, pos, log_),
    ]:  # fmt: skip
        y, t = np.float64(jax.jit(ours)(grid)), exact(np.float64(grid))
        assert np.max(np.abs(y - t) / scale(t)) <= K_FN * U, ours


def _dense(x, p):
    w = np.float64(p["kernel"])
    return E(x.v @ w, x.e @ abs(w) + _gamma(len(w)) * (abs(x.v) @ abs(w))) + E(p["bias"])


def _block(x, p, g):
    """BlockLinear: group k of the input times ``kernel[k]``, flattened, plus a full bias."""
    w = np.float64(p["kernel"])
    xs = x.map(lambda a: a.reshape(*a.shape[:-1], g, -1))
    ein = lambda a, b: np.einsum("ngi,gio->ngo", a, b).reshape(a.shape[0], -1)
    y = E(ein(xs.v, w), ein(xs.e, np.abs(w)) + _gamma(w.shape[1]) * ein(np.abs(xs.v), np.abs(w)))
    return y + E(p["bias"])


def _rms_silu(x, scale):
    ms = total(x * x, keepdims=True) / float(x.v.shape[-1])
    y = x * rsqrt(ms + 1e-4) * E(scale)
    return y * sigmoid(y)


_layer = lambda x, p: _rms_silu(_dense(x, p["dense_0"]), p["norm_0"]["scale"])  # NormedMLP(1)


def _gru(p, deter, stoch, action, g, naive=False):
    """deter' of dreamerv3@2411f7d ``nets.py:119-173`` from float32 inputs; ``naive`` splits
    reset|cand|update over D."""
    n = deter.shape[0]
    a = E(action) / E(np.maximum(1.0, np.abs(action)))
    ins = (E(deter), E(stoch.reshape(n, -1)), a)
    x = cat([_layer(v, p[f"dynin{i}"]) for i, v in enumerate(ins)])
    x = x.map(lambda v: np.broadcast_to(v[:, None], (n, g, v.shape[-1])))
    x = cat([E(deter).map(lambda v: v.reshape(n, g, -1)), x]).map(lambda v: v.reshape(n, -1))
    x = _rms_silu(_block(x, p["dyn0"], g), p["dyn0_norm"]["scale"])
    x = _block(x, p["dyncore"], g)
    split = lambda v, i: np.split(v.reshape(n, g, -1), 3, -1)[i].reshape(n, -1)
    if naive:
        split = lambda v, i: np.split(v, 3, -1)[i]
    reset, cand, update = (x.map(lambda v, i=i: split(v, i)) for i in range(3))
    cand = tanh(sigmoid(reset) * cand)
    update = sigmoid(update - 1.0)
    return update * cand + (1.0 - update) * E(deter)


def test_block_gru(nets):
    """``RSSM.gru`` against the block-GRU oracle (``nets.py:119-173``), with actions beyond |a| = 1.

    Parameters: :func:`_params`. Bound: the E-chain through 3 Linear(K = D, SC, A) + RMSNorm
    + SiLU layers, BlockLinear(K = D/g + 3H) + RMSNorm + SiLU, BlockLinear(K = D/g), gates. The
    same bound rejects a naive ``[r | c | u]`` split over D: the check sees the gate layout."""
    c, r, n = nets.cfg, np.random.default_rng(1), 7
    params = _params(nets.discrete)["dyn"]
    deter = f32(r.normal(size=(n, c.deter_size)))
    stoch = f32(np.eye(c.classes_size)[r.integers(0, c.classes_size, (n, c.stoch))])
    action = f32(r.normal(0, 2.0, (n, nets.action_size)))
    assert np.any(np.abs(action) > 1) and np.any(np.abs(action) < 1)
    gru = jax.jit(lambda p, *x: nets.rssm.apply({"params": p}, *x, method="gru"))
    ours = np.float64(gru(params, deter, stoch, action))
    p64 = jax.tree_util.tree_map(np.float64, params)
    check(ours, _gru(p64, deter, stoch, action, c.blocks), "block gru")
    naive = _gru(p64, deter, stoch, action, c.blocks, naive=True)
    assert not np.all(np.abs(ours - naive.v) <= naive.e), "naive gate split also matches"


# KL(softmax(p) || softmax(q)) over the classes, as tfp evaluates it from (unimixed) logits
_kl = lambda p, q: total(softmax(p) * (log_softmax(p) - log_softmax(q)))


def test_categorical_kl_of_unimix():
    """``categorical_kl(unimix_logits(a), unimix_logits(b))`` and ``unimix_logits`` against
    ``p = 0.99 softmax + 0.01 / C``, ``KL = sum p log(p / q)``, for pairs from near-equal to
    far apart. Bound: the E-chain of the C-term softmax, the mix, log, log_softmax, C-term sum."""
    r, s, cl = np.random.default_rng(2), 4, 9
    scale = np.geomspace(0.05, 8.0, 12)[:, None, None]
    a = f32(r.normal(size=(12, s, cl)) * scale)
    b = f32(a + r.normal(size=a.shape) * scale)
    mix = lambda x: unimix_logits(x, 0.01)
    mixed, kl = jax.jit(lambda a, b: (mix(a), categorical_kl(mix(a), mix(b))))(a, b)
    ua, ub = unimix(E(a)), unimix(E(b))
    p, q = (0.99 * special.softmax(np.float64(x), -1) + 0.01 / cl for x in (a, b))
    np.testing.assert_allclose(ua.v, np.log(p), rtol=1e-12)
    np.testing.assert_allclose(_kl(ua, ub).v, np.sum(p * np.log(p / q), -1), rtol=1e-9, atol=1e-14)
    check(mixed, ua, "unimix logits")
    check(kl, _kl(ua, ub), "categorical kl")


@pytest.fixture(scope="module")
def wm_kl():
    """World-model dyn/rep terms and their logit/deter gradients for posterior logits that
    straddle the 1-nat threshold: ``raw = prior + scale * noise``, ``post = unimix(raw)``."""
    nets, params = tiny_nets(False), _params(False)
    batch, c = random_batch(nets), nets.cfg
    b, t = batch.reward.shape[0], batch.reward.shape[1] - 1
    gum = jax.random.gumbel(jax.random.key(1), (t, b, c.stoch, c.classes_size))
    _, post = jax.jit(observe_sequence, static_argnums=0)(nets, params, batch, gum)
    prior_fn = lambda d: nets.rssm.apply({"params": params["dyn"]}, d, method="prior")
    r = np.random.default_rng(3)
    scale = r.permutation(np.geomspace(0.02, 6.0, post.deter.shape[0] * post.deter.shape[1]))
    scale = scale.reshape(post.deter.shape[:2])[..., None, None]
    raw = f32(np.asarray(prior_fn(post.deter)) + scale * r.normal(size=post.logits.shape))

    def terms(raw, deter):
        p = post.replace(logits=unimix_logits(raw, c.unimix), deter=deter)
        losses, _ = world_model_losses(nets, params, batch, p)
        means = {k: jnp.mean(losses[k]) for k in ("dyn", "rep")}
        return means, (losses["dyn"], losses["rep"], prior_fn(deter))

    jac, (dyn, rep, prior) = jax.jit(jax.jacrev(terms, (0, 1), has_aux=True))(raw, post.deter)
    return raw, np.asarray(prior), np.asarray(dyn), np.asarray(rep), jac


def test_world_model_kl_terms(wm_kl):
    """``dyn`` and ``rep`` both equal ``max(sum_S KL(post || prior), 1)`` in value
    (dreamerv3@2411f7d ``nets.py:97-110``), for cases below and above the free-nats threshold.
    Bound: the KL chain plus the S-term sum; max is 1-Lipschitz, and no case lies within its bound
    of 1."""
    raw, prior, dyn, rep, _ = wm_kl
    kl = total(_kl(unimix(E(raw)), E(prior)))
    assert np.any(kl.v < 1) and np.any(kl.v > 1) and np.all(abs(kl.v - 1) > kl.e), "straddle 1"
    clipped = E(np.maximum(kl.v, 1.0), np.where(kl.v > 1.0, kl.e, 0.0))
    check(dyn, clipped, "dyn")
    check(rep, clipped, "rep")


def test_world_model_kl_gradients(wm_kl):
    """Free bits: the gradient is exactly zero where the summed KL is below 1 nat (max selects
    the constant). dyn = KL(sg(post) || prior) reaches the prior (through deter) and not the
    posterior logits; rep = KL(post || sg(prior)) does the reverse (``nets.py:97-110``)."""
    raw, prior, _, _, jac = wm_kl
    above = total(_kl(unimix(E(raw)), E(prior))).v > 1.0
    norm = lambda g: np.sqrt(np.sum(np.square(np.asarray(g)).reshape(*above.shape, -1), -1))
    (dyn_raw, dyn_deter), (rep_raw, rep_deter) = jac["dyn"], jac["rep"]
    assert np.all(np.asarray(dyn_raw) == 0) and np.all(np.asarray(rep_deter) == 0)
    for g in (dyn_deter, rep_raw):
        assert np.all(norm(g)[~above] == 0) and np.all(norm(g)[above] > 0)


def test_lambda_return():
    """``R_H = val_H``, ``R_t = rew_{t+1} + (1 - lam) con_{t+1} val_{t+1} + con_{t+1} lam
    R_{t+1}`` (dreamerv3@2411f7d ``agent.py:320-326``, in the reference's order), with con = 0
    entries. Bound: per step, 2 products with a rounded constant and 2 adds, plus ``con lam``
    times the previous bound."""
    r, n, h, lam = np.random.default_rng(4), 9, 15, 0.95
    rew, val = f32(r.normal(size=(n, h + 1))), f32(r.normal(0, 3, (n, h + 1)))
    con = f32(np.where(r.random((n, h + 1)) < 0.2, 0.0, r.uniform(0.5, 1.0, (n, h + 1))))
    ret = [E(val[:, -1])]
    for t in reversed(range(h)):
        disc = E(con[:, t + 1])
        interm = E(rew[:, t + 1]) + E.c(1 - lam) * disc * E(val[:, t + 1])
        ret.append(interm + disc * lam * ret[-1])
    ours = jax.jit(lambda *x: lambda_return(*x, lam))(rew, con, val)
    check(ours, E.stack(ret[:0:-1], 1), "lambda return")


def test_replay_return():
    """Replay-critic target (dreamerv3@2411f7d ``agent.py:352-373``):
    ``live_t = (1 - term_{t+1}) gamma``, ``c_t = (1 - last_{t+1}) lam``, ``R_{T-1} = boot_{T-1}``,
    ``R_t = r_{t+1} + (1 - c_t) live_t boot_{t+1} + live_t c_t R_{t+1}``; terminations, truncations,
    boundaries at both ends. Bound: the E-chain of each step (rounded gamma and lam, 5 products, 2
    adds) plus the carried bound."""
    r, b, t, gamma, lam = np.random.default_rng(5), 4, 10, 1 - 1 / 333, 0.95
    rew, boot = f32(r.normal(size=(b, t))), f32(r.normal(0, 5, (b, t)))
    last, term = np.zeros((2, b, t), bool)
    last[0, [0, 4]] = term[0, [0, 4]] = last[2, -1] = term[2, -1] = term[3, 6] = True
    last[1, [3, 4, t - 1]] = last[3, [2, 6]] = True
    ret = [E(boot[:, -1])]
    for i in reversed(range(t - 1)):
        live = E(1.0 - term[:, i + 1]) * E.c(gamma)
        cont = E(1.0 - last[:, i + 1]) * E.c(lam)
        interm = E(rew[:, i + 1]) + (1.0 - cont) * live * E(boot[:, i + 1])
        ret.append(interm + live * cont * ret[-1])
    ours = jax.jit(lambda *x: replay_return(*x, gamma, lam))(rew, term, last, boot)
    check(ours, E.stack(ret[:0:-1], 1), "replay return")


def test_symlog_mse():
    """``sum((pred - symlog(target))^2)`` with squares below 1e-8 set to 0, no 1/2 factor
    (dreamerv3@2411f7d ``jaxutils.py:179-207``), for rows with errors ~1e-5 (squares ~1e-10,
    zeroed), ~1e-3 (kept) and 0. Bound: log1p, the difference, the square and the O-term sum; no
    square lies within its bound of the threshold."""
    r = np.random.default_rng(6)
    target = f32(r.normal(size=(6, 5)) * np.array([[0.1], [1], [10], [1e3], [1], [100]]))
    exact = np.sign(np.float64(target)) * np.log1p(np.abs(np.float64(target)))
    delta = np.array([[1.0], [1.0], [1e-5], [1e-3], [0.0], [1e-5]]) * r.choice([-1, 1], (6, 5))
    pred = f32(np.where(np.arange(6)[:, None] < 2, r.normal(size=(6, 5)), exact + delta))
    sq, tol = E(pred) - E(np.sign(target)) * log1p(E(np.abs(target))), 1e-8
    sq = sq * sq
    assert np.all(np.abs(sq.v - tol) > sq.e + abs(float(f32(tol)) - tol)), "ambiguous case"
    kept = sq.v >= tol
    oracle = total(E(np.where(kept, sq.v, 0.0), np.where(kept, sq.e, 0.0)))
    ours = np.asarray(jax.jit(symlog_mse)(pred, target))
    check(ours, oracle, "symlog mse")
    assert ours[2] == 0.0 and ours[5] == 0.0 and np.all(sq.v[2] > 0), "small squares zeroed"


def test_actor_distribution(nets):
    """Continuous: ``loc = tanh(out)``, ``scale = 0.9 sigmoid(std + 2) + 0.1``, log-prob and
    entropy of Normal(loc, scale) summed over action dims (scipy.stats), actions beyond
    [-1, 1]. Discrete: ``p = 0.99 softmax(out) + 0.01 / A``, ``log p[a]`` and ``-sum p log p``.
    The output kernels are at 3x fan-in scale, so that loc and scale vary over the batch.
    Bound: tanh/logistic to ``K_FN u`` plus the affine roundings. The log-prob and entropy of
    our loc and scale use z (the bound covers both ``(a - loc)/s`` and ``a/s - loc/s``),
    square, log, and the A-term sum."""
    r = np.random.default_rng(7)
    params = _params(nets.discrete)["actor"]
    boost = lambda k, v: {**v, "kernel": v["kernel"] * 3} if k in ("out", "std") else v
    params = {k: boost(k, v) for k, v in params.items()}
    feat = f32(r.normal(size=(16, nets.cfg.feat_size)))
    na = nets.action_size
    act = f32(np.eye(na)[r.integers(0, na, 16)] if nets.discrete else r.normal(0, 2, (16, na)))

    def fn(p, feat, act):
        dist, st = nets.actor.apply({"params": p}, feat, capture_intermediates=True)
        raw = {k: st["intermediates"][k]["__call__"][0] for k in ("out", "std") if k in p}
        return raw, dist, dist.log_prob(act), dist.entropy()

    raw, dist, logp, ent = jax.tree_util.tree_map(np.asarray, jax.jit(fn)(params, feat, act))
    if nets.discrete:
        logits = unimix(E(raw["out"]))
        p = 0.99 * special.softmax(np.float64(raw["out"]), -1) + 0.01 / na
        check(dist.logits, logits, "actor logits")
        lp, ls = log_softmax(logits), softmax(logits)
        want_lp, want_ent = total(lp * E(act)), -total(lp * ls)
        np.testing.assert_allclose(want_lp.v, np.log(np.sum(p * act, -1)), rtol=1e-12)
        np.testing.assert_allclose(want_ent.v, -np.sum(p * np.log(p), -1), rtol=1e-12)
    else:
        check(dist.loc, tanh(E(raw["out"])), "loc")
        check(dist.scale, E.c(0.9) * sigmoid(E(raw["std"]) + 2.0) + 0.1, "scale")
        loc, sc = np.float64(dist.loc), np.float64(dist.scale)
        assert np.any(np.abs(act) > 1) and np.ptp(sc) > 0.3 and np.ptp(loc) > 0.3
        zv = (act - loc) / sc
        z = E(zv, U * (np.abs(act) + np.abs(loc)) / sc + U * np.abs(zv))
        half_log_2pi = E.c(0.5 * np.log(2 * np.pi))
        want_lp = total(E.c(-0.5) * (z * z) - (half_log_2pi + log(E(sc))))
        want_ent = total(0.5 + (half_log_2pi + log(E(sc))))
        normal = stats.norm(loc, sc)
        np.testing.assert_allclose(want_lp.v, normal.logpdf(act).sum(-1), rtol=1e-12)
        np.testing.assert_allclose(want_ent.v, normal.entropy().sum(-1), rtol=1e-12)
    check(logp, want_lp, "log prob")
    check(ent, want_ent, "entropy")


def test_onehot_sample_straight_through():
    """Forward: exactly ``one_hot(argmax(logits + g))`` (the float32 sum is the same IEEE
    add in NumPy). Gradient of ``sum(w * sample)``: ``softmax'(logits)^T w = p (w - p.w)``,
    with the bound of the softmax chain taken in the ``p w - p (p.w)`` form, which also covers
    ``p (w - p.w)``."""
    r = np.random.default_rng(8)
    logits = f32(r.normal(0, 2, (5, 4, 9)))
    gumbel = f32(r.gumbel(size=logits.shape))
    w = f32(r.normal(size=logits.shape))
    sample = np.asarray(jax.jit(onehot_sample)(logits, gumbel))
    np.testing.assert_array_equal(sample, np.eye(9)[np.argmax(logits + gumbel, -1)])
    grad = jax.jit(jax.grad(lambda x: jnp.sum(w * onehot_sample(x, gumbel))))(logits)
    p = softmax(E(logits))
    want = p * E(w) - p * total(p * E(w), keepdims=True)
    check(grad, want, "straight-through gradient")
    s = special.softmax(np.float64(logits), -1)
    np.testing.assert_allclose(
        want.v, s * (w - np.sum(s * w, -1, keepdims=True)), rtol=1e-9, atol=1e-15
    )
