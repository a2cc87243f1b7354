"""Multi-task parity of our jitted TD-MPC2 update and planner with the real reference (5f6fade).

Fixture ``fixtures/tdmpc2_multitask.npz`` (``parity/gen_multitask_fixtures.py``, layout in
``parity/README.md``): the reference agent with ``cfg.multitask = True`` on three synthetic
tasks (obs 9 / 13 / 5 padded to 13, actions 2 / 6 / 1 padded to 6, episode lengths
20 / 500 / 2000: discounts 0.95 / 0.99 / 0.995), task_dim 14, dropout 0, every random draw
recorded, and the embedding table recorded around its look-ups.

* ``update``: three chained ``update()`` calls from a perturbed state whose embedding rows
  have norms 3.0 / 1.6 / 0.6; update 0's batch has no task-1 element (its row, norm 1.6, is
  not renormalised until update 1 looks it up). Our jitted ``update`` with the batch's
  :class:`TaskContext` runs them one after the other, each from *our* previous state:
  losses, TD targets, the world-model clip norm (embedding gradient and stale policy gradient
  included) and its parts, the policy clip, every pre-clip gradient (the embedding's
  included), all parameters after each update (the embedding and the target Q included) and
  the RunningScale; the embedding table at both renorm points, teacher-forced from the
  reference's table before each point and chained.
* ``plan``: seven chained ``act()`` decisions (two or three per task, each task's first with
  ``t0``), teacher-forced per iteration and chained through our jitted ``plan`` with the
  task's context.

The forward intermediates (latents, logits, policy samples) are not compared one by one as in
``test_update_parity.py``: every one of them feeds a loss and a gradient compared here, and a
separate forward program would cost its compilation in CI.

Mechanism tests that need these two compiled programs run here too, on the same runs: where
the update writes the renorm back, the embedding's gradient rows, learning rate and clip, the
plan's masks and its look-up renorm that is not written back, one compilation over tasks.

Tolerances are the single-task parity tests' (``test_update_parity.py``: ``1e-5 + 1e-5 |ref|``
for the update; ``test_planner_parity.py``: ``ATOL`` 1e-5 for convex combinations of actions,
values ``ATOL + 7e-6 max|V|`` teacher-forced and ``ATOL + 2e-5 max|V|`` chained, elites exact
outside near-tie groups), argued there from the float32 arithmetic. Nothing on the
multi-task path needs more: the new arithmetic is a concatenation, masks (exact
multiplications by 0 / 1), an exact integer scale of the log-prob, float32 discount products
(the reference's own) and the embedding renorm, a scale by ``1 / (norm + 1e-7)`` that torch
computes in float64 and rounds to float32 and we compute in float32: one rounding step
(``6e-8`` relative), far inside them.
"""

from __future__ import annotations

import functools
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.multitask import TaskSet, multitask_world_model, renorm_rows
from agents.tdmpc2.planner import PlanNoise, estimate_value, mppi_update, plan
from agents.tdmpc2.reference_names import from_reference, to_reference, tree_from_reference
from agents.tdmpc2.train_state import train_state_from_params
from agents.tdmpc2.update import UpdateNoise, update
from agents.tdmpc2.world_model import count_params
from tests.agents.tdmpc2.conftest import MT_TASK_DIM, MT_TASKS, mt_world_model
from tests.agents.tdmpc2.test_planner_parity import (
    ATOL as PLAN_ATOL,
)
from tests.agents.tdmpc2.test_planner_parity import (
    CHAINED_VALUE_SCALE_TOL,
    VALUE_SCALE_TOL,
    _check_elites,
    final_tolerances,
)
from tests.agents.tdmpc2.test_update_parity import close

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "tdmpc2_multitask.npz"

