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


def test_random_episodes_or_the_achievements_up_to_the_ending_step():
    from types import SimpleNamespace
    from typing import NamedTuple

    import jax
    import jax.numpy as jnp
    import numpy as np

    from tests.launcher.launcher_fakes import benchmark_script

    random_episodes = benchmark_script("_random_policy").random_episodes

    class S(NamedTuple):  # a fake env: step t pays 1 and unlocks achievement t % 3
        t: jax.Array
        limit: jax.Array  # the episode ends on step `limit` (1..4, drawn at reset)
        reward: jax.Array
        done: jax.Array
        unlocked: jax.Array

    def step(s, action):
        t = s.t + 1
        return S(t, s.limit, jnp.float32(1.0), t >= s.limit, jax.nn.one_hot(s.t % 3, 3) > 0)

    def reset(key):
        no = jnp.zeros((3,), bool)
        return S(jnp.int32(0), jax.random.randint(key, (), 1, 5), jnp.float32(0), False, no)

    spec = SimpleNamespace(episode_length=10, action_size=2, achievements=("a", "b", "c"))
    env = SimpleNamespace(spec=spec, step=step, reset=reset)
    returns, sets = map(np.asarray, random_episodes(env, 16, jax.random.key(0)))
    # an episode of L steps returns L and unlocked {t % 3 : t < L}: steps after its end
    # (which would add the rest) do not count
    assert set(returns.tolist()) <= {1.0, 2.0, 3.0, 4.0} and len(set(returns.tolist())) > 1
    expected = np.arange(3)[None, :] < np.minimum(returns, 3)[:, None]
    assert (sets == expected).all()
