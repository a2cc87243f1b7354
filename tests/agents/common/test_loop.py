"""The shared loop skeleton (agents/common/loop.py, docs/design.md §4.4) on a fake agent whose
updates log known values: ``Train/<name>`` is the mean over the chunk's updates (NaN when it
ran none), the episode reward the mean over the episodes that ended in the chunk, update
``j`` of a tick draws ``fold_in(key, j)``, and two chunks reach the state of one.

The logged values are multiples of 1/2 below 2^10: every sum is exact in float32, so the
means are compared exactly with float32 ``sum / count`` (one correctly rounded division).
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from agents.common.loop import EpisodeEnds, evaluate, run_updates, train_chunk

UPDATES = (0, 2, 1, 3, 0, 0, 1)  # updates per tick
ENDS = {1: (True, False, 5.0), 3: (True, True, 2.5), 6: (False, True, -1.0)}  # tick -> ends


@struct.dataclass
class State:
    n_updates: jax.Array  # [] int32
    key: jax.Array
    n_evals: jax.Array


def counters(state):
    return {"timestep": state.n_updates * 10, "Train/n_updates": state.n_updates}


def tick(state, i, sums):
    def update(u, key):  # update number u logs u / 2, a [2] vector and its key's draw
        m = {"loss": u / 2, "vec": jnp.stack([u / 2, -u / 2]), "draw": jax.random.uniform(key)}
        return u + 1, m

    n = jnp.asarray(UPDATES)[i]
    u, sums = run_updates(update, state.n_updates, n, jax.random.fold_in(state.key, i), sums)
    done = jnp.asarray([ENDS.get(t, (False, False, 0.0))[:2] for t in range(len(UPDATES))])[i]
    ret = jnp.asarray([ENDS.get(t, (False, False, 0.0))[2] for t in range(len(UPDATES))])[i]
    return state.replace(n_updates=u), sums, EpisodeEnds(done=done, returns=jnp.where(done, ret, 0))


LIKE = {"loss": jnp.zeros(()), "vec": jnp.zeros((2,)), "draw": jnp.zeros(())}
chunk = jax.jit(lambda s, ticks: train_chunk(tick, counters, s, ticks, LIKE))


def start():
    return State(jnp.zeros((), jnp.int32), jax.random.key(7), jnp.zeros((), jnp.int32))


def expected(ticks):
    """The chunk's update numbers and each update's key, from the fake's own rules."""
    first = sum(UPDATES[: ticks[0]])
    us = np.arange(first, first + sum(UPDATES[t] for t in ticks))
    keys = [
        jax.random.fold_in(jax.random.fold_in(jax.random.key(7), t), j)
        for t in ticks
        for j in range(UPDATES[t])
    ]
    return us, keys


def test_train_metrics_are_means_over_the_chunks_updates():
    ticks = [0, 1, 2, 3]
    state, m = chunk(start(), jnp.asarray(ticks))
    us, keys = expected(ticks)
    n = np.float32(len(us))
    assert int(m["Train/updates in chunk"]) == len(us) == 6
    assert int(m["Train/n_updates"]) == 6 and int(m["timestep"]) == 60
    assert float(m["Train/loss"]) == np.float32(np.sum(us / 2)) / n  # 1.25, not the last 2.5
    np.testing.assert_array_equal(m["Train/vec"], np.float32([1.25, -1.25]))
    draws = np.float32([float(jax.random.uniform(k)) for k in keys])
    summed = np.float32(0)
    for d in draws:  # the fori_loop's order of additions
        summed = np.float32(summed + d)
    assert float(m["Train/draw"]) == summed / n  # update j of tick t drew fold_in(k_t, j)
    # episodes that ended: tick 1 env 0 (5.0), tick 3 both envs (2.5 each)
    assert int(m["Train/episodes"]) == 3
    assert float(m["Train/episodic mean reward"]) == np.float32(10.0) / np.float32(3)


def test_a_chunk_without_updates_or_episodes_logs_nan():
    state, _ = chunk(start(), jnp.arange(4))
    state, m = chunk(state, jnp.asarray([4, 5]))
    assert int(m["Train/updates in chunk"]) == 0 and int(m["Train/episodes"]) == 0
    assert int(m["Train/n_updates"]) == 6  # counters still report the state
    for k in ("Train/loss", "Train/vec", "Train/draw", "Train/episodic mean reward"):
        assert np.isnan(np.asarray(m[k])).all(), k


def test_two_chunks_reach_the_state_of_one():
    whole, mw = chunk(start(), jnp.arange(7))
    half, _ = chunk(start(), jnp.arange(3))
    half, m2 = chunk(half, jnp.arange(3, 7))
    assert int(whole.n_updates) == int(half.n_updates) == sum(UPDATES)
    us, _ = expected([3, 4, 5, 6])  # the second chunk's mean is over its own updates only
    assert float(m2["Train/loss"]) == np.float32(np.sum(us / 2)) / np.float32(len(us))
    assert float(mw["Train/loss"]) == np.float32(np.sum(np.arange(7) / 2)) / np.float32(7)


def test_evaluate_folds_and_counts_the_evaluations():

    def run(key):
        return {"Eval/x": jax.random.uniform(key)}

    s1, m1 = evaluate(start(), jax.random.key(1), run)
    s2, m2 = evaluate(s1, jax.random.key(1), run)
    assert int(s2.n_evals) == 2
    assert float(m1["Eval/x"]) == float(
        jax.random.uniform(jax.random.fold_in(jax.random.key(1), 0))
    )
    assert float(m2["Eval/x"]) == float(
        jax.random.uniform(jax.random.fold_in(jax.random.key(1), 1))
    )