# reference cfg keys with a TDMPC2Config field of the same name and meaning
_CFG_FIELDS = (
    "enc_dim", "mlp_dim", "latent_dim", "num_enc_layers", "num_q", "num_bins", "vmax",
    "dropout", "simnorm_dim", "horizon", "batch_size", "iterations", "num_samples",
    "num_elites", "num_pi_trajs", "min_std", "max_std", "temperature", "log_std_min",
    "log_std_max", "rho", "tau", "entropy_coef", "grad_clip_norm", "enc_lr_scale",
    "consistency_coef", "reward_coef", "value_coef", "discount_denom", "discount_min",
    "discount_max",
)  # fmt: skip


@pytest.fixture(scope="module")
def fx() -> dict[str, np.ndarray]:
    if not FIXTURE.exists():
        pytest.skip(f"fixture {FIXTURE} not generated")
    with np.load(FIXTURE) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def setup(fx):
    """Task set, config and world model from the fixture's metadata, pinned to ours."""
    meta = lambda k: fx[f"meta/cfg/{k}"].item()  # noqa: E731
    assert meta("multitask") and meta("vmin") == -meta("vmax")
    tasks = TaskSet(
        tuple(str(s) for s in fx["meta/task_names"]),
        tuple(int(x) for x in fx["meta/task_obs_dims"]),
        tuple(int(x) for x in fx["meta/task_action_dims"]),
        tuple(int(x) for x in fx["meta/task_episode_lengths"]),
    )
    # the discount table is the reference's float32 tensor, bit for bit; the masks too
    np.testing.assert_array_equal(tasks.discounts, fx["meta/task_discounts"])
    np.testing.assert_array_equal(tasks.action_masks, fx["meta/action_masks"])
    cfg = TDMPC2Config(**{k: meta(k) for k in _CFG_FIELDS}, learning_rate=meta("lr"))
    wm = multitask_world_model(cfg, tasks, task_dim=meta("task_dim"))
    # the mechanism tests' shared tiny setup is this one (so both run the same programs)
    assert (tasks, meta("task_dim")) == (MT_TASKS, MT_TASK_DIM) and wm == mt_world_model()
    assert (wm.obs_size, wm.action_size) == (meta("obs_dim"), meta("action_dim"))
    assert wm.cfg.iterations == int(fx["meta/iterations_after_ctor"])
    assert wm.cfg.pi_eps == 1e-5
    lrs = fx["meta/optim_group_lrs"]  # encoder, dynamics, reward, Qs, task embedding
    np.testing.assert_allclose(lrs, [cfg.learning_rate * cfg.enc_lr_scale] + 4 * [3e-4])
    return tasks, wm


def _sq(tree) -> float:
    """Sum of squares of every leaf, in NumPy float64 (no eager JAX op to compile)."""
    return sum(float(np.sum(np.square(np.asarray(x, np.float64)))) for x in jax.tree.leaves(tree))


def _ref(fx: dict, prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) :]: v for k, v in fx.items() if k.startswith(prefix)}


# ------------------------------------------------------------------------------ update
def _inputs(fx, tasks, k):
    p = f"update/u{k}/"
    batch = dict(
        obs=jnp.asarray(fx[p + "batch/obs"]),
        action=jnp.asarray(fx[p + "batch/action"]),
        reward=jnp.asarray(fx[p + "batch/reward"][..., 0]),
    )
    noise = UpdateNoise(
        eps_td=jnp.asarray(fx[p + "draw/td_pi_eps"]),
        pair_td=jnp.asarray(fx[p + "draw/td_q_pair"], jnp.int32),
        eps_pi=jnp.asarray(fx[p + "draw/pi_eps"]),
        pair_pi=jnp.asarray(fx[p + "draw/pi_q_pair"], jnp.int32),
        dropout_keys=None,
    )
    return batch, noise, tasks.context(fx[p + "batch/task"])


