"""Oracle tests for agents/common/blocks.py (docs/design.md §6, D23).

Initializer statistics are checked against closed-form moments of the (truncated) normal;
layers against float64 NumPy forward passes written from the formulas.
"""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.common.blocks import (
    ACTIVATIONS,
    Dense,
    NormedMLP,
    RMSNorm,
    activation,
    dense_matmul,
    dreamerv3_kernel_init,
    linear,
    mish,
    tdmpc2_kernel_init,
)

N_SAMPLES = (250, 4000)  # 1M weights, fan_in 250


def _phi(x):
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _truncated_std_normal_moments(a):
    """E[X^2], E[X^4] of a standard normal truncated to [-a, a] (integration by parts)."""
    z = math.erf(a / math.sqrt(2.0))
    m2 = 1.0 - 2.0 * a * _phi(a) / z
    m4 = 3.0 * m2 - 2.0 * a**3 * _phi(a) / z
    return m2, m4


def _moments(w):
    w = np.asarray(w, np.float64).ravel()
    var = np.mean(w**2)
    return math.sqrt(var), np.mean(w**4) / var**2


# ----------------------------------------------------------------------------- initializers
@pytest.mark.parametrize("outscale", [1.0, 0.5])
def test_dreamerv3_kernel_init_is_fan_in_truncated_normal(outscale):
    w = dreamerv3_kernel_init(outscale)(jax.random.key(0), N_SAMPLES, jnp.float32)
    assert w.shape == N_SAMPLES and w.dtype == jnp.float32
    target_std = outscale / math.sqrt(N_SAMPLES[0])
    m2, m4 = _truncated_std_normal_moments(2.0)
    assert math.sqrt(m2) == pytest.approx(0.87962566, rel=1e-7)
    std, kurt = _moments(w)
    assert std == pytest.approx(target_std, rel=5e-3)
    assert kurt == pytest.approx(m4 / m2**2, abs=0.02)  # 2.36, a normal would give 3
    bound = 2.0 / math.sqrt(m2) * target_std  # truncation at +-2 of the unit normal
    w_abs = np.abs(np.asarray(w))
    assert w_abs.max() <= bound * (1 + 1e-6)
    assert w_abs.max() >= 0.99 * bound
    assert abs(float(np.mean(w))) < 5 * target_std / 1000


def test_dreamerv3_kernel_init_zero_outscale_gives_zeros():
    w = dreamerv3_kernel_init(0.0)(jax.random.key(1), (16, 8), jnp.float32)
    np.testing.assert_array_equal(np.asarray(w), np.zeros((16, 8)))


def test_dreamerv3_kernel_init_uses_dense_fan_in():
    dense = linear(512, dreamerv3_kernel_init())
    params = dense.init(jax.random.key(2), jnp.ones((1, 400)))["params"]
    std, _ = _moments(params["kernel"])
    assert std == pytest.approx(1.0 / math.sqrt(400), rel=0.01)  # not 1/sqrt(512)


def test_tdmpc2_kernel_init_is_untruncated_normal():
    w = np.asarray(tdmpc2_kernel_init()(jax.random.key(3), N_SAMPLES, jnp.float32))
    assert w.dtype == np.float32
    std, kurt = _moments(w)
    assert std == pytest.approx(0.02, rel=5e-3)
    assert kurt == pytest.approx(3.0, abs=0.03)
    frac_2sigma = np.mean(np.abs(w) > 0.04)
    assert frac_2sigma == pytest.approx(1.0 - math.erf(2.0 / math.sqrt(2.0)), abs=0.002)  # 4.55%
    assert np.abs(w).max() > 4 * 0.02  # jax truncated_normal(0.02) would stop at ~2.3 sigma
    std_fan = np.std(np.asarray(tdmpc2_kernel_init()(jax.random.key(4), (4000, 8))))
    assert std_fan == pytest.approx(0.02, rel=0.03)  # independent of the fan-in


