"""The MPPI planner (docs/design.md §7.3) against a NumPy oracle written from the math.

The oracle runs one decision with every planner step in float64 NumPy; only the world
model's heads (encode / next / reward logits / Q logits of *all* members / pi sample) are
called through ``WorldModel`` as black boxes, and the reward / Q logits are decoded with the
reference's naive ``symexp(sum softmax * bins)`` (``math.py:84-95``). Tiny sizes, random
(non-zero) heads, dropout 0.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.common.distributional import TwoHot
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.planner import PlanNoise, draw_plan_noise, elite_draw, plan
from agents.tdmpc2.world_model import WorldModel

OBS, A = 5, 2
CFG = TDMPC2Config(
    model_size=1,
    enc_dim=16,
    mlp_dim=24,
    latent_dim=16,
    num_q=3,
    dropout=0.0,
    iterations=3,
    num_samples=40,
    num_elites=8,
    num_pi_trajs=6,
).resolve(episode_length=500, action_size=A)


def _perturb(params, key, scale=0.3):
    """Random non-zero params (the init zeroes the reward and Q output kernels)."""
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(key, len(leaves))
    new = [
        x + scale * jax.random.normal(k, x.shape, x.dtype)
        for x, k in zip(leaves, keys, strict=True)
    ]
    return jax.tree_util.tree_unflatten(tree, new)


@pytest.fixture(scope="module")
def setup():
    wm = WorldModel(CFG, OBS, A)
    params = _perturb(wm.init(jax.random.PRNGKey(0)), jax.random.PRNGKey(1))
    run = jax.jit(functools.partial(plan, wm, CFG), static_argnames=("eval_mode",))
    return wm, params, run


# ------------------------------------------------------------------------------ oracle
def _decode_np(logits: np.ndarray, cfg: TDMPC2Config) -> np.ndarray:
    """Reference ``two_hot_inv`` in float64: symexp(sum softmax(logits) * linspace)."""
    x = logits.astype(np.float64)
    p = np.exp(x - x.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    bins = np.linspace(-cfg.vmax, cfg.vmax, cfg.num_bins)
    m = (p * bins).sum(-1)
    return np.sign(m) * np.expm1(np.abs(m))


def oracle_plan(wm, cfg, params, obs, prev_mean, t0, noise, eval_mode):
    """One decision of 5f6fade ``plan`` (``tdmpc2/tdmpc2.py:106-171``) in NumPy; the heads via
    ``wm``."""
    f32 = lambda x: jnp.asarray(np.asarray(x, np.float32))  # noqa: E731
    npy = lambda x: np.asarray(x, np.float64)  # noqa: E731
    H, N, K, P = cfg.horizon, cfg.num_samples, cfg.num_elites, cfg.num_pi_trajs
    nz = jax.tree_util.tree_map(np.asarray, noise)
    z = npy(wm.encode(params, f32(obs)))
    zP = np.repeat(z[None], P, 0)
    pi_actions = np.zeros((H, P, A))
    for t in range(H):
        pi_actions[t] = npy(wm.pi(params, f32(zP), f32(nz.pi_eps[t]))[1])
        if t < H - 1:
            zP = npy(wm.next(params, f32(zP), f32(pi_actions[t])))
    mean = np.zeros((H, A))
    if not t0:
        mean[:-1] = np.asarray(prev_mean)[1:]
    std = np.full((H, A), cfg.max_std)
    zN = np.repeat(z[None], N, 0)
    out = {k: [] for k in ("values", "elite_idxs", "scores", "means", "stds")}
    for i in range(cfg.iterations):
        actions = np.zeros((H, N, A))
        actions[:, :P] = pi_actions
        actions[:, P:] = np.clip(mean[:, None] + std[:, None] * nz.sample_eps[i], -1, 1)
        zt, G, disc = zN, np.zeros(N), 1.0
        for t in range(H):
            G = G + disc * _decode_np(npy(wm.reward(params, f32(zt), f32(actions[t]))), cfg)
            zt = npy(wm.next(params, f32(zt), f32(actions[t])))
            disc *= cfg.gamma
        aH = npy(wm.pi(params, f32(zt), f32(nz.terminal_eps[i]))[1])
        q_all = _decode_np(npy(wm.q(params, f32(zt), f32(aH))), cfg)  # all members [M, N]
        q1, q2 = q_all[nz.q_pair[i]]
        value = np.nan_to_num(G + disc * (q1 + q2) / 2, nan=0.0)
        elite = np.argsort(-value, kind="stable")[:K]
        ev, ea = value[elite], actions[:, elite]
        s = np.exp(cfg.temperature * (ev - ev.max()))
        s /= s.sum()
        mean = (s[None, :, None] * ea).sum(1) / (s.sum() + 1e-9)
        std = np.sqrt((s[None, :, None] * (ea - mean[:, None]) ** 2).sum(1) / (s.sum() + 1e-9))
        std = np.clip(std, cfg.min_std, cfg.max_std)
        for k, v in zip(out, (value, elite, s, mean, std), strict=True):
            out[k].append(v)
    cdf = np.cumsum(s)
    cdf /= cdf[-1]
    k = int(cdf.searchsorted(float(nz.u), side="right"))
    a = ea[0, k].copy()
    if not eval_mode:
        a += std[0] * nz.explore_eps
    return np.clip(a, -1, 1), mean, {k2: np.stack(v) for k2, v in out.items()}, k


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=OBS).astype(np.float32)
    prev = rng.uniform(-1, 1, size=(CFG.horizon, A)).astype(np.float32)
    noise = draw_plan_noise(jax.random.PRNGKey(seed), CFG, A)
    return jnp.asarray(obs), jnp.asarray(prev), noise


@pytest.mark.parametrize("t0", [True, False])
@pytest.mark.parametrize("eval_mode", [True, False])
def test_one_decision_matches_numpy_oracle(setup, t0, eval_mode):
    wm, params, run = setup
    obs, prev, noise = _inputs(3)
    action, mean, info = run(params, obs, prev, jnp.asarray(t0), noise, eval_mode=eval_mode)
    o_action, o_mean, o_info, o_k = oracle_plan(wm, CFG, params, obs, prev, t0, noise, eval_mode)
    # the oracle's elite sets are well separated (no near-ties around the K-th value)
    for v in o_info["values"]:
        srt = np.sort(v)[::-1]
        assert srt[CFG.num_elites - 1] - srt[CFG.num_elites] > 1e-4
    np.testing.assert_array_equal(np.asarray(info["elite_idxs"]), o_info["elite_idxs"])
    np.testing.assert_allclose(info["values"], o_info["values"], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(info["scores"], o_info["scores"], atol=1e-6)
    np.testing.assert_allclose(info["means"], o_info["means"], atol=1e-5)
    np.testing.assert_allclose(info["stds"], o_info["stds"], atol=1e-5)
    np.testing.assert_allclose(mean, o_mean, atol=1e-5)
    assert int(info["elite_choice"]) == o_k
    np.testing.assert_allclose(action, o_action, atol=1e-5)
    assert action.shape == (A,) and mean.shape == (CFG.horizon, A)
    assert info["values"].shape == (CFG.iterations, CFG.num_samples)


def test_warm_start_shift_and_t0_reset(setup):
    """Candidates start at the shifted previous mean (last row 0), or at 0 on t0; std
    restarts at max_std. Read off through a planner with no pi trajectories, one iteration
    and zero candidate noise: every candidate is the initial mean, so the new mean is too."""
    _, params, _ = setup
    obs, prev, _ = _inputs(4)
    cfg = dataclasses.replace(CFG, num_pi_trajs=0, iterations=1)
    wm0 = WorldModel(cfg, OBS, A)
    run0 = jax.jit(functools.partial(plan, wm0, cfg), static_argnames="eval_mode")
    nz = draw_plan_noise(jax.random.PRNGKey(5), cfg, A)
    nz = nz.replace(sample_eps=jnp.zeros_like(nz.sample_eps))
    expected = {True: np.zeros((CFG.horizon, A)), False: np.concatenate([prev[1:], 0 * prev[:1]])}
    for t0, want in expected.items():
        action, mean, info = run0(params, obs, prev, jnp.asarray(t0), nz, eval_mode=True)
        np.testing.assert_allclose(mean, want, atol=1e-6)
        np.testing.assert_allclose(info["stds"][0], cfg.min_std, atol=1e-7)
        np.testing.assert_allclose(action, want[0], atol=1e-6)
    # the sampling std is max_std at every decision (not warm-started): eps = 0.1 moves every
    # candidate to mean + 0.1 max_std
    nz1 = nz.replace(sample_eps=jnp.full_like(nz.sample_eps, 0.1))
    _, mean, _ = run0(params, obs, 0 * prev, jnp.asarray(True), nz1, eval_mode=True)
    np.testing.assert_allclose(mean, np.full((cfg.horizon, A), 0.1 * cfg.max_std), atol=1e-6)


def test_eval_mode_drops_only_the_final_noise(setup):
    wm, params, run = setup
    obs, prev, noise = _inputs(6)
    t0 = jnp.asarray(False)
    a_ev, m_ev, i_ev = run(params, obs, prev, t0, noise, eval_mode=True)
    a_tr, m_tr, i_tr = run(params, obs, prev, t0, noise, eval_mode=False)
    np.testing.assert_array_equal(m_ev, m_tr)
    for k in i_ev:
        np.testing.assert_array_equal(i_ev[k], i_tr[k])
    want = np.clip(np.asarray(a_ev) + np.asarray(i_ev["stds"][-1, 0]) * noise.explore_eps, -1, 1)
    np.testing.assert_allclose(a_tr, want, atol=1e-6)
    assert not np.allclose(a_ev, a_tr)


def _numpy_legacy_choice_index(p: np.ndarray, u: float) -> int:
    """numpy ``RandomState.choice(K, p=p)``'s inverse CDF (legacy mtrand)."""
    cdf = p.astype(np.float64).cumsum()
    cdf /= cdf[-1]
    return int(cdf.searchsorted(u, side="right"))


