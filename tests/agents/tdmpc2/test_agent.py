"""The TD-MPC2 agent end to end at a tiny size: counts, chunked == uninterrupted,
evaluation, refusals. One module-scoped run is shared by the tests."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from agents.tdmpc2.agent import TDMPC2
from agents.tdmpc2.config import TDMPC2Config
from launcher.store.checkpoint import to_raw

TINY = TDMPC2Config(
    model_size=1,
    enc_dim=16,
    mlp_dim=32,
    latent_dim=16,
    num_q=2,
    batch_size=16,
    num_samples=32,
    num_pi_trajs=4,
    num_elites=8,
    iterations=2,
    seed_steps=40,
    n_envs=2,
    eval_episodes=3,
)
T = 10
N_TICKS = 8 * (T + 1)


def make_agent(cfg=TINY, env_id="probe_reward_is_action", **kw):
    env = envs.make(env_id, episode_length=kw.pop("episode_length", T), **kw)
    return TDMPC2(cfg, env, total_env_steps=N_TICKS * cfg.n_envs)


@pytest.fixture(scope="module")
def run():
    agent = make_agent()
    train = jax.jit(agent.train)
    state0 = jax.jit(agent.init)(jax.random.key(0))
    half = N_TICKS // 2
    s_a, m_a = train(state0, jnp.arange(half))
    s_b, m_b = train(s_a, jnp.arange(half, N_TICKS))
    return agent, train, state0, (s_a, m_a), (s_b, m_b)


def test_counts_follow_the_schedule(run):
    agent, _, _, (s_a, m_a), (s_b, m_b) = run
    sched = agent.schedule
    ticks = jnp.arange(N_TICKS)
    expected_updates = int(jnp.sum(sched.n_updates(ticks)))
    assert expected_updates > TINY.seed_steps  # the burst and per-step updates happened
    assert int(m_b["Train/n_updates"]) == expected_updates
    assert int(s_b.train.step) == expected_updates
    assert int(m_b["timestep"]) == int(sched.env_steps_through(N_TICKS - 1))
    assert int(m_b["env_frames"]) == int(m_b["timestep"]) * agent.env.spec.action_repeat
    assert int(s_b.tick) == N_TICKS
    for k, v in m_b.items():
        assert np.all(np.isfinite(np.asarray(v))), k
    agent.check(m_b)


def test_chunked_equals_uninterrupted(run):
    """train(0..n) in one call == train(0..n/2) then train(n/2..n): the schedule and every
    random draw depend only on the absolute tick (resume, docs/design.md §9.3)."""
    agent, train, state0, _, (s_b, m_b) = run
    s_full, m_full = train(state0, jnp.arange(N_TICKS))
    for a, b in zip(jax.tree.leaves(s_full.train), jax.tree.leaves(s_b.train), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(s_full.buffer.obs), np.asarray(s_b.buffer.obs))


def test_train_metrics_are_chunk_means(run):
    """``Train/*`` of an update metric is its mean over the chunk's updates (docs/design.md
    §4.4, T50), so the whole run's mean is the halves' means weighted by their update
    counts. On positive metrics (losses, norms) a float32 running sum of N terms is within
    (N - 1) u of the exact sum (u = 2^-24), for the whole run's sum and for each half's; the
    means and the weighting add 4 roundings: rtol (2 N + 4) u. The last update's value (the
    old meaning) misses by far more."""
    agent, train, state0, (s_a, m_a), (s_b, m_b) = run
    _, m_full = train(state0, jnp.arange(N_TICKS))
    n_a, n_b = int(m_a["Train/updates in chunk"]), int(m_b["Train/updates in chunk"])
    assert n_a > 0 and n_b > 0 and n_a + n_b == int(m_full["Train/updates in chunk"])
    rtol = (2 * (n_a + n_b) + 4) * 2.0**-24
    for k in ("reward_loss", "value_loss", "grad_norm", "pi_grad_norm"):
        a, b, full = (float(m[f"Train/{k}"]) for m in (m_a, m_b, m_full))
        np.testing.assert_allclose(full, (a * n_a + b * n_b) / (n_a + n_b), rtol=rtol, err_msg=k)
        last = float(s_b.last_metrics[k])  # the state keeps the last update's metrics
        assert abs(full - last) > 10 * rtol * abs(full), k


def test_evaluate(run):
    agent, _, _, _, (s_b, _) = run
    ev = jax.jit(agent.evaluate)
    s1, m1 = ev(s_b, jax.random.key(1))
    s2, m2 = ev(s1, jax.random.key(1))
    r1 = np.asarray(m1["Eval/episode returns"])
    assert r1.shape == (TINY.eval_episodes,)
    assert np.all(np.abs(r1) <= T)  # reward = action in [-1, 1], T steps
    assert int(s2.n_evals) == 2
    # the evaluation count is folded into the key: two evaluations differ
    assert not np.array_equal(r1, np.asarray(m2["Eval/episode returns"]))
    # evaluation does not touch the learner or the collector
    for a, b in zip(jax.tree.leaves(s_b.train), jax.tree.leaves(s2.train), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_memory_report():
    agent = make_agent()
    mem = agent.memory_bytes()
    buf = agent.buffer
    assert mem["replay"] == buf.nbytes() > 0
    assert mem["train_state"] > 0


def test_refuses_discrete_and_terminating_envs():
    with pytest.raises(ValueError, match="continuous actions"):
        TDMPC2(TINY, envs.make("cartpole"), total_env_steps=100)
    for game in ("breakout_minatar", "craftax_classic"):  # issue 46's backends
        with pytest.raises(ValueError, match="continuous actions"):
            TDMPC2(TINY, envs.make(game), total_env_steps=100)
    with pytest.raises(ValueError, match="terminate"):
        TDMPC2(TINY, envs.make("mountain_car_continuous"), total_env_steps=100)


def test_config_derivations():
    env = envs.make("pendulum")
    agent = TDMPC2(dataclasses.replace(TINY, seed_steps=None), env, total_env_steps=1000)
    assert env.spec.episode_length == 200
    assert agent.cfg.gamma == pytest.approx(0.975)
    assert agent.cfg.seed_steps == 1000
    with pytest.raises(ValueError, match="model_size"):
        TDMPC2Config(model_size=3)


@pytest.mark.parametrize("eval_mode", [False, True])
def test_policy_plans_each_env_with_its_own_key(run, eval_mode):
    """The collector's batched policy == one ``plan`` per env on ``split(key, n)[i]``,
    whether the envs are looped (CPU) or vmapped (accelerators)."""
    from agents.tdmpc2.planner import draw_plan_noise, plan

    agent, _, _, _, (s_b, _) = run
    cfg, A, n = agent.cfg, agent.env.spec.action_size, 3
    params = s_b.train.params
    obs = jax.random.normal(jax.random.key(2), (n, agent.env.spec.obs_size))
    prev = jax.random.uniform(jax.random.key(3), (n, cfg.horizon, A), minval=-1, maxval=1)
    is_first = jnp.asarray([True, False, False])
    key = jax.random.key(4)
    action, mean, _ = jax.jit(agent.policy_fn(params, eval_mode))(prev, obs, is_first, key)
    for i, k in enumerate(jax.random.split(key, n)):
        nz = draw_plan_noise(k, cfg, A)
        a_i, m_i = jax.jit(
            lambda o, m, t0, nz: plan(agent.wm, cfg, params, o, m, t0, nz, eval_mode=eval_mode)[:2]
        )(obs[i], prev[i], is_first[i], nz)
        np.testing.assert_allclose(np.asarray(action[i]), np.asarray(a_i), atol=1e-6)
        np.testing.assert_allclose(np.asarray(mean[i]), np.asarray(m_i), atol=1e-6)
    assert not np.allclose(np.asarray(action[1]), np.asarray(action[2]))


def test_migrate_between_run_lengths_is_exact(run):
    """A state saved by the agent of a shorter run, migrated into a longer run's agent
    (zero-padded episode ring), is exactly the longer run's state while the ring has not
    wrapped; and back (the unwritten tail cut). What the launcher does for a
    ``+resume=force`` relaunch with another ``n_timesteps``."""
    agent, _, _, (s_a, _), _ = run
    steps_done = N_TICKS // 2 // (T + 1) * T * TINY.n_envs
    short = TDMPC2(TINY, agent.env, total_env_steps=steps_done)
    assert short.buffer.episodes < agent.buffer.episodes
    cut = short.migrate(s_a, agent.total_env_steps)
    assert cut.buffer.obs.shape[0] == short.buffer.episodes
    back = agent.migrate(cut, short.total_env_steps)
    raw = lambda s: jax.tree.leaves(to_raw(s))  # noqa: E731
    for a, b in zip(raw(back), raw(s_a), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert agent.migrate(s_a, agent.total_env_steps) is s_a