def test_linear_builds_dense():
    dense = linear(6, tdmpc2_kernel_init(), name="fc")
    assert isinstance(dense, Dense) and dense.features == 6 and dense.name == "fc"
    # the same params as flax's nn.Dense: names, shapes and init draws
    flax_dense = nn.Dense(6, kernel_init=tdmpc2_kernel_init(), name="fc")
    ours, theirs = (m.init(jax.random.key(5), jnp.ones((2, 3))) for m in (dense, flax_dense))
    jax.tree.map(np.testing.assert_array_equal, ours, theirs)
    params = dense.init(jax.random.key(5), jnp.ones((2, 3)))["params"]
    assert params["kernel"].shape == (3, 6)
    np.testing.assert_array_equal(np.asarray(params["bias"]), np.zeros(6))
    no_bias = linear(6, tdmpc2_kernel_init(), use_bias=False)
    assert "bias" not in no_bias.init(jax.random.key(5), jnp.ones((2, 3)))["params"]
    ones_bias = linear(6, tdmpc2_kernel_init(), bias_init=nn.initializers.ones)
    p1 = ones_bias.init(jax.random.key(5), jnp.ones((2, 3)))["params"]
    np.testing.assert_array_equal(np.asarray(p1["bias"]), np.ones(6))


def test_dense_matmul_value_and_gradients_match_float64_oracle():
    """``dense_matmul`` and its hand-written VJP against float64 NumPy on ``[4, 37, 19]``
    inputs: every element of the value, dx and dW is a sum of ``n`` float32 products
    (n = 19 inputs, 11 outputs, 148 rows), so its error is at most ``n u sum |terms|``
    (u = 2^-24, first order, any summation order)."""
    rng = np.random.default_rng(3)
    x = np.float32(rng.standard_normal((4, 37, 19)))
    w = np.float32(rng.standard_normal((19, 11)))
    g = np.float32(rng.standard_normal((4, 37, 11)))
    y, vjp = jax.vjp(jax.jit(dense_matmul), jnp.asarray(x), jnp.asarray(w))
    dx, dw = vjp(jnp.asarray(g))
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    rows_x, rows_g = x64.reshape(-1, 19), g64.reshape(-1, 11)
    u = 2.0**-24
    for ours, exact, bound in (
        (y, x64 @ w64, 19 * u * (np.abs(x64) @ np.abs(w64))),
        (dx, g64 @ w64.T, 11 * u * (np.abs(g64) @ np.abs(w64.T))),
        (dw, rows_x.T @ rows_g, 148 * u * (np.abs(rows_x.T) @ np.abs(rows_g))),
    ):
        assert ours.shape == exact.shape
        assert np.all(np.abs(np.asarray(ours, np.float64) - exact) <= bound)


# ----------------------------------------------------------------------------- activations
def _np_softplus(x):
    return np.logaddexp(0.0, x)


NP_ACTS = {
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "mish": lambda x: x * np.tanh(_np_softplus(x)),
    "relu": lambda x: np.maximum(x, 0.0),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "tanh": np.tanh,
    "identity": lambda x: x,
}


@pytest.mark.parametrize("name", sorted(NP_ACTS))
def test_activations_match_oracles(name):
    x = np.float32(np.concatenate([np.linspace(-30, 30, 301), [0.0, -1e-3, 1e-3]]))
    got = np.asarray(activation(name)(jnp.asarray(x)))
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, NP_ACTS[name](np.float64(x)), rtol=2e-6, atol=1e-7)


def test_mish_oracle_values():
    assert set(ACTIVATIONS) == set(NP_ACTS)
    x = jnp.asarray([-5.0, -1.0, 0.0, 0.5, 1.0, 25.0], jnp.float32)
    oracle = [-5 * math.tanh(math.log1p(math.exp(-5.0))), -1 * math.tanh(math.log1p(math.exp(-1)))]
    oracle += [0.0, 0.5 * math.tanh(math.log1p(math.exp(0.5))), math.tanh(math.log1p(math.e))]
    oracle += [25.0 * math.tanh(math.log1p(math.exp(25.0)))]
    np.testing.assert_allclose(np.asarray(mish(x)), oracle, rtol=2e-6)
    assert float(mish(jnp.float32(1.0))) == pytest.approx(0.8650983882673103, rel=1e-6)