@pytest.fixture(scope="module")
def chain(fx, setup):
    """Our jitted update chained over the fixture's batches, draws and task ids."""
    tasks, wm = setup
    init = _ref(fx, "update/init/")
    assert set(init) == set(fx["update/param_names"]) and "_task_emb.weight" in init
    params, target_qs = from_reference(init, wm)
    assert count_params(params) == int(fx["meta/total_params"])
    state = train_state_from_params(wm, params, target_qs)
    f = jax.jit(update, static_argnums=(0, 1, 5))
    steps, inputs = [], []
    n0 = f._cache_size()
    for k in range(int(fx["update/n_updates"])):
        batch, noise, ctx = _inputs(fx, tasks, k)
        new_state, metrics = f(wm, wm.cfg, state, batch, noise, True, ctx)
        steps.append(dict(pre=state, post=new_state, metrics=metrics, ctx=ctx))
        inputs.append((batch, noise, ctx))
        state = new_state
    assert f._cache_size() - n0 <= 1
    return dict(steps=steps, inputs=inputs, wm=wm, f=f, tasks=tasks)


def test_update_chained_outputs(fx, chain):
    """Losses, TD targets, clip norms and coefficients, every post-update parameter (the
    embedding and the target Q included), the RunningScale and the step count."""
    wm = chain["wm"]
    for k, s in enumerate(chain["steps"]):
        m, p, post = s["metrics"], f"update/u{k}/", s["post"]
        for name in ("consistency_loss", "reward_loss", "value_loss", "pi_loss", "total_loss"):
            close(m[name], fx[p + f"out/{name}"], f"{p}{name}")
        close(m["pi_scale"], fx[p + "out/pi_scale"], f"{p}pi_scale")
        close(m["td_target"], fx[p + "fwd/td_targets"], f"{p}td_targets")
        gn = float(m["grad_norm"])
        close(gn, fx[p + "clip_wm/total_norm"], f"{p}clip_wm total")
        wm_only = np.sqrt(float(_sq(m["grads"]["wm"])))
        close(wm_only, fx[p + "clip_wm/norm_world_model_only"], f"{p}wm-only norm")
        close(np.sqrt(float(s["pre"].pi_grad_sq)), fx[p + "clip_wm/norm_stale_pi"], f"{p}stale")
        close(min(1.0, 20.0 / (gn + 1e-6)), fx[p + "clip_wm/coef"], f"{p}wm coef")
        pn = float(m["pi_grad_norm"])
        close(pn, fx[p + "clip_pi/total_norm"], f"{p}clip_pi total")
        close(min(1.0, 20.0 / (pn + 1e-6)), fx[p + "clip_pi/coef"], f"{p}pi coef")
        ours = to_reference(post.params, post.target_qs, wm)
        assert set(ours) == set(_ref(fx, p + "post/"))
        for n, v in ours.items():
            close(v, fx[p + f"post/{n}"], f"{p}post/{n}")
        close(post.q_scale, fx[p + "scale/after"][0], f"{p}scale after")
        assert int(post.step) == int(fx[p + "optim_step"])


def test_update_chained_gradients(fx, chain):
    """Every pre-clip gradient, chained: the world-model clip's (the embedding's included,
    zero rows for a task absent from the batch; from update 1 on the stale policy gradient is
    the previous update's post-clip one, carried as a norm, T3) and the policy clip's."""
    wm = chain["wm"]
    for k, s in enumerate(chain["steps"]):
        g = s["metrics"]["grads"]
        ours = to_reference({**g["wm"], "pi": g["pi"]}, None, wm)
        p = f"update/u{k}/"
        for n, v in ours.items():
            if n.startswith("_pi."):
                close(v, fx[p + f"grad_pi/{n}"], f"{p}grad_pi/{n}")
            else:
                close(v, fx[p + f"grad_wm/{n}"], f"{p}grad_wm/{n}")
        absent = ~np.isin(np.arange(3), fx[p + "batch/task"])
        assert np.all(fx[p + "grad_wm/_task_emb.weight"][absent] == 0)
        assert np.all(np.asarray(g["wm"]["task_emb"])[absent] == 0)
        assert "task_emb" not in g["pi"]


