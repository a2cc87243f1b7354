"""The static schedule against a Python port of the reference online loop (n_envs = 1),
and its n_envs > 1 generalisation (deviation T29) on exact counts."""

import jax.numpy as jnp
import numpy as np
import pytest

from agents.tdmpc2.schedule import Schedule


def reference_online_loop(T: int, seed_steps: int, steps: int) -> list[tuple[bool, int, int]]:
    """Port of b67b21c trainer/online_trainer.py:67-117 on a counter env of length T.

    Returns per env step: (random action?, updates after the step, episodes in the buffer).
    """
    out, buffer_eps, t, done, step = [], 0, 0, True, 0
    while step <= steps:
        if done:
            if step > 0:
                buffer_eps += 1  # the finished episode is added at the next iteration's top
            t = 0
        random = not step > seed_steps
        t += 1
        done = t == T
        n = 0
        if step >= seed_steps:
            n = seed_steps if step == seed_steps else 1
        out.append((random, n, buffer_eps))
        step += 1
    return out


@pytest.mark.parametrize("T,S", [(20, 100), (500, 2500), (7, 30), (10, 10), (200, 1000)])
def test_matches_reference_loop_single_env(T, S):
    sched = Schedule(T=T, n_envs=1, seed_steps=S)
    steps = max(S + 3 * T, 4 * T)
    ref = reference_online_loop(T, S, steps)
    ticks = jnp.arange(steps + steps // T + 2)
    stepping = np.asarray(sched.is_stepping(ticks))
    ours_random = np.asarray(sched.random_actions(ticks))[stepping]
    ours_n = np.asarray(sched.n_updates(ticks))
    committed = (np.asarray(ticks) + 1) // (T + 1)  # rounds whose hold tick has passed
    assert (ours_n[~stepping] == 0).all()
    ours = list(zip(ours_random, ours_n[stepping], committed[stepping], strict=True))
    for k, (r, n, eps) in enumerate(ref):
        o_r, o_n, o_eps = ours[k]
        assert (bool(o_r), int(o_n)) == (r, n), f"step {k}"
        if n:  # the buffer the reference samples from holds exactly our committed episodes
            assert int(o_eps) == eps, f"step {k}"


def test_dmc_burst_position():
    """DMC (T=500, S=2500): the burst follows step 2500 with 5 completed episodes."""
    sched = Schedule(T=500, n_envs=1, seed_steps=2500)
    assert sched.burst_tick == 2505
    assert int(sched.n_updates(2505)) == 2500
    assert int(sched.env_steps_through(2505)) == 2501


@pytest.mark.parametrize("n_envs", [2, 4, 16])
def test_multi_env_counts(n_envs):
    T, S = 50, 250
    sched = Schedule(T=T, n_envs=n_envs, seed_steps=S)
    ticks = jnp.arange(20 * (T + 1))
    n = np.asarray(sched.n_updates(ticks))
    b = sched.burst_tick
    # the burst is the first stepping tick that takes the env-step total above S, and
    # comes after the first committed round
    assert int(sched.env_steps_through(b)) > S >= int(sched.env_steps_through(b - 1)) or b == T + 1
    assert b >= T + 1 and bool(sched.is_stepping(b))
    assert n[b] == S and (n[:b] == 0).all()
    after = np.arange(len(n)) > b
    stepping = np.asarray(sched.is_stepping(ticks))
    np.testing.assert_array_equal(n[after & stepping], n_envs)
    np.testing.assert_array_equal(n[after & ~stepping], 0)
    # UTD 1: after the burst, updates == env steps taken
    steps_after = int(sched.env_steps_through(len(n) - 1) - sched.env_steps_through(b))
    assert n[after].sum() == steps_after


def test_burst_waits_for_a_committed_round():
    """S < T: the reference would sample from an empty buffer; we delay the burst to the
    first stepping tick after the first committed round."""
    sched = Schedule(T=10, n_envs=1, seed_steps=3)
    assert sched.burst_tick == 11
    assert int(sched.n_updates(11)) == 3
    assert bool(sched.random_actions(11)) and not bool(sched.random_actions(12))