def test_mish_derivative_matches_float64_oracle():
    # d/dx x tanh(sp(x)) = tanh(sp) + x (1 - tanh(sp)^2) sigmoid(x), sp = softplus
    x = np.float32(np.concatenate([np.linspace(-60, 60, 12_001), [-1.1924, 19.99, 20.01]]))
    xd = np.float64(x)
    th = np.tanh(_np_softplus(xd))
    oracle = th + xd * (1.0 - th * th) / (1.0 + np.exp(-xd))
    got = np.asarray(jax.jit(jax.vmap(jax.grad(mish)))(jnp.asarray(x)))
    np.testing.assert_allclose(got, oracle, rtol=1e-5, atol=2e-7)
    # forward through the custom rule equals the primal function
    y, _ = jax.jvp(mish, (jnp.asarray(x),), (jnp.ones_like(x),))
    np.testing.assert_array_equal(np.asarray(y), np.asarray(jax.jit(mish)(jnp.asarray(x))))


def test_unknown_activation_lists_valid_names():
    with pytest.raises(ValueError, match="silu") as err:
        activation("gelu_fancy")
    for name in NP_ACTS:
        assert name in str(err.value)


# ----------------------------------------------------------------------------- norms
def _np_rms(x, scale, eps):
    x = np.asarray(x, np.float64)
    return x / np.sqrt(np.mean(x**2, -1, keepdims=True) + eps) * scale


def _np_layer(x, scale, bias, eps):
    x = np.asarray(x, np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * scale + bias


def test_rmsnorm_matches_oracle():
    rng = np.random.default_rng(0)
    x = np.float32(rng.standard_normal((3, 5, 16)) * 0.01)  # mean(x^2) ~ eps: eps matters
    norm = RMSNorm()
    params = norm.init(jax.random.key(0), jnp.asarray(x))
    assert jax.tree.map(jnp.shape, params) == {"params": {"scale": (16,)}}
    assert params["params"]["scale"].dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(params["params"]["scale"]), np.ones(16))
    scale = np.float32(rng.uniform(0.5, 1.5, 16))
    out = norm.apply({"params": {"scale": jnp.asarray(scale)}}, jnp.asarray(x))
    assert out.dtype == jnp.float32 and out.shape == x.shape
    np.testing.assert_allclose(np.asarray(out), _np_rms(x, scale, 1e-4), rtol=2e-6, atol=1e-7)
    wrong_eps = _np_rms(x, scale, 1e-5)
    assert np.max(np.abs(np.asarray(out) - wrong_eps)) > 1e-2


