"""DreamerV3 optimizer (AGC + LaProp + warmup) against a float64 NumPy oracle.

The oracle is written from the reference math (danijar/dreamerv3 2411f7d ``jaxutils.py:660-713``
for the chain, ``jaxutils.py:510-539`` for the warmup), independently of the implementation.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents.dreamerv3.optimizer import grouped, laprop, step_count

jax.config.update("jax_default_matmul_precision", "highest")

U = 2.0**-24  # unit roundoff of float32 (round to nearest)
# Assumed accuracy of XLA's float32 pow(beta, t), in ulps of the result. Not documented by
# XLA; CPU measures <= 0.5 ulp for beta in {0.9, 0.999}, t < 2000.
C_POW = 2.0


@dataclasses.dataclass(frozen=True)
class HP:
    lr: float = 4e-5
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-20
    agc: float = 0.3
    agc_pmin: float = 1e-3
    warmup: int = 1000

    def make(self) -> optax.GradientTransformation:
        return laprop(**dataclasses.asdict(self))


def oracle(params: dict, grads_seq: list[dict], hp: HP) -> list[dict]:
    """Float64 oracle for ``len(grads_seq)`` chained updates at fixed ``params``.

    ``params`` / each ``grads`` are flat dicts of float32 arrays (converted to float64 here).
    Returns per step a dict with ``update``, ``nu``, ``mu`` (dicts of float64 arrays), the
    ``count`` after the step, the per-leaf flag ``clipped`` (AGC scaled that leaf down) and
    elementwise absolute error bounds ``b_update``, ``b_nu``, ``b_mu`` for a float32 evaluation.

    Error bound (first order in u = 2**-24; every float32 op rounds with relative error <= u,
    every decimal hyperparameter is represented with relative error <= u; FMA contraction or
    another summation order only removes or reorders roundings, which the bounds cover):

    - AGC on a leaf of n elements: a norm is n products + an (n-1)-term sum (<= n u on the
      squared norm, any order), halved by sqrt, + u; ``clip * max(pmin, |p|)``: two constants
      + one product; the ratio, ``1 / max(1, .)`` and the product with g: 3 u. In total
      ``e_agc = (n + 8) u`` (relative, also when the max picks the other branch near 1).
    - ``nu = b2 nu + (1 - b2) g^2`` sums two nonnegative terms: ``e_nu' = max(e_nu + 2u,
      2 e_agc + 3u) + u`` (relative).
    - ``1 - b2**t``: float32(b2) is off by <= u relative, so b2**t by t u b2**t, pow adds
      C_POW ulps (an ulp of a value in [0.5, 1) is u), and ``1 - x`` for x in [0.5, 1) is exact
      (Sterbenz; + u anyway); the cancellation amplifies this absolute error by
      ``1 / (1 - b2**t)``: ``e_c2 = (t b2**t + C_POW) u / (1 - b2**t) + u``. This term
      dominates early on (about 1e-4 at t = 1); the same for ``1 - b1**t``.
    - ``nu_hat = nu / c2`` (+ u), ``sqrt(nu_hat) + eps`` (half of it + 2u, both terms >= 0),
      ``r = g / den`` (+ e_agc + u).
    - ``mu = (1 - b1) r + b1 mu`` can cancel, so its error is bounded relative to the running
      magnitude ``M = (1 - b1) |r| + b1 M`` (|mu| <= M): ``|err mu| <= e_mu M`` with
      ``e_mu' = max(e_mu + 2u, e_r + 2u) + u``.
    - ``-lr * w * mu / c1`` with ``w = clip(k / warmup, 0, 1)`` (k exact, one division):
      ``|err| <= (e_mu + e_c1 + 5u) lr w M / c1``.
    """
    b1, b2 = hp.beta1, hp.beta2
    p64 = {k: np.asarray(v, np.float64) for k, v in params.items()}
    nu = {k: np.zeros_like(v) for k, v in p64.items()}
    mu = {k: np.zeros_like(v) for k, v in p64.items()}
    mag = {k: np.zeros_like(v) for k, v in p64.items()}
    e_nu = dict.fromkeys(p64, 0.0)
    e_mu = dict.fromkeys(p64, 0.0)
    out = []
    for k, grads in enumerate(grads_seq):
        t = k + 1
        w = min(max(k / hp.warmup, 0.0), 1.0) if hp.warmup > 0 else 1.0
        c2, c1 = 1.0 - b2**t, 1.0 - b1**t
        e_c2 = (t * b2**t + C_POW) * U / c2 + U
        e_c1 = (t * b1**t + C_POW) * U / c1 + U
        step = {"update": {}, "b_update": {}, "b_nu": {}, "b_mu": {}, "clipped": {}, "count": t}
        for name, p in p64.items():
            g = np.asarray(grads[name], np.float64)
            ratio = np.sqrt(np.sum(g * g)) / (hp.agc * max(hp.agc_pmin, np.sqrt(np.sum(p * p))))
            g = g / max(1.0, ratio)
            step["clipped"][name] = bool(ratio > 1.0)
            e_agc = (g.size + 8) * U
            nu[name] = b2 * nu[name] + (1.0 - b2) * g**2
            e_nu[name] = max(e_nu[name] + 2 * U, 2 * e_agc + 3 * U) + U
            den = np.sqrt(nu[name] / c2) + hp.eps
            r = g / den
            e_r = e_agc + (e_nu[name] + e_c2 + U) / 2 + 2 * U + U
            mu[name] = b1 * mu[name] + (1.0 - b1) * r
            mag[name] = b1 * mag[name] + (1.0 - b1) * np.abs(r)
            e_mu[name] = max(e_mu[name] + 2 * U, e_r + 2 * U) + U
            step["update"][name] = -hp.lr * w * mu[name] / c1
            step["b_update"][name] = (e_mu[name] + e_c1 + 5 * U) * hp.lr * w * mag[name] / c1
            step["b_nu"][name] = e_nu[name] * nu[name]
            step["b_mu"][name] = e_mu[name] * mag[name]
            # The bound must be tight enough to catch any formula slip (>= 0.1% effects).
            assert np.all(step["b_update"][name] <= 1e-3 * hp.lr * w * mag[name] / c1)
        step["nu"] = {n: v.copy() for n, v in nu.items()}
        step["mu"] = {n: v.copy() for n, v in mu.items()}
        out.append(step)
    return out


def _pytree_case(n_steps: int, seed: int = 0) -> tuple[dict, list[dict]]:
    """Flat params (several shapes; ``tiny`` with norm < pmin) and per-step gradients scaled
    so that AGC clips ``w1`` and ``tiny`` (pmin-bound) but not ``b1`` / ``w2``."""
    r = np.random.default_rng(seed)
    params = {
        "w1": r.normal(size=(4, 3)),
        "b1": r.normal(size=(3,)),
        "w2": r.normal(size=(2, 3, 2)),
        "tiny": 1e-6 * r.normal(size=(5,)),
    }
    gscale = {"w1": 3.0, "b1": 0.02, "w2": 0.05, "tiny": 1e-2}
    grads = [
        {n: gscale[n] * r.normal(size=p.shape) for n, p in params.items()} for _ in range(n_steps)
    ]
    f32 = lambda d: {n: np.asarray(v, np.float32) for n, v in d.items()}
    return f32(params), [f32(g) for g in grads]


def _run(hp: HP, params: dict, grads_seq: list[dict]) -> list[tuple[dict, object]]:
    tx = hp.make()
    state = tx.init(params)
    update = jax.jit(tx.update)
    out = []
    for g in grads_seq:
        u, state = update(g, state, params)
        out.append((jax.device_get(u), jax.device_get(state)))
    return out


def _assert_within(actual: np.ndarray, expected: np.ndarray, bound: np.ndarray, what: str) -> None:
    actual = np.asarray(actual, np.float64)
    excess = np.abs(actual - expected) - bound
    assert np.all(excess <= 0), (what, np.max(excess), actual, expected, bound)


@pytest.mark.parametrize(
    "hp",
    [
        HP(warmup=3),  # the reference settings, short warmup
        # Other betas / lr, and eps large enough that its placement (outside the sqrt) matters.
        HP(lr=1e-2, beta1=0.8, beta2=0.99, eps=3e-3, agc=0.5, agc_pmin=1e-2, warmup=3),
    ],
    ids=["reference", "large_eps"],
)
def test_matches_float64_oracle(hp: HP) -> None:
    """5 chained steps: warmup factors 0, 1/3, 2/3, 1, 1. Updates, nu, mu within the derived
    float32 bounds (see :func:`oracle`), counts exact, the first update exactly zero."""
    params, grads_seq = _pytree_case(5)
    ref = oracle(params, grads_seq, hp)
    got = _run(hp, params, grads_seq)

    clipped = ref[0]["clipped"]
    assert clipped["w1"] and clipped["tiny"] and not clipped["b1"] and not clipped["w2"]
    assert np.linalg.norm(params["tiny"]) < hp.agc_pmin  # pmin binds for "tiny"

    for name, u in got[0][0].items():
        np.testing.assert_array_equal(u, np.zeros_like(u), err_msg=name)  # exactly zero
    for k, ((upd, state), r) in enumerate(zip(got, ref, strict=True)):
        agc_s, rms_s, ema_s, scale_s, sched_s = state
        assert agc_s == optax.EmptyState() and scale_s == optax.EmptyState()
        assert int(rms_s.count) == int(ema_s.count) == int(sched_s.count) == k + 1
        assert int(step_count(state)) == k + 1
        for name in params:
            _assert_within(upd[name], r["update"][name], r["b_update"][name], f"update {k} {name}")
            _assert_within(rms_s.nu[name], r["nu"][name], r["b_nu"][name], f"nu {k} {name}")
            _assert_within(ema_s.ema[name], r["mu"][name], r["b_mu"][name], f"mu {k} {name}")
            assert upd[name].dtype == np.float32


def test_eps_1e20_second_step_and_zero_gradient() -> None:
    """eps = 1e-20, warmup 1: step 0 is zero, step 1 (factor 1) matches the oracle; an
    all-zero gradient (also on zero params, where pmin is the only AGC scale) gives zero
    updates and zero state, no NaN, before and after nonzero gradients."""
    hp = HP(warmup=1)
    params, grads_seq = _pytree_case(2, seed=1)
    ref = oracle(params, grads_seq, hp)
    got = _run(hp, params, grads_seq)
    for name in params:
        assert np.all(got[0][0][name] == 0)
        _assert_within(got[1][0][name], ref[1]["update"][name], ref[1]["b_update"][name], name)
        assert np.all(got[1][0][name] != 0)

    zeros = {n: np.zeros_like(g) for n, g in grads_seq[0].items()}
    for p in (params, {n: np.zeros_like(v) for n, v in params.items()}):
        for upd, state in _run(hp, p, [zeros, zeros, zeros]):
            for name in p:
                assert np.all(upd[name] == 0), name
                assert np.all(state[1].nu[name] == 0) and np.all(state[2].ema[name] == 0)
    # A zero gradient after a nonzero one: finite, and zero only where mu is zero (never here).
    (_, _), (upd, _) = _run(hp, params, [grads_seq[0], zeros])
    for name in params:
        assert np.all(np.isfinite(upd[name])) and np.all(upd[name] != 0), name


GROUPS = ("wm", "actor", "critic")


def _coupled_params(seed: int = 2) -> dict:
    r = np.random.default_rng(seed)
    f = lambda *s: jnp.asarray(0.5 * r.normal(size=s), jnp.float32)
    return {
        "wm": {"w": f(3, 4), "b": f(4)},
        "actor": {"w": f(4, 2)},
        "critic": {"w": f(6, 1), "b": f(1)},
    }


def _coupled_loss(params: dict, x: jax.Array) -> jax.Array:
    """The actor depends on the world model's features, the critic on both."""
    h = jnp.tanh(x @ params["wm"]["w"] + params["wm"]["b"])
    a = jnp.tanh(h @ params["actor"]["w"])
    v = jnp.concatenate([h, a], -1) @ params["critic"]["w"] + params["critic"]["b"]
    return jnp.mean((v - 1.0) ** 2) + jnp.mean((a - 0.3) ** 2) + jnp.mean((h - 0.2) ** 2)


