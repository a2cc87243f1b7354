"""TD-MPC2 multi-task mechanisms (docs/design.md §7.6; ``agents/tdmpc2/multitask.py``).

Cheap mechanism tests on the fixture-sized tiny task set of ``conftest.py`` (3 tasks, O_max 13,
A_max 6): the task set's tables (float32 discounts from the reference heuristic, prefix
masks, n_valid), the padded-action iteration rule and task_dim, padding, parameter counts
(mt80 / mt30, also against the reference instantiated), the embedding's init, the max-norm
renorm formula, the policy loss's stop-gradiented embedding (gradient routing), the masked
policy and its n_valid-scaled log-prob (NumPy oracle), the planner's float32 discount
products, and that the single-task programs are unchanged by the hooks.

The mechanisms that need the compiled multi-task update or plan (where the update writes the
renorm back, the embedding's gradient rows, Adam learning rate and clip, the plan's masks and
its renorm that is not written back, one compilation over tasks) are tested in
``test_multitask_parity.py`` on the reference fixture's runs, so that the two programs are
compiled once.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.multitask import (
    TASK_DIM,
    TaskSet,
    heuristic_discount,
    multitask_world_model,
    pad_action,
    pad_obs,
    reference_task_dim,
    renorm_rows,
)
from agents.tdmpc2.planner import estimate_value
from agents.tdmpc2.update import policy_loss
from agents.tdmpc2.world_model import WorldModel, count_params
from tests.agents.tdmpc2.conftest import (
    MT_B,
    MT_CFG,
    MT_TASK_DIM,
    MT_TASKS,
    mt_random_params,
    mt_world_model,
)

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
# task ids of two chained updates: update 0 has every task, update 1 no task 1
IDS = (
    np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 2]),
    np.array([0, 2, 2, 0, 0, 2, 0, 2, 2, 0, 0]),
)


# ------------------------------------------------------------------------------ task set
def test_task_set_tables():
    t = MT_TASKS
    assert (t.num_tasks, t.obs_max, t.action_max) == (3, 13, 6)
    want = [heuristic_discount(T) for T in t.episode_lengths]
    assert want == [0.95, 0.99, 0.995]  # floor-clipped (0.75), inside, ceiling-clipped
    assert t.discounts.dtype == np.float32
    np.testing.assert_array_equal(t.discounts, np.float32(want))
    # the same heuristic as the single-task config's gamma
    for T in (20, 100, 150, 500, 2000):
        assert heuristic_discount(T) == TDMPC2Config().resolve(T, 2).gamma
    np.testing.assert_array_equal(
        t.action_masks,
        [[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0]],
    )
    ctx = t.context(jnp.asarray([2, 0, 1, 1]))
    np.testing.assert_array_equal(ctx.n_valid[:, 0], [1, 2, 6, 6])
    np.testing.assert_array_equal(ctx.discount, np.float32([0.995, 0.95, 0.99, 0.99]))
    assert t.index("synthetic-b") == 1
    with pytest.raises(ValueError, match="entries"):
        TaskSet(("a", "b"), (1, 2), (1,), (10, 10))
    with pytest.raises(ValueError, match="unique"):
        TaskSet(("a", "a"), (1, 2), (1, 1), (10, 10))
    with pytest.raises(ValueError, match="positive"):
        TaskSet(("a",), (0,), (1,), (10,))
    cfg = TDMPC2Config(discount_min=0.9)
    t2 = TaskSet.for_config(cfg, ["x"], [3], [1], [20])
    np.testing.assert_array_equal(t2.discounts, np.float32([0.9]))  # 0.75 clipped at 0.9


def test_padded_action_iteration_rule_and_task_dim():
    """``iterations += 2`` when the *padded* action size is >= 20 (``tdmpc2.py:31``)."""
    small = TaskSet(("a", "b"), (4, 4), (6, 19), (500, 500))
    big = TaskSet(("a", "b"), (4, 4), (6, 21), (500, 500))
    assert small.resolve(TDMPC2Config()).iterations == 6
    assert big.resolve(TDMPC2Config()).iterations == 8
    # seed_steps / gamma from the first task's episode length (the wrapper's envs[0])
    r = TaskSet(("a", "b"), (4, 4), (2, 2), (20, 2000)).resolve(TDMPC2Config())
    assert r.seed_steps == 1000 and r.gamma == 0.95
    # task_dim: ours 96; the reference code's (parser.py:52-57) on request (T46)
    assert TASK_DIM == 96
    assert reference_task_dim("mt80", 5) == 96
    assert [reference_task_dim("mt30", s) for s in (1, 5, 19, 48, 317)] == [96, 64, 64, 64, 96]


def test_padding():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(pad_obs(x, 5), [[0, 1, 2, 0, 0], [3, 4, 5, 0, 0]])
    assert isinstance(pad_obs(x, 5), np.ndarray)
    y = pad_action(jnp.asarray(x), 4)
    assert isinstance(y, jax.Array) and y.shape == (2, 4) and float(jnp.abs(y[:, 3]).max()) == 0
    with pytest.raises(ValueError, match="exceeds"):
        pad_obs(x, 2)


# ------------------------------------------------------------------------------ counts
def _counts(n_tasks: int, obs: int, act: int, size: int, task_dim: int, **kw) -> dict:
    tasks = TaskSet(tuple(f"t{i}" for i in range(n_tasks)), (obs,) * n_tasks,
                    (act,) * n_tasks, (500,) * n_tasks)  # fmt: skip
    wm = multitask_world_model(TDMPC2Config(model_size=size, **kw), tasks, task_dim=task_dim)
    shapes = jax.eval_shape(wm.init, jax.random.key(0))
    return {k: count_params(v) for k, v in shapes.items()}


def test_param_counts_mt80_mt30():
    """mt80 at size 5 (task_dim 96) = 5,389,930; mt30 at size 5 with the reference's
    task_dim 64 = 5,241,066 (the reference's count; target Q excluded, embedding included). Every
    size of ``fixtures/tdmpc2_multitask_param_counts.json`` (the reference instantiated) too."""
    assert sum(_counts(80, 39, 6, 5, 96).values()) == 5_389_930
    assert sum(_counts(30, 24, 6, 5, 64).values()) == 5_241_066
    path = FIXTURES / "tdmpc2_multitask_param_counts.json"
    if not path.exists():
        pytest.skip(f"{path} not generated")
    ref = json.loads(path.read_text())
    names = dict(_task_emb="task_emb", _encoder="encoder", _dynamics="dynamics",
                 _reward="reward", _pi="pi", _Qs="qs")  # fmt: skip
    for name, dims in (("mt80", (80, 39, 6)), ("mt30", (30, 24, 6))):
        for size, r in ref[name]["sizes"].items():
            ours = _counts(*dims, int(size), r["task_dim"], latent_dim=r["latent_dim"])
            assert sum(ours.values()) == r["total_params"], (name, size)
            assert {names[k]: v for k, v in r["modules"].items()} == ours, (name, size)


# ------------------------------------------------------------------------------ embedding
def _renorm_np(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """torch ``embedding_renorm_`` in NumPy: float32 norm, float64 scale rounded to float32."""
    out = np.array(table, np.float32)
    for i in np.unique(ids):
        norm = float(np.sqrt(np.sum(out[i] * out[i], dtype=np.float32)))
        if norm > 1.0:
            out[i] = out[i] * np.float32(1.0 / (norm + 1e-7))
    return out


def test_embedding_init():
    """``task_emb [num_tasks, task_dim]`` U(-0.02, 0.02) in the world-model params (a
    single-task model has none). Only the embedding is compiled (the rest of init is dead
    code to XLA)."""
    wm = mt_world_model()
    assert jax.eval_shape(wm.init, jax.random.PRNGKey(0))["task_emb"].shape == (3, MT_TASK_DIM)
    emb = np.asarray(jax.jit(lambda k: wm.init(k)["task_emb"])(jax.random.PRNGKey(3)))
    assert emb.dtype == np.float32 and emb.min() >= -0.02 and emb.max() <= 0.02
    assert emb.std() > 0.008  # U(-0.02, 0.02) has std 0.0115
    single = WorldModel(MT_CFG.resolve(500, 2), 4, 2)
    assert "task_emb" not in jax.eval_shape(single.init, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="both"):
        WorldModel(MT_CFG.resolve(500, 2), 4, 2, task_dim=8)


def test_renorm_rows():
    """torch ``embedding_renorm_``: looked-up rows with norm > 1 scaled by 1 / (norm + 1e-7)."""
    table = jnp.asarray([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0], [1.0, 0.0]], jnp.float32)
    ids = jnp.asarray([[0, 1], [0, 3]])
    out = np.asarray(renorm_rows(table, ids))
    np.testing.assert_allclose(out, _renorm_np(np.asarray(table), np.asarray(ids)), rtol=1e-7)
    np.testing.assert_allclose(out[0], np.float32([3, 4]) / np.float32(5 + 1e-7), rtol=1e-7)
    np.testing.assert_array_equal(out[1:], table[1:])  # <= 1, not looked up, exactly 1
    assert np.linalg.norm(out[0]) <= 1.0
    ctx = MT_TASKS.context(jnp.asarray([2, 2]))
    params = {"task_emb": table[:3], "pi": 1.0}
    out = ctx.renorm(params)
    assert out["pi"] == 1.0 and np.array_equal(out["task_emb"], _renorm_np(table[:3], [2]))


@pytest.fixture(scope="module")
def params():
    return mt_random_params(mt_world_model())


def test_policy_loss_reads_embedding_stop_gradiented(params):
    """5f6fade ``track_q_grad(False)``: no gradient of the policy loss reaches the embedding
    (or Q); the policy gets one; without the stop-gradient the embedding would get one."""
    wm = mt_world_model()
    ctx = MT_TASKS.context(IDS[0])
    H, L = wm.cfg.horizon, wm.cfg.latent_dim
    rng = np.random.default_rng(3)
    zs = jax.nn.softmax(jnp.asarray(rng.normal(size=(H + 1, MT_B, L // 8, 8)), jnp.float32))
    zs = zs.reshape(H + 1, MT_B, L)  # SimNorm-like latents
    eps = jnp.asarray(rng.normal(size=(H + 1, MT_B, 6)), jnp.float32)
    pair = jnp.asarray([3, 1], jnp.int32)

    @jax.jit
    def grads(p):
        def pl(pi, qs, emb):
            return policy_loss(wm, pi, qs, zs, eps, pair, None, jnp.float32(1.0),
                               task=ctx, task_emb=emb)[0]  # fmt: skip

        g = jax.grad(pl, argnums=(0, 1, 2))(p["pi"], p["qs"], p["task_emb"])

        def pl_leaky(emb):  # the same loss without the stop-gradient, for contrast
            pp = {"pi": p["pi"], "qs": p["qs"], "task_emb": emb}
            _, a, lp, _ = wm.pi(pp, zs, eps, task=ctx)
            q = wm.q_value(pp, zs, a, pair, None, reduce="avg", task=ctx)
            return jnp.mean(1e-4 * lp - q)

        return g, jax.grad(pl_leaky)(p["task_emb"])

    (g_pi, g_q, g_emb), g_leak = grads(params)
    assert all(np.any(np.asarray(x) != 0) for x in jax.tree_util.tree_leaves(g_pi))
    assert not any(np.any(np.asarray(x) != 0) for x in jax.tree_util.tree_leaves(g_q))
    assert not np.any(np.asarray(g_emb) != 0)
    assert np.any(np.asarray(g_leak) != 0)


def test_policy_loss_with_one_scale_per_task(params):
    """T49's what-if (``q_scale [K]``): task k's scale steps on the rows of task k (an oracle
    from the NumPy percentiles, tolerance as tests/agents/common/test_normalizers.py) and
    divides those rows; the loss is then the formula's (float32 sums of 44 terms: rtol 1e-5).
    A batch of one task gives exactly the shared scale's step and loss."""
    wm = mt_world_model()
    ids = jnp.asarray(IDS[0])
    ctx = MT_TASKS.context(ids)
    H, L = wm.cfg.horizon, wm.cfg.latent_dim
    rng = np.random.default_rng(5)
    zs = jax.nn.softmax(jnp.asarray(rng.normal(size=(H + 1, MT_B, L // 8, 8)), jnp.float32))
    zs = zs.reshape(H + 1, MT_B, L)
    eps = jnp.asarray(rng.normal(size=(H + 1, MT_B, 6)), jnp.float32)
    pair, emb = jnp.asarray([3, 1], jnp.int32), params["task_emb"]
    qs = jax.tree.map(lambda x: x * 40.0, params["qs"])  # Q spreads above the floor of 1
    scale0 = jnp.asarray([1.5, 2.0, 1.0], jnp.float32)

    def loss(scale, task):
        return policy_loss(wm, params["pi"], qs, zs, eps, pair, None, scale, task, emb)

    got, aux = loss(scale0, ctx)
    pp = {"pi": params["pi"], "qs": qs, "task_emb": emb}
    _, a, log_pi, _ = wm.pi(pp, zs, eps, task=ctx)
    q = np.asarray(wm.q_value(pp, zs, a, pair, None, reduce="avg", task=ctx), np.float64)
    want_scale = np.asarray(scale0, np.float64)
    for k in np.unique(np.asarray(ids)):
        p5, p95 = np.percentile(q[0, np.asarray(ids) == k, 0], [5.0, 95.0])
        want_scale[k] = 0.01 * max(1.0, p95 - p5) + 0.99 * want_scale[k]
    np.testing.assert_allclose(np.asarray(aux["q_scale"]), want_scale, rtol=2e-6)
    scaled = q / want_scale[np.asarray(ids)][None, :, None]
    rho = wm.cfg.rho ** np.arange(H + 1)
    want = np.mean(np.mean(wm.cfg.entropy_coef * np.asarray(log_pi) - scaled, (1, 2)) * rho)
    np.testing.assert_allclose(float(got), want, rtol=1e-5)
    assert len(set(want_scale.tolist())) == 3  # the tasks' scales differ

    one = MT_TASKS.context(jnp.zeros((MT_B,), jnp.int32))  # every row task 0
    got1, aux1 = loss(scale0, one)
    shared, aux_s = loss(scale0[0], one)
    assert float(got1) == float(shared) and float(aux1["q_scale"][0]) == float(aux_s["q_scale"])
    assert np.asarray(aux1["q_scale"])[1:].tolist() == np.asarray(scale0)[1:].tolist()


def test_masks_and_n_valid_log_prob(params):
    """pi: mean, log-std and noise masked to the task's prefix (``wm.py:136-140``); the
    log-prob's Gaussian part scaled by the number of valid dims, the squash term summed over
    every dim (masked ones contribute log(1 + 1e-6)); NumPy float64 oracle."""
    wm = mt_world_model()
    ids = jnp.asarray([0, 1, 2, 2])
    ctx = MT_TASKS.context(ids)
    rng = np.random.default_rng(0)
    z = jnp.asarray(rng.normal(size=(4, wm.cfg.latent_dim)), jnp.float32)
    eps = jnp.asarray(rng.normal(size=(4, 6)), jnp.float32)

    @jax.jit
    def heads(p, z, e):
        e_in = jnp.concatenate([z, p["task_emb"][ids]], -1)
        return wm.pi(p, z, e, task=ctx), wm.pi_module.apply({"params": p["pi"]}, e_in)

    (mu, a, lp, ls), out = heads(params, z, eps)
    mask = np.asarray(MT_TASKS.action_masks)[np.asarray(ids)]
    for x in (mu, a, ls):
        assert np.all(np.asarray(x)[mask == 0] == 0)
    out = np.asarray(out, np.float64)  # the head on [z, e], unmasked
    m_raw, raw = out[:, :6], out[:, 6:]
    log_std = (-10 + 0.5 * 12 * (np.tanh(raw) + 1)) * mask
    ep = np.asarray(eps, np.float64) * mask
    n_valid = mask.sum(-1, keepdims=True)
    want = ((-0.5 * ep**2 - log_std).sum(-1, keepdims=True) - 0.5 * np.log(2 * np.pi)) * n_valid
    act = np.tanh(m_raw * mask + ep * np.exp(log_std))
    np.testing.assert_allclose(np.asarray(a), act, rtol=1e-5, atol=1e-6)
    # the squash term at our float32 action, rounded as torch rounds it (ill-conditioned
    # near saturation; its float32 numerics are test_world_model's / T4's subject)
    a32 = np.asarray(a, np.float32)
    sq = np.log(np.maximum(np.float32(1) - a32 * a32, 0) + np.float32(1e-6))
    want -= sq.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(lp), want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(np.asarray(ls), log_std, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ planner
class _ConstWM:
    """A stand-in world model for :func:`estimate_value`: reward 1, identity dynamics, Q 1."""

    class twohot:  # noqa: N801 (the attribute name the planner reads)
        @staticmethod
        def decode(x):
            return x[..., 0]

    def reward(self, params, z, a, task=None):
        return jnp.ones((*z.shape[:-1], 1))

    def next(self, params, z, a, task=None):
        return z

    def pi(self, params, z, eps, task=None):
        return eps, eps, eps, eps

    def q_value(self, params, z, a, pair, dropout_key, reduce="min", task=None):
        return jnp.ones((*z.shape[:-1], 1))


def test_value_discount_products_are_float32():
    """The value's discounts are float32 products of the task's float32 discount (the
    reference's ``discount *= self.discount[task]``, ``tdmpc2.py:102``): with reward 1 and
    Q 1, ``V = 1 + g + fl(g g) + fl(fl(g g) g)``; the single-task path keeps float64 powers."""
    cfg = MT_CFG.resolve(500, 6)
    z, acts = jnp.zeros((4, 3)), jnp.zeros((cfg.horizon, 4, 6))
    eps = jnp.zeros((4, 6))
    for t in range(3):
        g = np.float32(MT_TASKS.discounts[t])
        d, want = np.float32(1), np.float32(0)
        for _ in range(cfg.horizon):
            want, d = np.float32(want + d), np.float32(d * g)
        want = np.float32(want + d)
        v = estimate_value(_ConstWM(), cfg, {}, z, acts, eps, None, None,
                           task=MT_TASKS.context(jnp.asarray(t)))  # fmt: skip
        np.testing.assert_array_equal(np.asarray(v), want)
    # float32 products and float64 powers differ in the last bit for this discount
    g64 = float(np.float32(0.99))
    assert np.float32(np.float32(np.float32(0.99) * np.float32(0.99)) * np.float32(0.99)) != (
        np.float32(g64**3)
    )


# ------------------------------------------------------------------------------ single task
def test_single_task_programs_unchanged():
    """With no task context the single-task update and plan lower to exactly the programs
    recorded before the multi-task hooks existed (``parity/gen_single_task_lowering.py``):
    identical programs, hence bit-identical results. (The agent's variants; the generator
    also records ``return_grads=True`` and ``eval_mode=True``.)"""
    path = FIXTURES / "tdmpc2_single_task_lowering.json"
    golden = json.loads(path.read_text())
    if jax.__version__ != golden["jax"]:
        pytest.skip(f"golden lowered with jax {golden['jax']}, this is {jax.__version__}")
    sys.path.insert(0, str(pathlib.Path(__file__).parent / "parity"))
    try:
        import gen_single_task_lowering as G
    finally:
        sys.path.pop(0)
    assert str(jax.config.jax_default_matmul_precision) == golden["matmul_precision"]
    for name, text in G.programs(return_grads=(False,), eval_mode=(False,)).items():
        assert hashlib.sha256(text.encode()).hexdigest() == golden["programs"][name], name
