"""``launcher.program.over_seeds``: a one-seed function over the seed axis, with shared
arguments; on CPU a loop whose every seed runs the unbatched program."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from launcher.program import over_seeds


def _step(state: dict, shared: jax.Array) -> tuple[dict, jax.Array]:
    h = jnp.tanh(state["x"] @ shared)  # [rows, k] @ [k, k]
    return {"x": h, "n": state["n"] + 1}, jnp.sum(h * h)


def _seeded(n_seeds: int) -> tuple[dict, jax.Array]:
    keys = jax.random.split(jax.random.key(0), n_seeds + 1)
    x = jax.vmap(lambda k: jax.random.normal(k, (8, 16)))(keys[:-1])
    shared = jax.random.normal(keys[-1], (16, 16)) / 4
    return {"x": x, "n": jnp.arange(n_seeds)}, shared


def test_each_seed_gets_exactly_its_own_unbatched_result():
    state, shared = _seeded(3)
    out_state, out_m = jax.jit(over_seeds(_step, (0, None)))(state, shared)
    one = jax.jit(_step)
    for i in range(3):
        want_state, want_m = one(jax.tree.map(lambda a, i=i: a[i], state), shared)
        np.testing.assert_array_equal(out_state["x"][i], want_state["x"])
        assert int(out_state["n"][i]) == int(want_state["n"]) == i + 1
        np.testing.assert_array_equal(out_m[i], want_m)


def test_on_cpu_the_seeds_are_a_loop_of_unbatched_dots():
    assert jax.default_backend() == "cpu"
    state, shared = _seeded(2)
    jaxpr = jax.make_jaxpr(over_seeds(_step, (0, None)))(state, shared)
    (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
    assert eqn.params["length"] == 2
    body = eqn.params["jaxpr"].jaxpr
    (dot,) = [e for e in body.eqns if e.primitive.name == "dot_general"]
    (_, (lhs_batch, rhs_batch)) = dot.params["dimension_numbers"]
    assert lhs_batch == rhs_batch == ()  # no seed batch dimension in the matmul


def test_default_axes_map_every_argument():
    x = jnp.arange(6.0).reshape(3, 2)
    y = jnp.ones((3, 2))
    out = jax.jit(over_seeds(lambda a, b: a * b + 1))(x, y)
    np.testing.assert_array_equal(out, x * y + 1)