def _ulps(a, b) -> float:
    """Largest elementwise distance in float32 ulps (of the larger magnitude)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    spacing = np.spacing(np.maximum(np.abs(a), np.abs(b))).astype(np.float64)
    return float(np.max(np.abs(a.astype(np.float64) - b) / spacing))


def test_three_instances_equal_one_and_sequential_differs() -> None:
    """One laprop over {wm, actor, critic} vs :func:`grouped` of three laprop instances, each
    jitted on its own, on the same joint gradients: updates and nu/mu within 4 ulps, equal
    step counters. Stepping the world model first and recomputing the actor/critic gradients
    after it (a sequential scheme) gives updates far outside that bound."""
    hp = HP(lr=1e-2, warmup=2)
    x = jnp.asarray(np.random.default_rng(3).normal(size=(8, 3)), jnp.float32)
    grad_fn = jax.jit(jax.grad(_coupled_loss))
    one, three = hp.make(), grouped({g: hp.make() for g in GROUPS})
    update_one, update_three = jax.jit(one.update), jax.jit(three.update)
    params0 = _coupled_params()
    params, s_one, s_three = params0, one.init(params0), three.init(params0)
    joint_updates = []
    for k in range(6):
        grads = grad_fn(params, x)
        u_one, s_one = update_one(grads, s_one, params)
        u_three, s_three = update_three(grads, s_three, params)
        for g in GROUPS:
            assert int(step_count(s_three[g])) == int(step_count(s_one)) == k + 1
            for a, b in zip(jax.tree.leaves(u_one[g]), jax.tree.leaves(u_three[g]), strict=True):
                np.testing.assert_array_max_ulp(np.asarray(a), np.asarray(b), maxulp=4)
            for i, field in ((1, "nu"), (2, "ema")):
                a_s = jax.tree.leaves(getattr(s_one[i], field)[g])
                b_s = jax.tree.leaves(getattr(s_three[g][i], field))
                for a, b in zip(a_s, b_s, strict=True):
                    np.testing.assert_array_max_ulp(np.asarray(a), np.asarray(b), maxulp=4)
        joint_updates.append(u_one)
        params = optax.apply_updates(params, u_one)

    tx = hp.make()
    step = jax.jit(tx.update)
    params, states = params0, {g: tx.init(params0[g]) for g in GROUPS}
    worst = 0.0
    for k in range(6):
        grads = grad_fn(params, x)
        u_wm, states["wm"] = step(grads["wm"], states["wm"], params["wm"])
        params = {**params, "wm": optax.apply_updates(params["wm"], u_wm)}
        grads = grad_fn(params, x)  # actor / critic gradients after the world-model step
        for g in ("actor", "critic"):
            u, states[g] = step(grads[g], states[g], params[g])
            params = {**params, g: optax.apply_updates(params[g], u)}
            for a, b in zip(jax.tree.leaves(u), jax.tree.leaves(joint_updates[k][g]), strict=True):
                worst = max(worst, _ulps(a, b))
    assert worst > 1000 * 4, worst


def test_grouped_rejects_mismatched_groups() -> None:
    three = grouped({g: laprop() for g in GROUPS})
    with pytest.raises(ValueError, match="groups"):
        three.init({"wm": {"w": jnp.zeros(2)}, "actor": {"w": jnp.zeros(2)}})
