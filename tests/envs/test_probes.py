"""Probe envs (docs/design.md §5.4): fixed length, never terminate, known rewards and values."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs.probes import PROBE_EPISODE_LENGTH


def rollout(env, actions):
    """Reset, then step through ``actions`` [S, A]; returns stacked states (jitted)."""

    @jax.jit
    def run(key, actions):
        state = env.reset(key)

        def body(s, a):
            s = env.step(s, a)
            return s, s

        return state, jax.lax.scan(body, state, actions)[1]

    return run(jax.random.PRNGKey(0), jnp.asarray(actions, jnp.float32))


@pytest.mark.parametrize("env_id", ["probe_constant_reward", "probe_reward_is_action"])
def test_probe_spec_and_time_limit(env_id):
    env = envs.make(env_id)
    s = env.spec
    assert (s.backend, s.obs_size, s.action_size, s.discrete) == ("probe", 1, 1, False)
    assert s.episode_length == PROBE_EPISODE_LENGTH == 20 and not s.can_terminate
    assert (s.action_low, s.action_high) == ((-1.0,), (1.0,))
    T = s.episode_length
    first, traj = rollout(env, np.zeros((T + 2, 1)))
    np.testing.assert_array_equal(first.obs, [1.0])
    np.testing.assert_array_equal(traj.obs, np.ones((T + 2, 1)))
    np.testing.assert_array_equal(traj.t, np.arange(1, T + 3))
    # done exactly from t == T on (step never resets), never terminated
    np.testing.assert_array_equal(traj.done, np.arange(1, T + 3) >= T)
    assert not traj.terminated.any()


def test_constant_reward_value_with_time_limit_bootstrap():
    env = envs.make("probe_constant_reward")
    T = env.spec.episode_length
    rng = np.random.default_rng(0)
    _, traj = rollout(env, rng.uniform(-1, 1, (T, 1)))
    np.testing.assert_array_equal(traj.reward, np.ones(T))
    # obs never changes and no step terminates, so V(s) = r + gamma V(s) at every step,
    # including the time-limit step: V = 1 / (1 - gamma).
    for gamma in (0.9, 0.975, 0.99):
        v = 1.0 / (1.0 - gamma)
        target = traj.reward + gamma * v * (1.0 - traj.terminated)
        np.testing.assert_allclose(target, v, rtol=1e-6)


def test_reward_is_action_clipped_in_agent_units():
    env = envs.make("probe_reward_is_action")
    actions = np.array([[1.0], [-0.3], [0.5], [2.0], [-5.0]])
    _, traj = rollout(env, actions)
    np.testing.assert_allclose(traj.reward, [1.0, -0.3, 0.5, 1.0, -1.0], rtol=1e-6)
    # +1 is optimal: no action in [-1, 1] earns more
    grid = np.linspace(-1, 1, 21)[:, None]
    _, traj = rollout(env, grid)
    assert traj.reward.argmax() == 20


def test_probe_episode_length_and_repeat():
    env = envs.make("probe_constant_reward", action_repeat=2, episode_length=10)
    assert env.spec.episode_length == 5 and env.spec.action_repeat == 2
    _, traj = rollout(env, np.zeros((6, 1)))
    np.testing.assert_array_equal(traj.reward, 2.0)  # summed over the 2 repeats
    np.testing.assert_array_equal(traj.done, [False] * 4 + [True, True])
    assert envs.make("probe_reward_is_action", episode_length=7).spec.episode_length == 7


def test_pixel_point_moves_and_draws_its_position():
    """probe_pixel_point (issue 48): the vector mode observes the position; the image mode
    draws the same trajectory (same key) as a 5 x 5 square at the position's pixel and the
    3 x 3 target at the centre; reward 1 - |p| / sqrt(2) of the position reached."""
    from envs.probes import POINT_SPEED

    vec, img = envs.make("probe_pixel_point"), envs.make("probe_pixel_point", obs="image")
    assert (vec.spec.obs_size, vec.spec.action_size, vec.spec.obs_mode) == (2, 2, "vector")
    assert img.spec.obs_size == 0 and img.spec.image_shape == (64, 64, 3)
    actions = np.array([[1.0, -1.0], [-0.5, 0.25], [3.0, 3.0]], np.float32)  # last: clipped
    v0, vt = rollout(vec, actions)
    i0, it = rollout(img, actions)
    pos = np.concatenate([np.asarray(v0.obs)[None], np.asarray(vt.obs)])  # [4, 2]
    step = POINT_SPEED * np.clip(actions, -1, 1)
    np.testing.assert_allclose(pos[1:], np.clip(pos[:-1] + step, -1, 1), atol=1e-7)  # f32 add
    np.testing.assert_allclose(vt.reward, 1 - np.linalg.norm(pos[1:], axis=1) / np.sqrt(2), 1e-6)
    np.testing.assert_array_equal(vt.reward, it.reward)
    images = np.concatenate([np.asarray(i0.obs)[None], np.asarray(it.obs)])
    assert images.dtype == np.uint8 and set(np.unique(images)) == {0, 255}
    for p, im in zip(pos, images, strict=True):
        col, row = np.round((p + 1) / 2 * 63).astype(int)
        rows, cols = np.nonzero(im[..., 0])
        assert set(rows) == set(range(max(row - 2, 0), min(row + 3, 64)))
        assert set(cols) == set(range(max(col - 2, 0), min(col + 3, 64)))
        np.testing.assert_array_equal(np.argwhere(im[..., 1]).min(0), [30, 30])
        assert im[..., 1].sum() == 9 * 255 and not im[..., 2].any()


def test_only_the_pixel_probe_has_an_image():
    with pytest.raises(ValueError, match="offered by probe_pixel_point only"):
        envs.make("probe_constant_reward", obs="image")
