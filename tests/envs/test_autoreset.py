"""Fresh auto-reset wrapper (docs/design.md §5.2, deviation E20)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs.autoreset import AutoResetEnv, autoreset, get_final_obs

N_STEPS = 300


def run_random(env, n_steps, key=0):
    """Reset + ``n_steps`` uniform-random actions, jitted; returns (first, states [n])."""
    spec = env.spec

    @jax.jit
    def go(key):
        k0, k1 = jax.random.split(key)
        state = env.reset(k0)

        def body(s, k):
            if spec.discrete:
                idx = jax.random.randint(k, (), 0, spec.action_size)
                a = jax.nn.one_hot(idx, spec.action_size)
            else:
                a = jax.random.uniform(k, (spec.action_size,), minval=-1.0, maxval=1.0)
            s = env.step(s, a)
            return s, s

        return state, jax.lax.scan(body, state, jax.random.split(k1, n_steps))[1]

    return jax.device_get(go(jax.random.PRNGKey(key)))


@pytest.fixture(scope="module")
def cartpole():
    return envs.make("cartpole")


@pytest.fixture(scope="module")
def cartpole_fresh(cartpole):
    return run_random(autoreset(cartpole), N_STEPS)


def out_of_bounds(obs):
    """CartPole-v1 termination region: |x| > 2.4 or |theta| > 12 degrees."""
    return (np.abs(obs[..., 0]) > 2.4) | (np.abs(obs[..., 2]) > 12 * 2 * np.pi / 360)


def test_wrapper_flags_and_spec(cartpole):
    fresh, cached = autoreset(cartpole), autoreset(cartpole, fresh_reset=False)
    assert isinstance(fresh, AutoResetEnv) and fresh.fresh_reset and not cached.fresh_reset
    assert fresh.spec is cartpole.spec and fresh.wrapped is cartpole
    assert autoreset(cartpole) is fresh  # cached: no retrace under jit
    with pytest.raises(ValueError, match="already"):
        autoreset(fresh)


def test_cartpole_keeps_final_obs_and_resets_fresh(cartpole_fresh):
    first, traj = cartpole_fresh
    done = traj.done
    assert done.sum() >= 5  # random CartPole falls within ~10-40 steps
    # every done is a termination here (no episode reaches T = 500)
    np.testing.assert_array_equal(traj.terminated, done)
    # final obs of an ended episode: the terminal obs, outside the bounds
    assert out_of_bounds(traj.final_obs[done]).all()
    # obs after an ended episode: the next reset obs, t = 0, inside U(-0.05, 0.05)
    assert (np.abs(traj.obs[done]) <= 0.05).all()
    np.testing.assert_array_equal(traj.t[done], 0)
    # steps that do not end the episode: final_obs = obs, t counts up
    np.testing.assert_array_equal(traj.final_obs[~done], traj.obs[~done])
    assert not out_of_bounds(traj.obs).any()
    # consecutive episodes start from different states
    starts = np.concatenate([first.obs[None], traj.obs[done]])
    assert len({tuple(o) for o in starts}) == len(starts)
    # t restarts: it equals steps since the last reset
    t, expected = 0, []
    for d in done:
        t = 0 if d else t + 1
        expected.append(t)
    np.testing.assert_array_equal(traj.t, expected)


def test_cartpole_cached_reset_restarts_from_first_state(cartpole):
    first, traj = run_random(autoreset(cartpole, fresh_reset=False), N_STEPS)
    done = traj.done
    assert done.sum() >= 5
    np.testing.assert_array_equal(traj.obs[done], np.broadcast_to(first.obs, traj.obs[done].shape))
    assert out_of_bounds(traj.final_obs[done]).all()


def test_get_final_obs_plain_and_wrapped(cartpole, cartpole_fresh):
    state = cartpole.reset(jax.random.PRNGKey(0))
    assert state.final_obs is None
    np.testing.assert_array_equal(get_final_obs(state), state.obs)
    _, traj = cartpole_fresh
    np.testing.assert_array_equal(get_final_obs(traj), traj.final_obs)


def test_time_limit_reset_and_vmap():
    env = autoreset(envs.make("probe_constant_reward", episode_length=4))
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), 3))
    step = jax.jit(jax.vmap(env.step))
    ts, dones = [], []
    for _ in range(9):
        states = step(states, jnp.zeros((3, 1)))
        ts.append(np.asarray(states.t))
        dones.append(np.asarray(states.done))
    np.testing.assert_array_equal(np.stack(ts)[:, 0], [1, 2, 3, 0, 1, 2, 3, 0, 1])
    np.testing.assert_array_equal(np.stack(dones)[:, 0], [0, 0, 0, 1, 0, 0, 0, 1, 0])
    assert not np.asarray(states.terminated).any()


@pytest.mark.slow
def test_playground_cartpole_balance_fresh_resets():
    """Time-limit resets on Playground draw new initial states (E20)."""
    T = 5
    env = autoreset(envs.make("cartpole_balance", episode_length=T))
    first, traj = run_random(env, 3 * T)
    done = traj.done
    np.testing.assert_array_equal(np.flatnonzero(done), [T - 1, 2 * T - 1, 3 * T - 1])
    assert not traj.terminated.any()
    starts = np.concatenate([first.obs[None], traj.obs[done]])
    assert len({tuple(np.round(o, 6)) for o in starts}) == 4
    # final obs is the stepped obs, not the reset obs
    assert not np.allclose(traj.final_obs[done], traj.obs[done])
    np.testing.assert_array_equal(traj.final_obs[~done], traj.obs[~done])
