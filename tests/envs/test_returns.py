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
