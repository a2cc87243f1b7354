"""Action mapping agent units <-> env units (docs/design.md §5.1)."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from envs.bounds import check_bounds, to_agent_action, to_env_action
from envs.core import EnvSpec


def spec(low, high, discrete=False, n=None):
    return EnvSpec(
        env_id="x",
        backend="probe",
        obs_size=1,
        action_size=n if discrete else len(low),
        discrete=discrete,
        episode_length=10,
        action_low=None if discrete else tuple(low),
        action_high=None if discrete else tuple(high),
    )


PENDULUM = spec([-2.0], [2.0])
ASYMMETRIC = spec([0.0, -3.0], [1.0, 5.0])


def test_pendulum_bounds_scale_by_two_and_clip():
    a = jnp.array([[-1.0], [-0.5], [0.0], [0.25], [1.0], [3.0], [-7.0]])
    np.testing.assert_allclose(
        to_env_action(PENDULUM, a), [[-2.0], [-1.0], [0.0], [0.5], [2.0], [2.0], [-2.0]]
    )


def test_pendulum_matches_the_real_env_spec():
    import envs

    s = envs.spec_of("pendulum")
    assert (s.action_low, s.action_high) == ((-2.0,), (2.0,))
    np.testing.assert_allclose(to_env_action(s, jnp.array([0.5])), [1.0])


def test_asymmetric_box_centre_and_half_range():
    # c = (0.5, 1.0), h = (0.5, 4.0)
    a = jnp.array([[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0], [0.5, -0.25], [2.0, -2.0]])
    expected = [[0.0, -3.0], [0.5, 1.0], [1.0, 5.0], [0.75, 0.0], [1.0, -3.0]]
    np.testing.assert_allclose(to_env_action(ASYMMETRIC, a), expected)


@pytest.mark.parametrize("s", [PENDULUM, ASYMMETRIC])
def test_inverse_round_trips_inside_the_box(s):
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (100, s.action_size)).astype(np.float32)
    np.testing.assert_allclose(to_agent_action(s, to_env_action(s, a)), a, atol=1e-6)
    low, high = np.array(s.action_low), np.array(s.action_high)
    env_a = rng.uniform(low, high, (100, s.action_size)).astype(np.float32)
    np.testing.assert_allclose(to_env_action(s, to_agent_action(s, env_a)), env_a, atol=1e-5)


def test_inverse_does_not_clip():
    np.testing.assert_allclose(to_agent_action(PENDULUM, jnp.array([3.0])), [1.5])


def test_discrete_argmax_and_one_hot():
    s = spec(None, None, discrete=True, n=3)
    a = jnp.array([[0.1, 0.7, 0.2], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    idx = to_env_action(s, a)
    np.testing.assert_array_equal(idx, [1, 0, 2])
    assert idx.dtype == jnp.int32
    np.testing.assert_array_equal(to_agent_action(s, idx), np.eye(3)[[1, 0, 2]])


def test_bad_bounds_raise():
    with pytest.raises(ValueError, match="finite"):
        check_bounds((-np.inf,), (1.0,))
    with pytest.raises(ValueError, match="low < high"):
        check_bounds((1.0,), (1.0,))
    with pytest.raises(ValueError, match="differ in size"):
        check_bounds((0.0, 0.0), (1.0,))
    with pytest.raises(ValueError, match="no continuous Box"):
        to_env_action(dataclasses.replace(PENDULUM, action_low=None), jnp.zeros(1))