def test_elite_draw_is_numpys_choice():
    """``elite_draw(score, u)`` picks what ``np.random.choice(K, p=score)`` picks when numpy
    consumes the uniform ``u`` (read from a copy of the RNG state); T41."""
    rng = np.random.default_rng(0)
    draw = jax.jit(jax.vmap(elite_draw))
    n_boundary, trial = 0, 0
    for K in (1, 7, 64):
        ps, us, idx_np = [], [], []
        for _ in range(150):
            logits = rng.normal(size=K) * rng.uniform(0.1, 8)
            p = np.exp(logits - logits.max()).astype(np.float32)
            p /= p.sum()  # float32 scores, as the reference's score.cpu().numpy()
            rs = np.random.RandomState(trial)  # noqa: NPY002  (numpy's legacy RNG)
            u64 = np.random.RandomState(trial).random_sample()  # noqa: NPY002
            idx = int(rs.choice(np.arange(K), p=p))
            assert idx == _numpy_legacy_choice_index(p, u64)
            cdf = np.cumsum(p.astype(np.float64))
            if np.min(np.abs(cdf / cdf[-1] - u64)) < 1e-6:
                n_boundary += 1  # float32 rounding may legitimately flip the index (T41)
            else:
                ps.append(p)
                us.append(np.float32(u64))
                idx_np.append(idx)
            trial += 1
        ours = np.asarray(draw(jnp.asarray(np.stack(ps)), jnp.asarray(np.stack(us))))
        np.testing.assert_array_equal(ours, idx_np)
    assert n_boundary == 0  # none for these seeds
    draw = jax.jit(elite_draw)
    # degenerate: a single elite with all the mass, and u -> 1
    p = np.zeros(8, np.float32)
    p[5] = 1.0
    assert int(draw(jnp.asarray(p), jnp.float32(0.9999999))) == 5
    assert int(draw(jnp.asarray(p), jnp.float32(0.0))) == 5


