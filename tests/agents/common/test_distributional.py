"""Oracle tests for agents/common/distributional.py (docs/design.md §6, D22, T24).

The oracles are float64 NumPy transcriptions of the formulas in the design, written
independently of the implementation (explicit loops over bins, naive sums).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.common.distributional import TwoHot, symexp, symlog

EPS32 = float(np.finfo(np.float32).eps)
SHAPES = [(), (3,), (2, 5)]
VARIANTS = {"dreamerv3": TwoHot.dreamerv3, "tdmpc2": TwoHot.tdmpc2}


# ----------------------------------------------------------------------------- oracles
def np_symlog(x):
    x = np.asarray(x, np.float64)
    return np.sign(x) * np.log1p(np.abs(x))


def np_symexp(x):
    x = np.asarray(x, np.float64)
    return np.sign(x) * np.expm1(np.abs(x))


def np_two_hot(y, bins, transform):
    """Two-hot weights by a per-element scan over the bins (float64)."""
    bins = np.asarray(bins, np.float64)
    y = np.asarray(y, np.float64)
    t = np_symlog(y) if transform == "symlog" else y
    t = np.clip(t, bins[0], bins[-1])
    out = np.zeros(t.shape + (len(bins),))
    for idx in np.ndindex(t.shape):
        v = t[idx]
        for k in range(len(bins)):
            if v == bins[k]:
                out[idx + (k,)] = 1.0
                break
            if bins[k] < v < bins[k + 1]:
                w = (v - bins[k]) / (bins[k + 1] - bins[k])
                out[idx + (k,)] = 1.0 - w
                out[idx + (k + 1,)] = w
                break
    return out


def np_softmax(logits):
    z = np.asarray(logits, np.float64)
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def np_log_softmax(logits):
    z = np.asarray(logits, np.float64)
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


# ----------------------------------------------------------------------------- symlog
def test_symlog_symexp_edge_values_and_round_trip():
    x = np.array([0.0, 1.0, -1.0, 1e6, -1e6, 0.5, -3.0, 1e-7], np.float32)
    np.testing.assert_allclose(np.asarray(symlog(x)), np_symlog(x), rtol=2 * EPS32, atol=0)
    assert float(symlog(jnp.float32(0.0))) == 0.0
    assert float(symlog(jnp.float32(1.0))) == pytest.approx(math.log(2.0), rel=EPS32)
    assert float(symlog(jnp.float32(-1e6))) == pytest.approx(-math.log1p(1e6), rel=EPS32)
    s = np.array([0.0, 1.0, -1.0, 10.0, -20.0, 13.8155], np.float32)
    np.testing.assert_allclose(np.asarray(symexp(s)), np_symexp(s), rtol=4 * EPS32, atol=0)
    xs = np.concatenate([-np.logspace(-6, 8, 57), [0.0], np.logspace(-6, 8, 57)]).astype(np.float32)
    np.testing.assert_allclose(np.asarray(symexp(symlog(xs))), xs, rtol=3e-6, atol=1e-12)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_symlog_symexp_preserve_dtype_and_shape(dtype):
    x = jnp.ones((2, 3), dtype)
    assert symlog(x).dtype == dtype and symlog(x).shape == (2, 3)
    assert symexp(x).dtype == dtype and symexp(x).shape == (2, 3)


def test_symlog_symexp_gradients_finite_at_zero():
    for f in (symlog, symexp):
        g0 = float(jax.grad(f)(jnp.float32(0.0)))
        assert math.isfinite(g0)
        # Away from 0 the derivative is 1 / (1 + |x|) resp. exp(|x|).
        assert float(jax.grad(f)(jnp.float32(1e-3))) == pytest.approx(1.0, rel=2e-3)
    assert float(jax.grad(symlog)(jnp.float32(3.0))) == pytest.approx(0.25, rel=1e-6)


# ----------------------------------------------------------------------------- bins
def test_dreamerv3_bins():
    th = TwoHot.dreamerv3()
    b = np.asarray(th.bins_array)
    assert b.dtype == np.float32 and b.shape == (255,) and th.transform == "identity"
    assert np.array_equal(b, -b[::-1])
    assert b[127] == 0.0
    assert b[-1] == np.float32(np.expm1(20.0))
    assert np.all(np.diff(b) > 0)
    oracle = np.float32(np_symexp(np.linspace(-20.0, 20.0, 255)))
    np.testing.assert_array_equal(b, oracle)
    assert tuple(float(v) for v in b) == th.bins


def test_tdmpc2_bins():
    th = TwoHot.tdmpc2()
    b = np.asarray(th.bins_array)
    assert b.dtype == np.float32 and b.shape == (101,) and th.transform == "symlog"
    assert np.array_equal(b, -b[::-1])
    assert b[50] == 0.0
    np.testing.assert_array_equal(b, np.float32(np.linspace(-10.0, 10.0, 101)))


@pytest.mark.parametrize("num_bins", [4, 9, 41, 100])
def test_custom_bin_counts_are_symmetric(num_bins):
    for name, limit in (("dreamerv3", 5.0), ("tdmpc2", 3.0)):
        b = np.asarray(VARIANTS[name](num_bins=num_bins, limit=limit).bins_array)
        assert len(b) == num_bins and np.array_equal(b, -b[::-1])
        lin = np.linspace(-limit, limit, num_bins)
        oracle = np_symexp(lin) if name == "dreamerv3" else lin
        np.testing.assert_array_equal(b, np.float32(oracle))


def test_validation_and_hashability():
    with pytest.raises(ValueError):
        TwoHot(bins=(-1.0, 0.0, 2.0))
    with pytest.raises(ValueError):
        TwoHot(bins=(1.0, 0.0, -1.0))
    with pytest.raises(ValueError):
        TwoHot(bins=(-1.0, 0.0, 1.0), transform="log")
    with pytest.raises(ValueError):
        TwoHot(bins=(-0.1, 0.0, 0.1))  # 0.1 is not a float32 value
    a, b = TwoHot.tdmpc2(), TwoHot.tdmpc2()
    assert a == b and hash(a) == hash(b) and a != TwoHot.dreamerv3()

    g = jax.jit(lambda th, logits: th.decode(logits), static_argnums=0)
    logits = jnp.zeros((3, 101)).at[:, 80].set(5.0)
    np.testing.assert_array_equal(np.asarray(g(a, logits)), np.asarray(g(b, logits)))
    assert float(g(a, logits)[0]) > 1.0


# ----------------------------------------------------------------------------- encode
def _targets(name, th, rng):
    b = np.asarray(th.bins_array)
    if name == "dreamerv3":
        in_range = np.concatenate(
            [
                rng.standard_normal(40) * s
                for s in (0.1, 1.0, 30.0, 1e4, 1e7)  # spans the dense and sparse bins
            ]
        )
        exact = b[::7]
        mids = 0.5 * (b[:-1] + b[1:])[::9]
    else:
        in_range = np.concatenate([rng.standard_normal(40) * s for s in (0.1, 1.0, 30.0, 1e3)])
        exact = np.float32(np_symexp(b[::7]))
        mids = np.float32(np_symexp(0.5 * (b[:-1] + b[1:])[::9]))
    special = np.array([0.0, 1.0, -1.0, 1e9, -1e9, np.inf, -np.inf], np.float64)
    edges = np.array([b[0], b[-1], np.nextafter(b[-1], np.float32(0)), np.nextafter(b[1], 0)])
    return np.concatenate([in_range, exact, mids, special, edges]).astype(np.float32)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_encode_matches_oracle(name):
    th = VARIANTS[name]()
    y = _targets(name, th, np.random.default_rng(0))
    w = np.asarray(jax.jit(th.encode)(y))
    assert w.dtype == np.float32 and w.shape == (len(y), th.num_bins)
    oracle = np_two_hot(y, th.bins, th.transform)
    np.testing.assert_allclose(w, oracle, rtol=0, atol=2e-5)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=0, atol=2 * EPS32)
    assert np.all(w >= 0)
    nz = [np.flatnonzero(row) for row in w]
    assert all(1 <= len(ix) <= 2 for ix in nz)
    assert all(len(ix) == 1 or ix[1] == ix[0] + 1 for ix in nz)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_encode_exact_bin_values_are_one_hot(name):
    th = VARIANTS[name]()
    b = np.asarray(th.bins_array)
    if th.transform == "identity":
        y, k = b, np.arange(len(b))
    else:
        # Targets whose float32 symlog lands exactly on a bin (0, the clipped edges, and
        # every symexp(bin) for which float32 rounding round-trips).
        cand = np.float32(np_symexp(b))
        hit = np.asarray(jax.jit(symlog)(jnp.asarray(cand))) == b
        assert hit[50] and hit.sum() >= 10
        y = np.concatenate([cand[hit], [np.float32(1e9), np.float32(-1e9)]])
        k = np.concatenate([np.flatnonzero(hit), [len(b) - 1, 0]])
    w = np.asarray(jax.jit(th.encode)(jnp.asarray(y)))
    expected = np.zeros_like(w)
    expected[np.arange(len(k)), k] = 1.0
    np.testing.assert_array_equal(w, expected)


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("shape", SHAPES)
def test_decode_of_encode_round_trips(name, shape):
    th = VARIANTS[name]()
    rng = np.random.default_rng(1)
    scale = 1e5 if name == "dreamerv3" else 1e3
    y = np.float32(rng.standard_normal(shape) * scale * rng.uniform(0, 1, shape))
    out = np.asarray(jax.jit(lambda v: th.decode_probs(th.encode(v)))(y))
    assert out.shape == shape and out.dtype == np.float32
    rtol = 4 * EPS32 if name == "dreamerv3" else 40 * EPS32  # symexp amplifies |t| * eps
    np.testing.assert_allclose(out, y, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_decode_of_encode_clips_out_of_range(name):
    th = VARIANTS[name]()
    top = np.float32(np.expm1(20.0)) if name == "dreamerv3" else np.float32(np.expm1(10.0))
    round_trip = jax.jit(lambda v: th.decode_probs(th.encode(v)))
    out = np.asarray(round_trip(jnp.array([1e9, -1e9, 3e38], jnp.float32)))
    np.testing.assert_allclose(out, [top, -top, top], rtol=4 * EPS32)


# ----------------------------------------------------------------------------- decode
@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("shape", SHAPES)
def test_decode_of_uniform_is_exactly_zero_under_jit(name, shape):
    th = VARIANTS[name]()
    k = th.num_bins
    zeros = jnp.zeros(shape + (k,), jnp.float32)
    consts = jnp.full(shape + (k,), -3.7, jnp.float32)
    probs = jnp.full(shape + (k,), 1.0 / k, jnp.float32)
    # mirror-symmetric, non-uniform logits: equal mirror pairs must also cancel exactly
    r = jnp.asarray(np.random.default_rng(2).standard_normal(shape + (k,)), jnp.float32)
    sym = r + r[..., ::-1]
    dec = jax.jit(th.decode)
    for v in (dec(zeros), dec(consts), dec(sym), jax.jit(th.decode_probs)(probs)):
        assert v.shape == shape and v.dtype == jnp.float32
        np.testing.assert_array_equal(np.asarray(v), np.zeros(shape, np.float32))


@pytest.mark.parametrize("name", list(VARIANTS))
def test_decode_close_to_naive_float64_sum(name):
    th = VARIANTS[name]()
    rng = np.random.default_rng(3)
    logits = np.float32(
        np.concatenate(
            [
                rng.standard_normal((64, th.num_bins)) * s + rng.standard_normal((64, 1)) * 10
                for s in (0.3, 1.0, 3.0, 10.0)
            ]
        )
    )
    b64 = np.asarray(th.bins, np.float64)
    p64 = np_softmax(logits)
    naive = (p64 * b64).sum(-1)
    tol = EPS32 * (1.0 + 6.0 * (p64 * np.abs(b64)).sum(-1))
    # in interpolation space (for TD-MPC2: symlog space, before symexp)
    inner = TwoHot(bins=th.bins, transform="identity")
    got = np.asarray(jax.jit(inner.decode)(logits), np.float64)
    err = np.abs(got - naive)
    assert np.all(err <= tol), f"max err/tol = {np.max(err / tol):.3f}"
    full = np.asarray(jax.jit(th.decode)(logits), np.float64)
    if th.transform == "symlog":
        expected = np_symexp(naive)
        # symexp turns an absolute error d in symlog space into a relative error ~ d
        np.testing.assert_allclose(full, expected, rtol=2 * tol.max() + 4 * EPS32, atol=1e-6)
    else:
        np.testing.assert_array_equal(full, got)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_decode_equals_decode_probs_of_softmax(name):
    th = VARIANTS[name]()
    logits = jnp.asarray(np.random.default_rng(4).standard_normal((2, 5, th.num_bins)) * 2)
    via_probs = jax.jit(lambda lg: th.decode_probs(jax.nn.softmax(lg, axis=-1)))(logits)
    via_probs = np.asarray(via_probs, np.float64)
    b64 = np.asarray(th.bins, np.float64)
    if th.transform == "symlog":
        via_probs = np_symlog(via_probs)
        got = np.asarray(jax.jit(TwoHot(bins=th.bins).decode)(logits), np.float64)
    else:
        got = np.asarray(jax.jit(th.decode)(logits), np.float64)
    p64 = np_softmax(logits)
    tol = EPS32 * (1.0 + 12.0 * (p64 * np.abs(b64)).sum(-1))
    assert np.all(np.abs(got - via_probs) <= tol)


def test_decode_gradient_matches_oracle():
    rng = np.random.default_rng(7)
    for th in (TwoHot.tdmpc2(), TwoHot.dreamerv3(num_bins=31, limit=5.0)):
        logits = np.float32(rng.standard_normal((4, th.num_bins)))
        g = np.asarray(jax.jit(jax.grad(lambda lg, th=th: th.decode(lg).sum()))(logits))
        p = np_softmax(logits)
        b = np.asarray(th.bins, np.float64)
        m = (p * b).sum(-1, keepdims=True)
        oracle = p * (b - m)  # d E_p[b] / d logits
        if th.transform == "symlog":
            oracle = oracle * np.exp(np.abs(m))  # chain rule through symexp
        np.testing.assert_allclose(g, oracle, rtol=1e-4, atol=1e-6 * np.abs(oracle).max())


# ----------------------------------------------------------------------------- loss
@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("shape", SHAPES)
def test_loss_matches_oracle_cross_entropy(name, shape):
    th = VARIANTS[name]()
    rng = np.random.default_rng(5)
    logits = np.float32(rng.standard_normal(shape + (th.num_bins,)) * 3)
    y = np.float32(rng.standard_normal(shape) * (1e4 if name == "dreamerv3" else 100))
    got = np.asarray(jax.jit(th.loss)(logits, y))
    assert got.shape == shape and got.dtype == np.float32
    oracle = -(np_two_hot(y, th.bins, th.transform) * np_log_softmax(logits)).sum(-1)
    np.testing.assert_allclose(got, oracle, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_loss_of_uniform_logits_is_log_k(name):
    th = VARIANTS[name]()
    loss = jax.jit(th.loss)
    got = np.asarray(loss(jnp.zeros((4, th.num_bins)), jnp.array([0.0, 2.5, -1e9, 7.0])))
    np.testing.assert_allclose(got, math.log(th.num_bins), rtol=2e-6)


def test_loss_gradient_is_softmax_minus_target():
    th = TwoHot.tdmpc2()
    rng = np.random.default_rng(6)
    logits = jnp.asarray(rng.standard_normal((3, 101)), jnp.float32)
    y = jnp.asarray([0.3, -40.0, 1e5], jnp.float32)
    g = np.asarray(jax.jit(jax.grad(lambda lg: th.loss(lg, y).sum()))(logits))
    oracle = np_softmax(logits) - np_two_hot(y, th.bins, "symlog")
    np.testing.assert_allclose(g, oracle, atol=2e-6)
