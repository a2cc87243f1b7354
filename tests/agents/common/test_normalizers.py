"""Oracle tests for agents/common/normalizers.py (docs/design.md §6, T25).

The oracles follow the formulas of the design in float64 NumPy: ``np.percentile`` (linear),
``S <- tau * max(1, p95 - p5) + (1 - tau) * S`` (RunningScale, init 1) and
``lo/hi <- rate * p + (1 - rate) * lo/hi`` with ``scale = max(limit, hi - lo)``
(ReturnNormalizer, init 0).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.common.normalizers import (
    ReturnNormalizer,
    ReturnNormState,
    RunningScale,
    percentile_range,
)


def _batches(seed=0):
    """Five batches of different shapes and spreads; batch 2 has p95 - p5 < 1."""
    rng = np.random.default_rng(seed)
    shapes_scales = [((16,), 50.0), ((4, 8), 3.0), ((32, 1), 0.05), ((7, 3, 2), 200.0), ((5,), 1e3)]
    return [
        np.float32(rng.standard_normal(shape) * scale + rng.standard_normal() * scale)
        for shape, scale in shapes_scales
    ]


@pytest.mark.parametrize("shape", [(1,), (2,), (17,), (3, 11), (4, 5, 6)])
def test_percentile_range_matches_numpy_linear(shape):
    x = np.float32(np.random.default_rng(1).standard_normal(shape) * 10)
    f = jax.jit(percentile_range)  # percentiles traced: one compile per shape
    for pcts in [(5.0, 95.0), (0.0, 100.0), (37.5, 50.0), (1.0, 99.0)]:
        lo, hi = f(jnp.asarray(x), *pcts)
        assert lo.shape == () and hi.shape == () and lo.dtype == jnp.float32
        o_lo, o_hi = np.percentile(np.float64(x).ravel(), pcts, method="linear")
        np.testing.assert_allclose([float(lo), float(hi)], [o_lo, o_hi], rtol=1e-6, atol=1e-6)


def test_running_scale_matches_oracle_over_five_batches():
    rs = RunningScale()
    s = rs.init()
    assert s.shape == () and s.dtype == jnp.float32 and float(s) == 1.0
    update = jax.jit(rs.update)
    oracle = 1.0
    floored = []
    for x in _batches():
        p5, p95 = np.percentile(np.float64(x).ravel(), [5.0, 95.0])
        target = max(1.0, p95 - p5)
        floored.append(p95 - p5 < 1.0)
        oracle = 0.01 * target + 0.99 * oracle
        s = update(s, jnp.asarray(x))
        assert s.shape == () and s.dtype == jnp.float32
        np.testing.assert_allclose(float(s), oracle, rtol=2e-6)
    assert floored == [False, False, True, False, False]  # the floor was exercised


def test_running_scale_floor_and_update_before_divide():
    rs = RunningScale(tau=0.5)
    # constant batch: spread 0 -> target floored at 1; from 1 the scale stays exactly 1
    s = rs.update(rs.init(), jnp.full((8, 1), 3.0))
    assert float(s) == 1.0
    # from below 1 the floor pulls the scale up towards 1
    s = rs.update(jnp.float32(0.2), jnp.zeros((4,)))
    np.testing.assert_allclose(float(s), 0.5 * 1.0 + 0.5 * 0.2, rtol=1e-7)
    # update-then-divide: the divisor is the updated value
    q = jnp.arange(101.0)  # p5 = 5, p95 = 95 -> target 90
    s = rs.update(rs.init(), q)
    np.testing.assert_allclose(float(s), 0.5 * 90.0 + 0.5 * 1.0, rtol=1e-7)
    np.testing.assert_allclose(np.asarray(q / s), np.arange(101.0) / 45.5, rtol=1e-6)


def test_running_scale_per_group_matches_oracle_and_keeps_absent_groups():
    """T49's what-if: each group's scale steps on its own rows only (the same oracle as
    above on each group's subset, hence the same tolerance); group 3 has no rows and keeps
    its value bit for bit; a group's rows' order and the other groups' rows do not matter."""
    rs = RunningScale()
    rng = np.random.default_rng(3)
    ids = np.repeat(np.arange(3), [40, 9, 1])
    spread = np.array([50.0, 0.1, 7.0])[ids]  # group 1 is floored, group 2 is one row
    x = np.float32(rng.standard_normal((50, 1)) * spread[:, None])
    values = np.float32([1.0, 2.5, 1.2, 3.0])
    got = jax.jit(rs.update_per_group)(jnp.asarray(values), jnp.asarray(x), jnp.asarray(ids))
    assert got.shape == (4,) and got.dtype == jnp.float32
    for k in range(3):
        p5, p95 = np.percentile(np.float64(x[ids == k]).ravel(), [5.0, 95.0])
        oracle = 0.01 * max(1.0, p95 - p5) + 0.99 * values[k]
        np.testing.assert_allclose(float(got[k]), oracle, rtol=2e-6, err_msg=f"group {k}")
    assert float(got[3]) == float(values[3])
    one = rs.update(jnp.float32(values[0]), jnp.asarray(x[ids == 0]))
    np.testing.assert_allclose(float(got[0]), float(one), rtol=1e-7)  # the shared step's
    perm = rng.permutation(50)
    again = rs.update_per_group(jnp.asarray(values), jnp.asarray(x[perm]), jnp.asarray(ids[perm]))
    np.testing.assert_allclose(np.asarray(again), np.asarray(got), rtol=1e-7)


def test_running_scale_custom_percentiles():
    rs = RunningScale(tau=1.0, percentiles=(25.0, 75.0))
    s = rs.update(rs.init(), jnp.arange(101.0))
    np.testing.assert_allclose(float(s), 50.0, rtol=1e-7)


def test_return_normalizer_matches_oracle_over_five_batches():
    rn = ReturnNormalizer()
    st = rn.init()
    assert isinstance(st, ReturnNormState)
    assert float(st.lo) == 0.0 and float(st.hi) == 0.0
    off, scale = rn.scale(st)
    assert float(off) == 0.0 and float(scale) == 1.0  # hi - lo = 0 -> limit
    update = jax.jit(rn.update)
    lo = hi = 0.0
    scales = []
    # spreads grow from ~0 to thousands, so hi - lo crosses the limit within 5 updates
    batches = [b * f for b, f in zip(_batches(2), (0.01, 0.1, 1.0, 10.0, 1.0), strict=True)]
    for x in batches:
        p5, p95 = np.percentile(np.float64(x).ravel(), [5.0, 95.0])
        lo = 0.01 * p5 + 0.99 * lo
        hi = 0.01 * p95 + 0.99 * hi
        st = update(st, jnp.asarray(x))
        off, scale = jax.jit(rn.scale)(st)
        np.testing.assert_allclose([float(st.lo), float(st.hi)], [lo, hi], rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(float(off), lo, rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(float(scale), max(1.0, hi - lo), rtol=2e-6)
        scales.append(hi - lo)
    assert min(scales) < 1.0 < max(scales)  # both branches of max(limit, .) exercised


def test_return_normalizer_parameters_and_update_then_read():
    rn = ReturnNormalizer(rate=0.5, limit=2.0, percentiles=(10.0, 90.0))
    x = jnp.arange(11.0)  # p10 = 1, p90 = 9
    st = rn.update(rn.init(), x)
    np.testing.assert_allclose([float(st.lo), float(st.hi)], [0.5, 4.5], rtol=1e-6)
    off, scale = rn.scale(st)
    np.testing.assert_allclose([float(off), float(scale)], [0.5, 4.0], rtol=1e-6)
    st = rn.update(st, jnp.zeros((3, 2)))
    off, scale = rn.scale(st)
    np.testing.assert_allclose([float(off), float(scale)], [0.25, 2.0], rtol=1e-6)  # floor


def test_return_norm_state_is_a_pytree():
    st = ReturnNormalizer().init()
    leaves = jax.tree.leaves(st)
    assert len(leaves) == 2
    doubled = jax.tree.map(lambda v: v + 1.0, st)
    assert isinstance(doubled, ReturnNormState) and float(doubled.hi) == 1.0