def test_vmap_over_envs_with_separate_carries(setup):
    wm, params, run = setup
    n = 3
    rng = np.random.default_rng(7)
    obs = jnp.asarray(rng.normal(size=(n, OBS)).astype(np.float32))
    prev = jnp.asarray(rng.uniform(-1, 1, size=(n, CFG.horizon, A)).astype(np.float32))
    t0 = jnp.asarray([True, False, False])
    noise = jax.vmap(lambda k: draw_plan_noise(k, CFG, A))(
        jax.random.split(jax.random.PRNGKey(8), n)
    )
    batched = jax.jit(
        jax.vmap(lambda o, m, t, nz: plan(wm, CFG, params, o, m, t, nz, eval_mode=False)[:2])
    )
    actions, means = batched(obs, prev, t0, noise)
    assert actions.shape == (n, A) and means.shape == (n, CFG.horizon, A)
    for i in range(n):
        nz = jax.tree_util.tree_map(lambda x, i=i: x[i], noise)
        a, m, _ = run(params, obs[i], prev[i], t0[i], nz, eval_mode=False)
        np.testing.assert_allclose(actions[i], a, atol=1e-5)
        np.testing.assert_allclose(means[i], m, atol=1e-5)
    assert not np.allclose(means[1], means[2])


def test_jit_traces_once(setup):
    wm, params, _ = setup
    traces = []

    def counted(p, o, m, t, nz):
        traces.append(1)
        return plan(wm, CFG, p, o, m, t, nz, eval_mode=False)

    f = jax.jit(counted)
    for seed in range(3):
        obs, prev, noise = _inputs(seed)
        action, mean, _ = f(params, obs, prev, jnp.asarray(seed == 0), noise)
        assert np.all(np.isfinite(action)) and np.all(np.abs(action) <= 1)
    assert len(traces) == 1