def test_update_embedding_renorm_points(fx, chain):
    """The table at both renorm points: ours from the reference's table before each point
    (teacher-forced, the rows looked up) and chained (point 1 of our pre-update state; point
    2 is our post-update table); which rows each point renormalised."""
    for k, s in enumerate(chain["steps"]):
        p = f"update/u{k}/emb/"
        ids = jnp.asarray(fx[f"update/u{k}/batch/task"])
        for point, before in (("point1", "before"), ("point2", "pre_point2")):
            close(renorm_rows(jnp.asarray(fx[p + before]), ids), fx[p + point], p + point)
            norm = np.linalg.norm(fx[p + before], axis=-1)
            np.testing.assert_array_equal(
                (norm > 1) & fx[p + f"looked_up_{point}"], fx[p + f"renormed_{point}"], p
            )
        close(s["ctx"].renorm(s["pre"].params)["task_emb"], fx[p + "point1"], p + "chained 1")
        close(s["post"].params["task_emb"], fx[p + "point2"], p + "chained 2")
        assert float(fx[p + "max_change_other_lookups"]) <= 2.0**-23
    # the fixture exercises both points and an absent task
    r1 = np.stack([fx[f"update/u{k}/emb/renormed_point1"] for k in range(3)])
    r2 = np.stack([fx[f"update/u{k}/emb/renormed_point2"] for k in range(3)])
    assert r1.any() and r2.any() and not fx["update/u0/emb/looked_up_point1"][1]


