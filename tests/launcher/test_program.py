"""``launcher.loop.program.over_seeds``: a one-seed function over the seed axis, with shared
arguments; on CPU a loop whose every seed runs the unbatched program. Both layouts
(``batched``, docs/design.md §2.6) run here and agree, also for the fake
agent's whole seed program."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from launcher.loop.program import SeedProgram, over_seeds


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


def test_both_layouts_give_every_seed_its_unbatched_result():
    """``batched=True`` (vmap, the accelerators' default) against ``batched=False`` (the
    loop): the batched program computes each seed's ``tanh(x @ shared)`` as one
    ``[S * 8, 16] @ [16, 16]`` dot, a different XLA:CPU kernel than eight-row dots, so
    the two may round differently. Each entry is a 16-term float32 dot product; any two
    summation orders differ by at most 2 * 15 * 2^-24 * sum_k |x_k w_k| (the standard
    recursive-summation bound, twice), and tanh (1-Lipschitz) does not enlarge it;
    the sum of squares adds 2 * 8 * 16 * 2^-24 relative."""
    state, shared = _seeded(3)
    loop = jax.jit(over_seeds(_step, (0, None), batched=False))(state, shared)
    vmap = jax.jit(over_seeds(_step, (0, None), batched=True))(state, shared)
    u = 2.0**-24
    terms = np.einsum("sik,kj->sij", np.abs(np.asarray(state["x"])), np.abs(np.asarray(shared)))
    tol_h = 2 * 15 * u * terms
    h_l, h_v = np.asarray(loop[0]["x"]), np.asarray(vmap[0]["x"])
    # + the tanh approximation's own error at two different inputs (a few ulps each)
    assert np.all(np.abs(h_l - h_v) <= tol_h + 4 * u * np.abs(h_l))
    np.testing.assert_array_equal(loop[0]["n"], vmap[0]["n"])
    # d(sum h^2) <= 2 sum |h| |dh| + the 128-term sum's own rounding
    tol_m = 2 * np.sum(np.abs(h_l) * tol_h, axis=(1, 2)) + 2 * 127 * u * np.sum(h_l**2, (1, 2))
    assert np.all(np.abs(np.asarray(loop[1]) - np.asarray(vmap[1])) <= tol_m)


def test_batched_true_maps_seeds_with_vmap_and_false_with_a_loop():
    state, shared = _seeded(2)
    for batched, scans in ((True, 0), (False, 1)):
        jaxpr = jax.make_jaxpr(over_seeds(_step, (0, None), batched=batched))(state, shared)
        assert sum(e.primitive.name == "scan" for e in jaxpr.jaxpr.eqns) == scans, batched


def test_the_fake_agents_seed_program_is_bit_identical_in_both_layouts():
    """init, two chunks of train and evaluate of the fake agent (tests/launcher/
    launcher_fakes.py) through ``SeedProgram(batched=True)`` and ``(batched=False)``:
    elementwise maths and threefry draws only, which vmap does not reorder, so the states
    and metrics are equal bit for bit."""
    from launcher_fakes import fake_config, make_fake_env, state_arrays

    from launcher.config.validate import resolve
    from launcher.loop import build
    from launcher.loop.program import seed_keys

    spec = resolve(fake_config())
    env = build.make_env(spec, make_fake_env)
    agent = build.make_agent(spec, env)
    init_keys, eval_keys = seed_keys([0, 1])
    out = {}
    for batched in (False, True):
        prog = SeedProgram(agent, 2, shard=False, batched=batched)
        state = prog.init(init_keys)
        state, m1 = prog.train(state, jnp.arange(0, 11))
        state, m2 = prog.train(state, jnp.arange(11, 22))
        state, ev = prog.evaluate(state, eval_keys)
        out[batched] = (state_arrays(state), m1, m2, ev)
    (s0, *rest0), (s1, *rest1) = out[False], out[True]
    assert s0.keys() == s1.keys()
    for k in s0:
        np.testing.assert_array_equal(s0[k], s1[k], err_msg=k)
    for a, b in zip(jax.tree.leaves(rest0), jax.tree.leaves(rest1), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert float(np.asarray(out[False][0][".tick"])[0]) == 22  # both chunks ran
