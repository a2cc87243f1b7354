"""DreamerV3 ``compute_dtype``: resolution, the config and run-name rules, and what computes in
bfloat16 (deviation D30; the numbers against the reference are test_parity_bf16.py's).

The dtype checks trace with ``jax.eval_shape`` (nothing is compiled): float32 parameters,
optimizer state, slow critic, loss and gradients; bfloat16 latents, embedding and imagined
actions; float32 head outputs; float32 write-back and carried latents holding bf16 values.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.common.blocks import Dense, cast
from agents.dreamerv3 import train as T
from agents.dreamerv3.behavior import imagine
from agents.dreamerv3.config import resolve_compute_dtype
from agents.dreamerv3.world_model import observe_sequence
from tests.agents.dreamerv3.conftest import B, random_batch, tiny_config, tiny_nets
from tests.agents.dreamerv3.conftest import T as LENGTH

F32, BF16 = jnp.dtype("float32"), jnp.dtype("bfloat16")


@pytest.mark.parametrize(
    ("setting", "backend", "resolved"),
    [
        ("auto", "cpu", "float32"),
        ("auto", "gpu", "bfloat16"),
        ("auto", "cuda", "bfloat16"),
        ("auto", "tpu", "bfloat16"),
        ("float32", "gpu", "float32"),
        ("bfloat16", "cpu", "bfloat16"),
    ],
)
def test_resolve_compute_dtype(setting: str, backend: str, resolved: str) -> None:
    assert resolve_compute_dtype(setting, backend) == resolved


def test_unknown_compute_dtype_is_refused() -> None:
    with pytest.raises(ValueError, match="compute_dtype"):
        tiny_config(compute_dtype="float16")
    with pytest.raises(ValueError, match="compute_dtype"):
        resolve_compute_dtype("half", "cpu")


def test_auto_is_float32_on_this_cpu_and_the_networks_follow_the_config() -> None:
    assert jax.default_backend() == "cpu"
    assert tiny_nets(False).dtype == F32  # the default, "auto"
    assert tiny_nets(False, compute_dtype="bfloat16").dtype == BF16
    assert tiny_nets(False, compute_dtype="float32").dtype == F32


def test_compute_dtype_names_a_run_only_away_from_its_default() -> None:
    """``agent.compute_dtype=auto`` keeps the pinned run name (the field is declared
    ``added_later``); another value is part of the identity."""
    from launcher.cli import compose_spec
    from launcher.config.identity import identity
    from tests.launcher.test_launcher_config import PINNED_RUN_NAMES

    job = "agent=dreamerv3 protocol=smoke"
    pinned = PINNED_RUN_NAMES[job]
    assert compose_spec([*job.split(), "agent.compute_dtype=auto"]).run_name == pinned
    bf16 = compose_spec([*job.split(), "agent.compute_dtype=bfloat16"])
    assert bf16.run_name != pinned and identity(bf16)["agent"]["compute_dtype"] == "bfloat16"
    assert "compute_dtype" not in identity(compose_spec(job.split()))["agent"]


def test_dense_computes_in_its_dtype_from_float32_params() -> None:
    """``Dense(dtype=bfloat16)``: float32 params; input, kernel and bias rounded to bf16; the
    product rounded to bf16, then the bias added in bf16 (as the reference's ``x @ kernel``,
    ``x += bias``, ``nets.py:629-634``): two roundings, ``U |x k| + U |y|`` with U = 2^-8,
    plus the float32 accumulation of the 6 products (exact products of 8-bit significands, 5
    additions: at most 5 x 2^-24 of the sum of their magnitudes), to first order."""
    x = jax.random.normal(jax.random.key(0), (4, 6))
    layer = Dense(3, bias_init=jax.nn.initializers.normal(1.0), dtype=jnp.bfloat16)
    params = layer.init(jax.random.key(1), x)["params"]
    assert _dtypes(params) == {F32}
    y = layer.apply({"params": params}, x)
    assert y.dtype == BF16
    r = lambda v: np.asarray(jnp.asarray(v, BF16), np.float64)  # noqa: E731
    terms = r(x)[:, :, None] * r(params["kernel"])[None]
    exact = terms.sum(1) + r(params["bias"])
    bound = 2.0**-8 * (np.abs(terms.sum(1)) + np.abs(exact)) + 5 * 2.0**-24 * np.abs(terms).sum(1)
    err = np.abs(np.asarray(y, np.float64) - exact)
    assert np.all(err <= bound * (1 + 2.0**-7)), (err / bound).max()  # 1 + 2U: second order
    assert cast(x, jnp.float32) is x and cast(x, None) is x


def _dtypes(tree) -> set:
    return {x.dtype for x in jax.tree_util.tree_leaves(tree)}


@pytest.mark.parametrize("discrete", [False, True], ids=["cont", "disc"])
def test_what_computes_in_bfloat16(discrete: bool) -> None:
    nets = tiny_nets(discrete, compute_dtype="bfloat16")
    batch = random_batch(nets)
    key = jax.random.key(0)
    state = jax.eval_shape(lambda k: T.init_train_state(nets, k), key)
    noise = jax.eval_shape(lambda k: T.draw_train_noise(nets, k, B, LENGTH), key)
    assert _dtypes(state.params) == _dtypes(state.slow_critic) == {F32}
    assert _dtypes(state.opt_state) <= {F32, jnp.dtype("int32")}

    last, post = jax.eval_shape(
        lambda p, n: observe_sequence(nets, p, batch, n), state.params, noise.post
    )
    assert post.deter.dtype == post.stoch.dtype == post.embed.dtype == BF16
    assert last["deter"].dtype == last["stoch"].dtype == BF16
    assert post.logits.dtype == F32  # upcast before the distribution (nets.py:220)
    traj = jax.eval_shape(
        lambda p, po, n: imagine(nets, p, po, n.imag_stoch, n.imag_act), state.params, post, noise
    )
    assert _dtypes(traj) == {BF16}  # imagined latents and the cast actions (agent.py:256, 275)
    feat = jnp.zeros((2, nets.cfg.feat_size), BF16)
    for module, name in ((nets.reward, "rew"), (nets.cont, "con"), (nets.decoder, "dec")):
        out = jax.eval_shape(lambda p, m=module: m.apply({"params": p}, feat), state.params[name])
        assert out.dtype == F32, name
    dist = jax.eval_shape(lambda p: nets.actor.apply({"params": p}, feat), state.params["actor"])
    assert _dtypes(dist) == {F32}

    new, outs, metrics = jax.eval_shape(
        lambda s, n: T.train_step(nets, s, batch, n, parity=True), state, noise
    )
    assert _dtypes(new.params) == _dtypes(new.slow_critic) == _dtypes(outs["grads"]) == {F32}
    assert new.retnorm.lo.dtype == new.retnorm.hi.dtype == F32
    assert outs["replay_deter"].dtype == outs["carry"].deter.dtype == F32
    assert _dtypes(outs["losses"]) == {F32} and _dtypes(metrics) == {F32}


def test_bf16_policy_step_carries_float32_holding_bf16_values() -> None:
    """The policy carry and the stored ``deter`` stay float32 (the collector's carry and the
    replay keep one dtype), and their values are bf16 values, held exactly."""
    nets = tiny_nets(False, compute_dtype="bfloat16")
    params, _ = jax.jit(nets.init)(jax.random.key(0))
    zero = T.init_carry(nets, 4)
    keys = jax.random.split(jax.random.key(1), 4)
    carry = T.Carry(  # a float32 carry that is not bf16-exact: the step casts it
        deter=jax.random.normal(keys[0], zero.deter.shape),
        stoch=zero.stoch.at[:, :, 0].set(1.0),
        prevact=jax.random.normal(keys[1], zero.prevact.shape),
    )
    noise = T.draw_policy_noise(nets, keys[2], 4)
    obs = jax.random.normal(keys[3], (4, nets.obs_size))
    act, outs, carry = jax.jit(T.policy_step, static_argnums=0)(
        nets, params, carry, obs, jnp.zeros((4,), bool), noise
    )
    deter = np.asarray(carry.deter)
    assert carry.deter.dtype == outs["deter"].dtype == act.dtype == F32
    np.testing.assert_array_equal(deter, deter.astype(jnp.bfloat16).astype(np.float32))
    assert np.abs(deter).max() > 0  # a real step, not the zero carry
