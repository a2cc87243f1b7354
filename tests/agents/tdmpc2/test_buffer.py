"""Episode buffer (docs/design.md §7.4): in-place rows, commit on the hold tick, FIFO by round,
windows that never cross episodes, uniform sampling."""

import jax
import jax.numpy as jnp
import numpy as np

from agents.tdmpc2.buffer import EpisodeBuffer


def fill(buf: EpisodeBuffer, n_ticks: int):
    """Write rows whose obs encode (episode round, env, row): obs = [round, env, row]."""
    state = buf.init()
    T, n = buf.T, buf.n_envs
    for i in range(n_ticks):
        r, row = i // (T + 1), i % (T + 1)
        obs = jnp.stack([jnp.full(n, r), jnp.arange(n), jnp.full(n, row)], -1).astype(jnp.float32)
        action = jnp.where(row == T, 0.0, obs[:, 2:3] + 0.5)  # a_k = k + .5 (0 on last row)
        reward = jnp.full(n, 0.0 if row == 0 else float(row))  # r_k = k on entering obs k
        state = buf.add(state, jnp.asarray(i), obs, action, reward)
    return state


def test_sizing_for_run():
    buf = EpisodeBuffer.for_run(
        T=500, n_envs=1, obs_size=24, action_size=6, buffer_size=1_000_000, env_steps=10_000
    )
    assert buf.rounds == 10_000 // 500 + 1
    assert buf.nbytes() == 4 * buf.rounds * 501 * 31
    small = EpisodeBuffer.for_run(
        T=10, n_envs=4, obs_size=3, action_size=1, buffer_size=100, env_steps=10_000
    )
    assert small.rounds == 3 + 1  # ceil(100 / 40) + staging


def test_slices_and_commit():
    T, n, H = 6, 3, 3
    buf = EpisodeBuffer(T=T, n_envs=n, obs_size=3, action_size=1, rounds=3)
    n_ticks = 2 * (T + 1) + 2  # two committed rounds + 2 rows of the third
    state = fill(buf, n_ticks)
    tick = n_ticks - 1
    assert int(buf.committed_rounds(tick)) == 2
    b = buf.sample(state, jnp.asarray(tick), jax.random.key(0), batch=4000, horizon=H)
    obs, act, rew = (np.asarray(x) for x in (b.obs, b.action, b.reward))
    assert obs.shape == (H + 1, 4000, 3) and act.shape == (H, 4000, 1) and rew.shape == (H, 4000)
    rounds, envs_, rows = obs[..., 0], obs[..., 1], obs[..., 2]
    # windows stay in one episode and are consecutive rows
    assert (rounds == rounds[0]).all() and (envs_ == envs_[0]).all()
    np.testing.assert_array_equal(np.diff(rows, axis=0), 1)
    assert rows[0].min() == 0 and rows[-1].max() == T
    # only committed rounds (0 and 1), never the staging round 2
    assert set(np.unique(rounds[0])) == {0.0, 1.0}
    # action at obs k, reward on entering obs k+1
    np.testing.assert_array_equal(act[..., 0], rows[:-1] + 0.5)
    np.testing.assert_array_equal(rew, rows[1:])
    # uniform over the 2 * 3 committed episodes and the T - H + 1 starts
    ep_counts = np.unique(rounds[0] * n + envs_[0], return_counts=True)[1]
    assert ep_counts.size == 6 and np.abs(ep_counts / 4000 - 1 / 6).max() < 0.03
    start_counts = np.unique(rows[0], return_counts=True)[1]
    assert start_counts.size == T - H + 1
    assert np.abs(start_counts / 4000 - 1 / (T - H + 1)).max() < 0.03


def test_fifo_wraparound():
    T, n = 4, 2
    buf = EpisodeBuffer(T=T, n_envs=n, obs_size=3, action_size=1, rounds=3)
    n_ticks = 5 * (T + 1)  # 5 rounds through a ring of 3: rounds 3, 4 committed
    state = fill(buf, n_ticks)
    tick = n_ticks - 1
    b = buf.sample(state, jnp.asarray(tick), jax.random.key(1), batch=500, horizon=2)
    assert set(np.unique(np.asarray(b.obs[0, :, 0]))) == {3.0, 4.0}