def test_dropout_key_is_used_in_the_value_estimate():
    """With dropout on, the Q pass's mask depends on the per-iteration key (docs/design.md §7.2)."""
    cfg = dataclasses.replace(CFG, dropout=0.5, iterations=1)
    wm = WorldModel(cfg, OBS, A)
    params = _perturb(wm.init(jax.random.PRNGKey(0)), jax.random.PRNGKey(1))
    run = jax.jit(functools.partial(plan, wm, cfg, eval_mode=True))
    obs, prev, _ = _inputs(9)
    nz = draw_plan_noise(jax.random.PRNGKey(9), cfg, A)
    v1 = run(params, obs, prev, jnp.asarray(True), nz)[2]["values"]
    v2 = run(params, obs, prev, jnp.asarray(True), nz)[2]["values"]
    nz2 = nz.replace(dropout_keys=jax.random.split(jax.random.PRNGKey(99), 1))
    v3 = run(params, obs, prev, jnp.asarray(True), nz2)[2]["values"]
    np.testing.assert_array_equal(v1, v2)
    assert not np.allclose(v1, v3)


def test_draw_plan_noise_shapes():
    nz = draw_plan_noise(jax.random.PRNGKey(0), CFG, A)
    H, P, N, it = CFG.horizon, CFG.num_pi_trajs, CFG.num_samples, CFG.iterations
    assert nz.pi_eps.shape == (H, P, A)
    assert nz.sample_eps.shape == (it, H, N - P, A)
    assert nz.terminal_eps.shape == (it, N, A)
    assert nz.q_pair.shape == (it, 2) and nz.q_pair.dtype == jnp.int32
    assert np.all(np.asarray(nz.q_pair[:, 0]) != np.asarray(nz.q_pair[:, 1]))
    assert np.all((np.asarray(nz.q_pair) >= 0) & (np.asarray(nz.q_pair) < CFG.num_q))
    assert nz.u.shape == () and 0.0 <= float(nz.u) < 1.0
    assert nz.explore_eps.shape == (A,)
    assert isinstance(nz, PlanNoise)


# ------------------------------------------------------------------------------ toy
@dataclasses.dataclass(frozen=True)
class _RewardIsActionModel:
    """Analytic stand-in world model: latent = obs, static dynamics, reward = mean(a)
    (logits = log two-hot weights of mean(a)), Q = 0, pi = tanh(eps / 2)."""

    @property
    def twohot(self) -> TwoHot:
        return TwoHot.tdmpc2()

    def encode(self, params, obs):
        return obs

    def next(self, params, z, a):
        return z

    def reward(self, params, z, a):
        return jnp.log(self.twohot.encode(jnp.mean(a, axis=-1)) + 1e-12)

    def pi(self, params, z, eps):
        a = jnp.tanh(0.5 * eps)
        return a, a, jnp.zeros(a.shape[:-1] + (1,)), jnp.zeros_like(a)

    def q_value(self, params, z, a, pair, dropout_key=None, reduce="min"):
        return jnp.zeros(z.shape[:-1] + (1,))


def test_reward_is_action_toy_picks_plus_one():
    cfg = dataclasses.replace(CFG, iterations=6, num_samples=128, num_elites=16, num_pi_trajs=8)
    cfg = dataclasses.replace(cfg, temperature=5.0)
    run = jax.jit(functools.partial(plan, _RewardIsActionModel(), cfg, eval_mode=True))
    prev = jnp.zeros((cfg.horizon, A))
    means = []
    for seed in range(4):
        nz = draw_plan_noise(jax.random.PRNGKey(seed), cfg, A)
        action, mean, _ = run({}, jnp.zeros(OBS), prev, jnp.asarray(seed == 0), nz)
        prev = mean
        means.append(np.asarray(mean))
        assert np.all(np.asarray(action) > 0.6), action
    assert np.all(means[-1][:-1] > 0.8), means[-1]