def test_rmsnorm_grouped_layout_matches_flat_oracle():
    """``grouped=True`` on ``x [g, ..., F/g]`` (feature ``k F/g + j`` at ``[k, ..., j]``) is the
    flat norm with the features regrouped: same params, same oracle, same bound as the flat
    test (only the order of the 16-term sum differs)."""
    rng = np.random.default_rng(2)
    g, x = 4, np.float32(rng.standard_normal((3, 5, 16)) * 0.01)
    xg = jnp.asarray(np.moveaxis(x.reshape(3, 5, g, 16 // g), 2, 0))  # [g, 3, 5, F/g]
    norm = RMSNorm(grouped=True)
    params = norm.init(jax.random.key(0), xg)
    assert jax.tree.map(jnp.shape, params) == {"params": {"scale": (16,)}}
    scale = np.float32(rng.uniform(0.5, 1.5, 16))
    out = np.asarray(norm.apply({"params": {"scale": jnp.asarray(scale)}}, xg))
    flat = np.moveaxis(out, 0, 2).reshape(3, 5, 16)
    np.testing.assert_allclose(flat, _np_rms(x, scale, 1e-4), rtol=2e-6, atol=1e-7)
    # the statistics span the groups: normalising each group alone is measurably different
    per_group = _np_rms(x.reshape(3, 5, g, 4), scale.reshape(g, 4), 1e-4).reshape(3, 5, 16)
    assert np.max(np.abs(flat - per_group)) > 1e-2


def test_rmsnorm_bf16_input_bf16_output_with_f32_statistics():
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((64, 48)) * 3.0, jnp.bfloat16)
    scale = jnp.asarray(rng.uniform(0.5, 1.5, 48), jnp.float32)
    out = RMSNorm().apply({"params": {"scale": scale}}, x)
    assert out.dtype == jnp.bfloat16
    # f32 statistics: exactly the f32 computation on the upcast input, rounded once to bf16
    ref32 = RMSNorm().apply({"params": {"scale": scale}}, x.astype(jnp.float32))
    np.testing.assert_array_equal(
        np.asarray(out.astype(jnp.float32)), np.asarray(ref32.astype(jnp.bfloat16), np.float32)
    )
    # ... and within one bf16 rounding of a float64 oracle
    oracle = _np_rms(np.asarray(x.astype(jnp.float32)), np.asarray(scale), 1e-4)
    np.testing.assert_allclose(np.asarray(out, np.float32), oracle, rtol=2**-8, atol=1e-6)


# ----------------------------------------------------------------------------- NormedMLP
def _np_mlp(params, x, layers, act, norm, eps, masks=None):
    h = np.asarray(x, np.float64)
    for i in range(layers):
        d = params[f"dense_{i}"]
        h = h @ np.float64(d["kernel"]) + np.float64(d["bias"])
        if i == 0 and masks is not None:
            h = h * masks
        n = params[f"norm_{i}"]
        if norm == "rms":
            h = _np_rms(h, np.float64(n["scale"]), eps)
        else:
            h = _np_layer(h, np.float64(n["scale"]), np.float64(n["bias"]), eps)
        h = NP_ACTS[act](h)
    return h


def _random_params(params, rng, scale=1.0):
    """Replace every leaf by random float32 values (norm scales around 1)."""
    out = {}
    for name, sub in params.items():
        out[name] = {}
        for k, v in sub.items():
            if name.startswith("norm") and k == "scale":
                val = rng.uniform(0.5, 1.5, v.shape)
            else:
                val = rng.standard_normal(v.shape) * scale
            out[name][k] = jnp.asarray(val, jnp.float32)
    return out


@pytest.mark.parametrize(
    "norm, act, expected_norm_leaves",
    [("rms", "silu", {"scale"}), ("layer", "mish", {"scale", "bias"})],
)
def test_normed_mlp_shapes_and_param_names(norm, act, expected_norm_leaves):
    mlp = NormedMLP(layers=3, units=12, act=act, norm=norm)
    x = jnp.ones((2, 7, 5))
    params = jax.jit(mlp.init)(jax.random.key(0), x)["params"]
    assert set(params) == {"dense_0", "dense_1", "dense_2", "norm_0", "norm_1", "norm_2"}
    assert params["dense_0"]["kernel"].shape == (5, 12)
    assert params["dense_1"]["kernel"].shape == (12, 12)
    assert params["dense_2"]["bias"].shape == (12,)
    for i in range(3):
        assert set(params[f"norm_{i}"]) == expected_norm_leaves
        assert all(v.shape == (12,) for v in params[f"norm_{i}"].values())
        np.testing.assert_array_equal(np.asarray(params[f"dense_{i}"]["bias"]), 0.0)
    assert jax.jit(mlp.apply)({"params": params}, x).shape == (2, 7, 12)
    # default kernel init: DreamerV3 fan-in truncated normal (std 1/sqrt(12) on layer 1)
    k1 = jax.jit(NormedMLP(layers=2, units=256).init)(jax.random.key(1), jnp.ones((1, 256)))
    std, _ = _moments(k1["params"]["dense_1"]["kernel"])
    assert std == pytest.approx(1.0 / 16.0, rel=0.02)


def test_normed_mlp_layernorm_matches_oracle_with_eps_1e_5():
    rng = np.random.default_rng(2)
    mlp = NormedMLP(layers=2, units=10, act="mish", norm="layer", kernel_init=tdmpc2_kernel_init())
    x = np.float32(rng.standard_normal((4, 6)))
    params = _random_params(
        jax.jit(mlp.init)(jax.random.key(0), jnp.asarray(x))["params"], rng, 1e-3
    )
    out = np.asarray(jax.jit(mlp.apply)({"params": params}, jnp.asarray(x)))
    oracle = _np_mlp(params, x, 2, "mish", "layer", 1e-5)
    np.testing.assert_allclose(out, oracle, rtol=1e-5, atol=1e-6)
    # pre-norm variance ~1e-5, so the epsilon is visible: 1e-6 would not match
    assert np.max(np.abs(out - _np_mlp(params, x, 2, "mish", "layer", 1e-6))) > 1e-2
    custom = NormedMLP(layers=2, units=10, act="mish", norm="layer", norm_eps=1e-3)
    out3 = np.asarray(jax.jit(custom.apply)({"params": params}, jnp.asarray(x)))
    np.testing.assert_allclose(
        out3, _np_mlp(params, x, 2, "mish", "layer", 1e-3), rtol=1e-5, atol=1e-6
    )


def test_normed_mlp_rmsnorm_matches_oracle():
    rng = np.random.default_rng(3)
    mlp = NormedMLP(layers=3, units=9)  # DreamerV3 defaults: rms 1e-4, silu
    x = np.float32(rng.standard_normal((2, 3, 4)))
    params = _random_params(
        jax.jit(mlp.init)(jax.random.key(0), jnp.asarray(x))["params"], rng, 0.01
    )
    out = np.asarray(jax.jit(mlp.apply)({"params": params}, jnp.asarray(x)))
    np.testing.assert_allclose(
        out, _np_mlp(params, x, 3, "silu", "rms", 1e-4), rtol=1e-5, atol=1e-6
    )
    assert np.max(np.abs(out - _np_mlp(params, x, 3, "silu", "rms", 1e-5))) > 1e-3


def test_normed_mlp_dropout_first_layer_only():
    rate = 0.5
    mlp = NormedMLP(layers=3, units=32, act="mish", norm="layer", dropout=rate)
    x = jnp.asarray(np.random.default_rng(4).standard_normal((5, 8)), jnp.float32)
    params = jax.jit(mlp.init)(jax.random.key(0), x)["params"]
    assert "dropout_0" not in params  # no parameters
    det = jax.jit(mlp.apply)({"params": params}, x)
    with pytest.raises(Exception, match="dropout"):  # stochastic pass needs a dropout rng
        mlp.apply({"params": params}, x, deterministic=False)

    @jax.jit
    def stochastic(key):
        return mlp.apply(
            {"params": params},
            x,
            deterministic=False,
            rngs={"dropout": key},
            capture_intermediates=True,
            mutable=["intermediates"],
        )

    out_a, inter_a = stochastic(jax.random.key(1))
    out_b, _ = stochastic(jax.random.key(2))
    assert not np.allclose(np.asarray(out_a), np.asarray(out_b))
    assert not np.allclose(np.asarray(out_a), np.asarray(det))
    inter = inter_a["intermediates"]
    assert "dropout_0" in inter and not any(
        k.startswith("dropout_") and k != "dropout_0" for k in inter
    )
    h0 = np.asarray(inter["dense_0"]["__call__"][0], np.float64)
    d0 = np.asarray(inter["dropout_0"]["__call__"][0], np.float64)
    kept = d0 != 0
    assert 0.3 < kept.mean() < 0.7
    np.testing.assert_allclose(d0[kept], h0[kept] / (1 - rate), rtol=1e-6)
    # the rest of the network is deterministic given the first layer's mask
    oracle = _np_mlp(params, np.asarray(x), 3, "mish", "layer", 1e-5, masks=kept / (1 - rate))
    np.testing.assert_allclose(np.asarray(out_a), oracle, rtol=1e-5, atol=1e-5)


def test_normed_mlp_without_dropout_has_no_dropout_layer():
    mlp = NormedMLP(layers=2, units=8, act="mish", norm="layer", dropout=0.0)
    x = jnp.ones((3, 4))
    params = mlp.init(jax.random.key(0), x)["params"]
    det = mlp.apply({"params": params}, x)
    # no Dropout module: a stochastic pass needs no rng and changes nothing
    out, inter = mlp.apply(
        {"params": params}, x, deterministic=False, capture_intermediates=True, mutable=True
    )
    np.testing.assert_array_equal(np.asarray(out), np.asarray(det))
    assert not any(k.startswith("dropout") for k in inter["intermediates"])


def test_normed_mlp_rejects_unknown_norm_and_act():
    with pytest.raises(ValueError, match="norm"):
        NormedMLP(layers=1, units=4, norm="batch").init(jax.random.key(0), jnp.ones((1, 2)))
    with pytest.raises(ValueError, match="valid names"):
        NormedMLP(layers=1, units=4, act="swish2").init(jax.random.key(0), jnp.ones((1, 2)))
