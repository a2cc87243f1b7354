"""Facts of the three backends behind envs.make (docs/design.md §3, §5.1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs


def scan_steps(env, actions, key=0):
    """Reset, then step through ``actions`` [S, A] in one jitted scan; (first, states)."""

    @jax.jit
    def run(key, actions):
        state = env.reset(key)

        def body(s, a):
            s = env.step(s, a)
            return s, s

        return state, jax.lax.scan(body, state, actions)[1]

    return jax.device_get(run(jax.random.PRNGKey(key), jnp.asarray(actions, jnp.float32)))


# ------------------------------------------------------------------ specs (no compile)
@pytest.mark.parametrize(
    ("env_id", "obs_size", "action_size"),
    [("walker_walk", 24, 6), ("cartpole_balance", 5, 1), ("pendulum", 3, 1)],
)
def test_sizes(env_id, obs_size, action_size):
    spec = envs.spec_of(env_id)
    assert (spec.obs_size, spec.action_size, spec.discrete) == (obs_size, action_size, False)
    assert spec.action_low == (-(spec.action_high[0]),) * action_size


def test_pendulum_spec():
    spec = envs.spec_of("pendulum")
    assert (spec.action_low, spec.action_high) == ((-2.0,), (2.0,))
    assert spec.episode_length == 200 and not spec.can_terminate and spec.backend == "gymnax"


def test_cartpole_spec_discrete_terminating():
    spec = envs.spec_of("cartpole")
    assert (spec.obs_size, spec.action_size, spec.discrete) == (4, 2, True)
    assert spec.episode_length == 500 and spec.can_terminate
    assert spec.action_low is None


@pytest.mark.parametrize(
    ("env_id", "repeat", "episode_length", "T"),
    [
        ("pendulum", 1, None, 200),
        ("mountain_car_continuous", 1, None, 999),
        ("walker_walk", 1, None, 1000),
        ("walker_walk", 2, None, 500),
        ("cartpole_balance", 2, None, 500),
        ("cartpole_balance", 4, 100, 25),
        ("halfcheetah", 2, None, 500),
        ("probe_constant_reward", 2, 10, 5),
    ],
)
def test_episode_length_in_agent_steps(env_id, repeat, episode_length, T):
    spec = envs.spec_of(env_id, repeat, episode_length)
    assert spec.episode_length == T and spec.action_repeat == repeat
    assert envs.facts(env_id, repeat, episode_length) == envs.EnvFacts.from_spec(spec)


def test_repeat_must_divide_playground_limit():
    with pytest.raises(envs.EpisodeLengthError, match="not divisible by action_repeat=3"):
        envs.make("walker_walk", action_repeat=3)


def test_playground_is_built_with_jax_impl_and_patched_reacher():
    from mujoco.mjx._src import types

    from envs.playground_backend import load_raw

    env, _ = load_raw("CartpoleBalance")
    assert env.mjx_model.impl == types.Impl.JAX
    easy, _ = load_raw("ReacherEasy")
    hard, _ = load_raw("ReacherHard")
    size = lambda e: e.mj_model.geom_size[e.mj_model.geom("target").id, 0]  # noqa: E731
    assert size(easy) > size(hard)


def test_brax_specs():
    assert envs.spec_of("ant").can_terminate
    assert not envs.spec_of("halfcheetah").can_terminate
    spec = envs.spec_of("inverted_pendulum")  # ctrlrange [-3, 3], rescaled inside brax
    assert (spec.obs_size, spec.action_size) == (4, 1)
    assert (spec.action_low, spec.action_high) == ((-1.0,), (1.0,))


# ------------------------------------------------------------------ gymnax dynamics
def test_pendulum_time_limit_and_no_reset():
    env = envs.make("pendulum")
    T = env.spec.episode_length
    _, traj = scan_steps(env, np.zeros((T + 3, 1)))
    np.testing.assert_array_equal(traj.t, np.arange(1, T + 4))
    np.testing.assert_array_equal(traj.done, np.arange(1, T + 4) >= T)  # first at t == T
    assert not traj.terminated.any()
    assert traj.obs.dtype == np.float32 and traj.reward.dtype == np.float32


def test_pendulum_action_is_mapped_to_torque():
    """Agent action 0.5 on [-2, 2] is torque 1.0 in gymnax's own step."""
    import gymnax

    env = envs.make("pendulum")
    genv, params = gymnax.make("Pendulum-v1")
    state = env.reset(jax.random.PRNGKey(3))
    ours = env.step(state, jnp.array([0.5]))
    obs, _, reward, _, _ = genv.step_env(jax.random.PRNGKey(0), state.inner, 1.0, params)
    np.testing.assert_allclose(ours.obs, obs, rtol=1e-6)
    np.testing.assert_allclose(ours.reward, reward, rtol=1e-6)
    np.testing.assert_allclose(ours.inner.last_u, 1.0)


def test_cartpole_one_hot_and_termination():
    env = envs.make("cartpole")
    # always push right: the pole falls left within a few dozen steps
    _, traj = scan_steps(env, np.tile([0.0, 1.0], (100, 1)))
    k = int(np.argmax(traj.done))
    assert traj.done[k] and traj.terminated[k] and 0 < k < 99
    assert not traj.done[:k].any()
    theta, x = traj.obs[k, 2], traj.obs[k, 0]
    assert abs(theta) > 12 * 2 * np.pi / 360 or abs(x) > 2.4
    assert (np.diff(traj.obs[: k + 1, 1]) > 0).all()  # cart accelerates right (one-hot [0, 1])


# ------------------------------------------------------------------ action repeat
def test_action_repeat_sums_rewards_probe():
    """The generic repeat on a cheap env: reward = action, so a repeat-2 step earns 2a."""
    double = envs.make("probe_reward_is_action", action_repeat=2)
    _, traj = scan_steps(double, np.array([[0.25], [-0.5], [3.0]]))
    np.testing.assert_allclose(traj.reward, [0.5, -1.0, 2.0])
    np.testing.assert_array_equal(traj.t, [1, 2, 3])


@pytest.mark.slow
def test_action_repeat_on_playground():
    """Repeat 2 on Playground DMC: rewards summed, obs of the second control step, T=500."""
    single = envs.make("cartpole_balance", episode_length=10)
    double = envs.make("cartpole_balance", action_repeat=2, episode_length=10)
    assert double.spec.episode_length == 5
    a1, a2 = jnp.array([0.7]), jnp.array([0.7])

    @jax.jit
    def both(key):
        state = single.reset(key)
        s1 = single.step(state, a1)
        s2 = single.step(s1, a2)
        return s1, s2, double.step(state, a1)

    s1, s2, two = jax.device_get(both(jax.random.PRNGKey(2)))
    np.testing.assert_allclose(two.reward, s1.reward + s2.reward, rtol=1e-6)
    np.testing.assert_allclose(two.obs, s2.obs, rtol=1e-6, atol=1e-7)
    assert two.obs.dtype == np.float32 and two.obs.shape == (5,)


# ------------------------------------------------------------------ brax terminations
@pytest.mark.slow
def test_brax_inverted_pendulum_terminates():
    env = envs.make("inverted_pendulum")
    _, traj = scan_steps(env, np.ones((60, 1)))  # full push: the pole falls
    k = int(np.argmax(traj.done))
    assert traj.done[k] and traj.terminated[k] and k < 59
    assert abs(traj.obs[k, 1]) > 0.2
