"""Row collector (docs/design.md §5.2): exact row streams on a counter env, both modes, and
the same contracts on gymnax (CartPole, with terminations) and Playground."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs.core import Env, EnvSpec, initial_state
from envs.row_collector import RowCollector


def counter_env(T: int, terminate_at: int | None = None, random_length: bool = False) -> Env:
    """obs = [t, start, last action]; reward = t after the step; ``start`` drawn at reset.

    Terminates (terminated=True) when t reaches ``terminate_at`` (when given), or, with
    ``random_length``, when t reaches ``2 + floor(4 * start)`` (episodes of 2..5 steps).
    """
    spec = EnvSpec(
        env_id="counter",
        backend="probe",
        obs_size=3,
        action_size=1,
        discrete=False,
        episode_length=T,
        can_terminate=terminate_at is not None or random_length,
    )

    def reset(key):
        start = jax.random.uniform(key)
        return initial_state(inner=start, obs=jnp.stack([0.0, start, 0.0]), key=key)

    def step(state, action):
        t = state.t + 1
        term = jnp.asarray(False) if terminate_at is None else t >= terminate_at
        if random_length:
            term = t >= 2 + jnp.floor(4 * state.inner).astype(jnp.int32)
        obs = jnp.stack([t.astype(jnp.float32), state.inner, action[0]])
        return state.replace(
            obs=obs,
            reward=t.astype(jnp.float32),
            done=term | (t >= T),
            terminated=term,
            t=t,
        )

    return Env(spec=spec, reset=reset, step=step)


def run(collector: RowCollector, n_ticks: int, policy_fn=None, seed_ticks: int = 0, key=0):
    """Collect ``n_ticks`` from tick 0 in one jitted scan; returns (state, rows, stats)."""

    @jax.jit
    def go(key):
        k0, k1 = jax.random.split(key)
        state = collector.init(k0, policy_carry=jnp.zeros(collector.n_envs))

        def _body(state, i, k):
            state, row, stats = collector.tick(
                state, i, k, policy_fn, random_actions=i < seed_ticks
            )
            return state, (row, stats)

        xs = (jnp.arange(n_ticks), jax.random.split(k1, n_ticks))
        return jax.lax.scan(lambda s, x: _body(s, *x), state, xs)

    state, (rows, stats) = go(jax.random.key(key))
    return state, jax.tree.map(np.asarray, rows), jax.tree.map(np.asarray, stats)


def policy_t(carry, obs, is_first, key):
    """Deterministic policy: action = obs t / 10; carry counts policy calls per env."""
    return obs[:, :1] / 10.0, carry + 1, {"t_seen": obs[:, 0]}


# ------------------------------------------------------------------------ static
@pytest.mark.parametrize("n_envs", [1, 3])
def test_static_rows_per_episode(n_envs):
    T, episodes = 4, 3
    col = RowCollector(counter_env(T), n_envs, "static")
    n_ticks = episodes * (T + 1)
    state, rows, stats = run(col, n_ticks, policy_t)
    obs_t = rows.obs[..., 0]  # [ticks, n]
    expected_t = np.tile(np.r_[np.arange(T), T], episodes)
    np.testing.assert_array_equal(obs_t, np.repeat(expected_t[:, None], n_envs, 1))
    phase = np.arange(n_ticks) % (T + 1)
    np.testing.assert_array_equal(rows.is_first[:, 0], phase == 0)
    np.testing.assert_array_equal(rows.is_last[:, 0], phase == T)
    assert not rows.is_terminal.any()
    # reward on entering obs: 0 on reset rows, t otherwise
    np.testing.assert_array_equal(rows.reward[:, 0], np.where(phase == 0, 0, phase))
    # action zero on is_last rows; policy action elsewhere; stored action is the raw one
    np.testing.assert_allclose(rows.action[..., 0], np.where(phase == T, 0, obs_t.T / 10).T)
    # policy not called on hold ticks: carry counts T calls per episode
    np.testing.assert_array_equal(np.asarray(state.policy_carry), episodes * T)
    assert int(state.env_steps) == episodes * T * n_envs
    assert int(state.rows) == n_ticks * n_envs
    assert int(state.n_offschedule_dones) == 0
    # episode stats: one per episode, return = 1 + 2 + ... + T
    assert stats.done.sum() == episodes * n_envs
    np.testing.assert_array_equal(stats.returns[stats.done], T * (T + 1) / 2)
    np.testing.assert_array_equal(stats.lengths[stats.done], T)


def test_static_fresh_reset_and_distinct_envs():
    T = 3
    col = RowCollector(counter_env(T), 4, "static")
    _, rows, _ = run(col, 3 * (T + 1))
    starts = rows.obs[rows.is_first[:, 0], :, 1]  # [episodes, n]
    # every episode and every env starts from its own random state
    assert len(np.unique(starts)) == starts.size
    # within an episode the start is carried unchanged
    ep = np.arange(rows.obs.shape[0]) // (T + 1)
    for e in range(3):
        np.testing.assert_array_equal(
            rows.obs[ep == e, :, 1], np.broadcast_to(starts[e], (T + 1, 4))
        )


def test_static_seed_phase_random_actions():
    T = 4
    col = RowCollector(counter_env(T), 2, "static")
    state, rows, _ = run(col, 2 * (T + 1), policy_t, seed_ticks=T + 1)
    first = rows.action[:T, :, 0]
    assert (np.abs(first) <= 1).all() and np.unique(first).size == first.size
    np.testing.assert_allclose(
        rows.action[T + 1 : 2 * T + 1, :, 0], rows.obs[T + 1 : 2 * T + 1, :, 0] / 10
    )
    np.testing.assert_array_equal(np.asarray(state.policy_carry), T)
    assert rows.extras["t_seen"][:T].sum() == 0  # extras zero in the random phase


def test_static_counts_offschedule_dones():
    T = 5
    col = RowCollector(counter_env(T, terminate_at=3), 2, "static")
    state, rows, _ = run(col, 2 * (T + 1))
    # terminates at t=3 (off schedule) and stays done at t=4 and 5 (t=5 is on schedule)
    assert int(state.n_offschedule_dones) == 2 * 2 * 2
    # the schedule's last step is a termination too: is_terminal on the is_last rows
    np.testing.assert_array_equal(rows.is_terminal, rows.is_last)


def test_static_hold_tick_holds_env_state():
    """On the hold tick the held env is not stepped: the row obs is the final obs and the
    reset happens in the same tick, so the env state is replaced, never stepped."""
    T = 3
    col = RowCollector(counter_env(T), 2, "static")
    k = jax.random.key(3)
    state = col.init(k)
    for i in range(T):
        state, _, _ = col.tick(state, jnp.asarray(i), jax.random.fold_in(k, i))
    before = state.env_state
    held, row, _ = col.tick(state, jnp.asarray(T), jax.random.fold_in(k, T))
    np.testing.assert_array_equal(row.obs, before.obs)
    assert row.is_last.all()
    assert (np.asarray(held.env_state.t) == 0).all() and held.is_first.all()


# ----------------------------------------------------------------------- dynamic
def test_dynamic_counter_with_terminations():
    T, term = 6, 4
    col = RowCollector(counter_env(T, terminate_at=term), 1, "dynamic")
    _, rows, stats = run(col, 3 * (term + 1), policy_t)
    t = rows.obs[:, 0, 0]
    np.testing.assert_array_equal(t, np.tile(np.arange(term + 1), 3))
    np.testing.assert_array_equal(rows.is_last[:, 0], t == term)
    np.testing.assert_array_equal(rows.is_terminal[:, 0], t == term)
    np.testing.assert_array_equal(rows.is_first[:, 0], t == 0)
    starts = rows.obs[rows.is_first[:, 0], 0, 1]
    assert np.unique(starts).size == 3  # fresh reset every episode
    np.testing.assert_array_equal(stats.returns[stats.done], term * (term + 1) / 2)


def test_dynamic_per_env_hold():
    """Envs with different episode lengths stay independent: each env's stream is
    first .. last episodes of its own length, the held env emits its reset obs next."""
    n, n_ticks = 4, 40
    col = RowCollector(counter_env(100, random_length=True), n, "dynamic")
    state, rows, stats = run(col, n_ticks, key=5)
    lengths_seen = set()
    for e in range(n):
        t, start = rows.obs[:, e, 0], rows.obs[:, e, 1]
        k = 0
        while k < n_ticks:
            assert rows.is_first[k, e] and t[k] == 0
            L = 2 + int(np.floor(4 * np.float32(start[k])))
            seg = slice(k, min(k + L + 1, n_ticks))
            np.testing.assert_array_equal(t[seg], np.arange(seg.stop - seg.start))
            np.testing.assert_array_equal(start[seg], start[k])
            if k + L < n_ticks:
                assert rows.is_last[k + L, e] and rows.is_terminal[k + L, e]
                assert rows.action[k + L, e, 0] == 0.0
                lengths_seen.add(L)
            k += L + 1
    assert len(lengths_seen) > 1  # the envs really ran episodes of different lengths
    assert int(state.env_steps) == n * n_ticks - rows.is_last.sum()
    np.testing.assert_array_equal(stats.lengths[stats.done] >= 2, True)


# ------------------------------------------------------------------ real backends
def test_dynamic_gymnax_cartpole_terminations():
    env = envs.make("cartpole")
    col = RowCollector(env, 4, "dynamic")
    n_ticks = 300
    state, rows, stats = run(col, n_ticks)
    n_first, n_last = rows.is_first.sum(), rows.is_last.sum()
    assert rows.is_terminal.sum() > 4  # random CartPole falls quickly
    # every episode is first ... last: counts differ by at most one in-progress episode per env
    assert 0 <= n_first - n_last <= 4
    assert rows.is_terminal[~rows.is_last].sum() == 0
    # held tick: the env is not stepped, so steps = rows - last rows
    assert int(state.env_steps) == n_ticks * 4 - n_last
    # the reset row after a terminal row has reward 0 and a fresh state
    after = np.roll(rows.is_last, 1, axis=0)
    after[0] = False
    np.testing.assert_array_equal(rows.is_first[after], True)
    np.testing.assert_array_equal(rows.reward[rows.is_first], 0.0)
    lengths = stats.lengths[stats.done]
    assert (lengths >= 1).all() and (lengths < 500).all()
    # a terminal obs is outside CartPole's bounds (pole angle > 12 deg or |x| > 2.4)
    term_obs = rows.obs[rows.is_terminal]
    assert ((np.abs(term_obs[:, 2]) > 0.2094) | (np.abs(term_obs[:, 0]) > 2.4)).all()


@pytest.mark.slow
def test_static_playground_consecutive_episodes_differ():
    env = envs.make("cartpole_balance", episode_length=10)
    T = env.spec.episode_length
    col = RowCollector(env, 2, "static")
    _, rows, _ = run(col, 3 * (T + 1))
    firsts = rows.obs[rows.is_first[:, 0]]  # [3, 2, O]
    assert firsts.shape[0] == 3
    flat = firsts.reshape(-1, firsts.shape[-1])
    assert len({tuple(np.round(o, 6)) for o in flat}) == flat.shape[0]
    assert rows.is_last.sum() == 3 * 2


def test_dynamic_held_env_state_bit_identical():
    """On its hold tick an env is not stepped: its whole env state is bit-identical."""
    col = RowCollector(counter_env(100, random_length=True), 3, "dynamic")
    k = jax.random.key(11)
    state = col.init(k)
    tick = jax.jit(lambda s, i, k: col.tick(s, i, k))
    checked = 0
    for i in range(30):
        nxt, row, _ = tick(state, jnp.asarray(i), jax.random.fold_in(k, i))
        for e in np.flatnonzero(np.asarray(row.is_last)):
            for a, b in zip(
                jax.tree.leaves(state.env_state), jax.tree.leaves(nxt.env_state), strict=True
            ):
                if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
                    a, b = jax.random.key_data(a), jax.random.key_data(b)
                np.testing.assert_array_equal(np.asarray(a)[e], np.asarray(b)[e])
            checked += 1
        state = nxt
    assert checked >= 5


def test_static_gymnax_pendulum_episode_layout():
    """Static mode on gymnax: T + 1 rows per episode, the time limit on schedule, no
    off-schedule dones, bounded actions mapped inside the env (Pendulum [-2, 2])."""
    env = envs.make("pendulum")
    T = env.spec.episode_length
    col = RowCollector(env, 3, "static")
    state, rows, stats = run(col, 2 * (T + 1))
    phase = np.arange(2 * (T + 1)) % (T + 1)
    np.testing.assert_array_equal(rows.is_first[:, 0], phase == 0)
    np.testing.assert_array_equal(rows.is_last[:, 0], phase == T)
    assert int(state.n_offschedule_dones) == 0 and not rows.is_terminal.any()
    assert stats.done.sum() == 2 * 3 and (stats.lengths[stats.done] == T).all()
    assert (rows.reward[~rows.is_first] < 0).all()  # Pendulum's cost is always negative


@pytest.mark.slow
def test_dynamic_playground_time_limit_resets():
    """Dynamic mode on Playground: episodes end by the time limit only (never terminal),
    each followed by a fresh reset row."""
    env = envs.make("cartpole_balance", episode_length=6)
    col = RowCollector(env, 2, "dynamic")
    _, rows, _ = run(col, 3 * 7)
    np.testing.assert_array_equal(rows.is_last[:, 0], np.arange(21) % 7 == 6)
    assert not rows.is_terminal.any()
    firsts = rows.obs[rows.is_first].reshape(-1, env.spec.obs_size)
    assert len({tuple(np.round(o, 6)) for o in firsts}) == firsts.shape[0]