def _renorm_np(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """torch ``embedding_renorm_`` in NumPy: float32 norm, float64 scale rounded to float32."""
    out = np.array(table, np.float32)
    for i in np.unique(ids):
        norm = float(np.sqrt(np.sum(out[i] * out[i], dtype=np.float32)))
        if norm > 1.0:
            out[i] = out[i] * np.float32(1.0 / (norm + 1e-7))
    return out


def test_update_renorm_write_back_and_optimizer(chain):
    """Our update, mechanism by mechanism, on the fixture's chain.

    Point 1: the update starts from the table with the batch's rows renormed, and writes it
    back: the same update from the pre-renormed table gives the same result. Point 2: the
    stored table is the world-model Adam step (full learning rate, the update's own pre-clip
    gradient times its clip coefficient, its Adam moments; rebuilt in NumPy) from the point-1
    table, renormed again. A row of a task absent from the batch is never renormed (update 0,
    task 1, norm 1.6); the clip's norm includes the embedding's gradient and the stale
    policy gradient."""
    wm, f = chain["wm"], chain["f"]
    lr, b1, b2 = wm.cfg.learning_rate, 0.9, 0.999
    exercised = np.zeros((2, 3), bool)
    for k, s in enumerate(chain["steps"]):
        st, new, m, ctx = s["pre"], s["post"], s["metrics"], s["ctx"]
        ids = np.asarray(ctx.ids)
        present = np.isin(np.arange(3), ids)
        pre = np.asarray(st.params["task_emb"])
        p1 = _renorm_np(pre, ids)
        want = float(_sq(m["grads"]["wm"])) + float(st.pi_grad_sq)
        np.testing.assert_allclose(float(m["grad_norm"]) ** 2, want, rtol=1e-5)
        # point 1, by contrast: starting from the renormed table changes nothing
        batch, noise, _ = _inputs_from(chain, k)
        st_p1 = st.replace(params={**st.params, "task_emb": jnp.asarray(p1)})
        new_p1, m_p1 = f(wm, wm.cfg, st_p1, batch, noise, True, ctx)
        for name in ("total_loss", "pi_loss", "grad_norm"):
            np.testing.assert_allclose(m_p1[name], m[name], rtol=1e-6)
        np.testing.assert_allclose(m_p1["td_target"], m["td_target"], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(new_p1.params["task_emb"], new.params["task_emb"], atol=1e-7)
        # point 2: Adam (optax.adam, eps 1e-8) from the point-1 table, then renorm
        coef = min(1.0, wm.cfg.grad_clip_norm / (float(m["grad_norm"]) + 1e-6))
        g = np.asarray(m["grads"]["wm"]["task_emb"], np.float64) * coef
        adam = st.wm_opt_state.inner_states["model"].inner_state[0]
        t = int(adam.count) + 1
        mu = b1 * np.asarray(adam.mu["task_emb"], np.float64) + (1 - b1) * g
        nu = b2 * np.asarray(adam.nu["task_emb"], np.float64) + (1 - b2) * g * g
        step = -lr * (mu / (1 - b1**t)) / (np.sqrt(nu / (1 - b2**t)) + 1e-8)
        stepped = (p1 + step).astype(np.float32)
        p2 = _renorm_np(stepped, ids)
        np.testing.assert_allclose(new.params["task_emb"], p2, rtol=0, atol=2e-7)
        r1 = present & (np.linalg.norm(pre, axis=-1) > 1)
        r2 = present & (np.linalg.norm(stepped, axis=-1) > 1)
        np.testing.assert_array_equal(p1[~r1], pre[~r1])
        np.testing.assert_allclose(np.linalg.norm(p1[r1], axis=-1), 1.0, rtol=1e-6)
        np.testing.assert_array_equal(p2[~r2], stepped[~r2])
        np.testing.assert_allclose(np.linalg.norm(p2[r2], axis=-1), 1.0, rtol=1e-6)
        exercised |= np.stack([r1, r2])
        if k == 0:
            # row 1 (task 1 absent, norm 1.6) is not renormed; its gradient and first Adam
            # step are 0; row 2 (norm 0.6) is never renormed: its step is Adam's first, lr
            assert not present[1] and np.array_equal(new.params["task_emb"][1], pre[1])
            assert np.all(g[1] == 0) and np.all(g[2] != 0)
            np.testing.assert_allclose(np.abs(stepped[2] - p1[2]).max(), lr, rtol=1e-3)
    assert exercised.any(axis=1).all()  # both points renormalised some row in the chain


def _inputs_from(chain, k):
    return chain["inputs"][k]


# ------------------------------------------------------------------------------ plan
def _plan_noise(fx, p, action_dim):
    iters = fx[p + "draw/noise"].shape[0]
    explore = fx.get(p + "draw/final_noise", np.zeros(action_dim, np.float32))
    return PlanNoise(
        pi_eps=jnp.asarray(fx[p + "draw/pi_traj_eps"]),
        sample_eps=jnp.asarray(fx[p + "draw/noise"]),
        terminal_eps=jnp.asarray(fx[p + "draw/value_pi_eps"]),
        q_pair=jnp.asarray(fx[p + "draw/value_q_pair"].astype(np.int32)),
        dropout_keys=jax.random.split(jax.random.PRNGKey(0), iters),  # dropout 0: unused
        u=jnp.asarray(np.float32(fx[p + "draw/elite_uniform"])),
        explore_eps=jnp.asarray(explore),
    )


@pytest.fixture(scope="module")
def plan_setup(fx, setup):
    """Task set, world model, the plan section's parameters and one jitted ``plan``
    (``eval_mode=False``: the only program the plan tests compile)."""
    tasks, wm = setup
    arrays = _ref(fx, "plan/params/")
    params = jax.tree_util.tree_map(jnp.asarray, tree_from_reference(arrays, wm)["params"])
    run = jax.jit(functools.partial(plan, wm, wm.cfg), static_argnames="eval_mode")
    return tasks, wm, params, run


def test_plan_teacher_forced_iterations(fx, plan_setup):
    """Per iteration, from the reference's sampling mean/std and draws: the masked
    candidates, their values (the task's float32 discount products) and the refit on the
    reference's values (one program per decision, vmapped over the iterations)."""
    tasks, wm, params, _ = plan_setup
    cfg = wm.cfg
    N = cfg.num_samples

    @jax.jit
    def decision(params, obs, actions, eps, pairs, ref_values, ctx):
        pr = ctx.renorm(params)  # the look-up renorm of the task's row
        z = wm.encode(pr, obs, task=ctx)
        zN = jnp.broadcast_to(z, (N, z.shape[-1]))

        def value(a, e, q):
            return estimate_value(wm, cfg, pr, zN, a, e, q, None, task=ctx)

        values = jax.vmap(value)(actions, eps, pairs)
        refit = jax.vmap(functools.partial(mppi_update, cfg))(ref_values, actions)
        return z, values, refit

    for d in range(int(fx["plan/n_decisions"])):
        p = f"plan/d{d}/"
        ctx = tasks.context(jnp.asarray(int(fx[p + "task"])))
        mask = fx[p + "action_mask"]
        mean_in, std_in = fx[p + "iter/mean_in"], fx[p + "iter/std_in"]  # [I, H, A]
        sampled = np.clip(mean_in[:, :, None] + std_in[:, :, None] * fx[p + "draw/noise"], -1, 1)
        pi_actions = np.broadcast_to(
            fx[p + "pi_actions"], (cfg.iterations, *fx[p + "pi_actions"].shape)
        )
        actions = np.concatenate([pi_actions, sampled], axis=2) * mask  # [I, H, N, A]
        ref_values = fx[p + "iter/value"][..., 0]  # [I, N]
        z, values, (elite, score, mean, std) = decision(
            params,
            jnp.asarray(fx[p + "obs"]),
            jnp.asarray(actions, jnp.float32),
            jnp.asarray(fx[p + "draw/value_pi_eps"]),
            jnp.asarray(fx[p + "draw/value_q_pair"].astype(np.int32)),
            jnp.asarray(ref_values),
            ctx,
        )
        close(z[None], fx[p + "z"], p + "z")
        for i in range(cfg.iterations):
            tol = PLAN_ATOL + VALUE_SCALE_TOL * float(np.abs(ref_values[i]).max())
            np.testing.assert_allclose(
                values[i], ref_values[i], atol=tol, rtol=0, err_msg=f"{p}{i}"
            )
            _check_elites(np.asarray(elite[i]), fx[p + "iter/elite_idxs"][i], ref_values[i], 0.0, p)
            np.testing.assert_allclose(score[i], fx[p + "iter/score"][i, :, 0], atol=1e-6)
            np.testing.assert_allclose(ctx.mask(mean[i]), fx[p + "iter/mean"][i], atol=1e-6)
            np.testing.assert_allclose(ctx.mask(std[i]), fx[p + "iter/std"][i], atol=1e-6)


def test_plan_chained_decisions(fx, plan_setup):
    """Our jitted plan, warm-started from our own previous mean, against each decision. The
    eval-mode decision runs the ``eval_mode=False`` program with zero exploration noise (the
    same action: eval mode only drops ``std[0] * eps``), so one program is compiled."""
    tasks, wm, params, run = plan_setup
    cfg = wm.cfg
    A = wm.action_size
    n_compiled = run._cache_size()
    prev = jnp.zeros((cfg.horizon, A), jnp.float32)
    prev_tol = PLAN_ATOL
    for d in range(int(fx["plan/n_decisions"])):
        p = f"plan/d{d}/"
        t0, eval_mode = bool(fx[p + "t0"]), bool(fx[p + "eval_mode"])
        ctx = tasks.context(jnp.asarray(int(fx[p + "task"])))
        if not t0:
            np.testing.assert_allclose(prev, fx[p + "prev_mean_in"], atol=prev_tol)
        noise = _plan_noise(fx, p, A)
        mixes: list[float] = []
        assert not eval_mode or not np.any(np.asarray(noise.explore_eps))
        obs = jnp.asarray(fx[p + "obs"])
        action, mean, info = run(
            params, obs, prev, jnp.asarray(t0), noise, eval_mode=False, task=ctx
        )
        np.testing.assert_allclose(info["pi_actions"], fx[p + "pi_actions"], atol=PLAN_ATOL)
        for i in range(cfg.iterations):
            ref_values = fx[p + "iter/value"][i, :, 0]
            tol = PLAN_ATOL + CHAINED_VALUE_SCALE_TOL * float(np.abs(ref_values).max())
            values = np.asarray(info["values"][i])
            np.testing.assert_allclose(values, ref_values, atol=tol, rtol=0, err_msg=f"{p}{i}")
            _check_elites(
                np.asarray(info["elite_idxs"][i]),
                fx[p + "iter/elite_idxs"][i],
                ref_values,
                2 * float(np.abs(values - ref_values).max()),
                f"{p} iteration {i}",
            )
            ref_idx = fx[p + "iter/elite_idxs"][i]
            dv = float(np.abs(values[ref_idx] - ref_values[ref_idx]).max())
            rtol = 2 * cfg.temperature * dv
            np.testing.assert_allclose(
                info["scores"][i], fx[p + "iter/score"][i, :, 0], atol=PLAN_ATOL, rtol=rtol
            )
            mix = PLAN_ATOL + 2 * cfg.temperature * dv
            mixes.append(mix)
            np.testing.assert_allclose(info["means"][i], fx[p + "iter/mean"][i], atol=mix)
            np.testing.assert_allclose(info["stds"][i], fx[p + "iter/std"][i], atol=mix)
        assert float(fx[p + "select/cdf_margin"]) > 1e-6
        assert int(info["elite_choice"]) == int(fx[p + "draw/elite_index"])
        tol = final_tolerances(mixes, noise)  # what the last candidates inherit
        np.testing.assert_allclose(
            info["chosen"], fx[p + "chosen_elite_actions"], atol=tol["chosen"]
        )
        np.testing.assert_allclose(action, fx[p + "action"], atol=tol["action"])
        np.testing.assert_allclose(mean, fx[p + "prev_mean_out"], atol=tol["mean"])
        mask = fx[p + "action_mask"]
        assert np.all(np.asarray(action)[mask == 0] == 0)
        for name in ("means", "stds", "pi_actions"):  # masked after the std clamp, :160-162
            assert np.all(np.asarray(info[name])[..., mask == 0] == 0), name
        # the reference persists the look-up renorm of the task's row; we do not (T45), and
        # our renorm of the row equals what it wrote
        t = int(fx[p + "task"])
        close(renorm_rows(jnp.asarray(fx[p + "emb_before"]), t)[t], fx[p + "emb_after"][t], p)
        prev, prev_tol = mean, tol["mean"]
    assert run._cache_size() - n_compiled <= 1  # every task and t0 through one program


def test_plan_renorm_not_written_back(fx, plan_setup):
    """The plan renormalises the task's row at its look-up (the same plan as from parameters
    with that row pre-renormed) and writes nothing back: it returns no parameters and its
    input is unchanged, whereas the reference's ``act()`` persists the renorm (T45)."""
    tasks, wm, params, run = plan_setup
    p = "plan/d0/"
    t = int(fx[p + "task"])
    assert bool(fx[p + "emb_renormed"][t])  # the reference renormed this row at act()
    ctx = tasks.context(jnp.asarray(t))
    before = np.asarray(params["task_emb"]).copy()
    args = (jnp.asarray(fx[p + "obs"]), jnp.zeros((wm.cfg.horizon, wm.action_size)),
            jnp.asarray(True), _plan_noise(fx, p, wm.action_size))  # fmt: skip
    a, mean, _ = run(params, *args, eval_mode=False, task=ctx)
    a2, mean2, _ = run(ctx.renorm(params), *args, eval_mode=False, task=ctx)
    np.testing.assert_array_equal(np.asarray(params["task_emb"]), before)
    assert np.linalg.norm(before[t]) > 1
    np.testing.assert_allclose(a, a2, atol=1e-6)
    np.testing.assert_allclose(mean, mean2, atol=1e-6)
