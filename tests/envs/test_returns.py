"""envs.returns: the episode-return facts the learning-curve report draws (ranges,
random-policy and solved levels); static tables, nothing built."""

from __future__ import annotations

import math

import pytest

import envs
from envs.returns import REWARDS, episode_returns


def test_every_entry_is_a_registered_env_and_its_levels_lie_in_its_range():
    assert set(REWARDS) <= set(envs.list_envs())
    for env_id in REWARDS:
        r = episode_returns(env_id)
        assert r is not None and r.low <= r.high, env_id
        for level in (r.random, r.solved):
            assert level is None or r.low <= level <= r.high, env_id
        assert bool(r.solved_note) == (r.solved is not None), env_id


def test_ranges_follow_the_time_limit_and_levels_only_the_default_one():
    walker = episode_returns("walker_walk")
    assert (walker.low, walker.high, walker.random, walker.solved) == (0.0, 1000.0, None, None)
    pendulum = episode_returns("pendulum")
    assert pendulum.low == pytest.approx(-200 * (math.pi**2 + 6.4 + 0.004))
    assert (pendulum.high, pendulum.solved) == (0.0, -400.0) and pendulum.random < -1000
    assert episode_returns("mountain_car_continuous").high == 100.0  # the goal bonus
    short = episode_returns("acrobot", episode_length=100)
    assert (short.low, short.random, short.solved) == (-100.0, None, None)
    assert episode_returns("halfcheetah") is None and episode_returns("nope") is None


def test_random_policy_returns_count_each_step_once_and_stop_at_done():
    import jax

    from tests.launcher.launcher_fakes import benchmark_script

    random_returns = benchmark_script("_random_policy").random_returns  # a study's helper

    # probe_constant_reward pays 1 per step whatever the action: T 20 -> exactly 20
    out = random_returns(envs.make("probe_constant_reward"), 3, jax.random.key(0))
    assert out.shape == (3,) and [float(x) for x in out] == [20.0] * 3
    # reward = the action, U(-1, 1): a return has sd sqrt(20 / 3) = 2.6, the mean of 64 sd 0.32
    # (3.0 is ~9 sd), and no return passes +-T
    act = random_returns(envs.make("probe_reward_is_action"), 64, jax.random.key(1))
    assert abs(float(act.mean())) < 3.0 and float(abs(act).max()) <= 20.0
