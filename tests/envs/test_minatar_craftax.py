"""The MinAtar and Craftax backends (issue 46): shapes, flags, the observation layout, variable
episode lengths through the row collector, and Craftax's achievements contract."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs.autoreset import autoreset
from envs.row_collector import RowCollector

DO = 5  # Craftax-Classic's Action.DO (checked in test_craftax_classic_spec)


def rollout(env, n_steps: int, key: int = 0):
    """Reset + ``n_steps`` uniform-random one-hot actions, jitted: (first state, states [n])."""
    n = env.spec.action_size

    @jax.jit
    def go(key):
        k0, k1 = jax.random.split(key)
        state = env.reset(k0)

        def body(s, k):
            s = env.step(s, jax.nn.one_hot(jax.random.randint(k, (), 0, n), n))
            return s, s

        return state, jax.lax.scan(body, state, jax.random.split(k1, n_steps))[1]

    return jax.device_get(go(jax.random.PRNGKey(key)))


# ------------------------------------------------------------------------ MinAtar
def test_minatar_obs_is_gymnax_grid_flattened_row_major():
    import gymnax

    env = envs.make("breakout_minatar")
    spec = env.spec
    assert (spec.obs_size, spec.action_size, spec.discrete) == (400, 3, True)
    assert spec.episode_length == 1000 and spec.can_terminate and spec.achievements == ()
    key = jax.random.PRNGKey(3)
    state = env.reset(key)
    assert state.obs.shape == (400,) and state.obs.dtype == jnp.float32
    assert state.unlocked is None
    genv, params = gymnax.make("Breakout-MinAtar")
    grid, _ = genv.reset_env(jax.random.split(key)[0], params)  # build_env's reset key
    assert grid.shape == (10, 10, 4)
    # obs[(row * 10 + col) * C + channel] = grid[row, col, channel]
    np.testing.assert_array_equal(np.asarray(state.obs), np.asarray(grid).reshape(-1))
    assert set(np.unique(np.asarray(state.obs))) <= {0.0, 1.0}


def test_minatar_time_limit_is_a_truncation():
    env = envs.make("freeway_minatar", episode_length=6)  # Freeway never terminates
    assert not env.spec.can_terminate and env.spec.obs_size == 700
    _, traj = rollout(env, 6)
    np.testing.assert_array_equal(traj.done, [False] * 5 + [True])
    assert not traj.terminated.any()
    np.testing.assert_array_equal(traj.t, np.arange(1, 7))


def test_minatar_variable_episodes_through_the_row_collector():
    """Breakout under a random policy loses the ball after a few dozen steps: episodes of
    different lengths, each first ... last in the rows, every end a true termination."""
    env = envs.make("breakout_minatar")
    n_envs, n_ticks = 3, 240
    col = RowCollector(env, n_envs, "dynamic")

    @jax.jit
    def go(key):
        state = col.init(key)

        def body(state, i):
            state, row, stats = col.tick(state, i, jax.random.fold_in(key, i))
            return state, (row, stats)

        return jax.lax.scan(body, state, jnp.arange(n_ticks))

    state, (rows, stats) = jax.device_get(go(jax.random.PRNGKey(0)))
    lengths = stats.lengths[stats.done]
    assert len(lengths) >= 2 * n_envs and len(set(lengths.tolist())) >= 3  # variable lengths
    assert (lengths < 1000).all()
    np.testing.assert_array_equal(rows.is_terminal, rows.is_last)  # all before the limit
    for e in range(n_envs):
        first, last = rows.is_first[:, e], rows.is_last[:, e]
        # each last row is followed by a first row (the held tick emits the reset obs)
        np.testing.assert_array_equal(first[1:][last[:-1]], True)
        # an episode of L agent steps is L + 1 rows: first ... last
        starts, ends = np.flatnonzero(first), np.flatnonzero(last)
        np.testing.assert_array_equal(ends - starts[: len(ends)], stats.lengths[ends, e])
    np.testing.assert_array_equal(rows.reward[rows.is_first], 0.0)
    assert int(state.env_steps) == n_ticks * n_envs - rows.is_last.sum()


def test_minatar_renderer_draws_the_grid():
    from envs.render import renderer

    env = envs.make("space_invaders_minatar")
    state = env.reset(jax.random.PRNGKey(0))
    r = renderer("space_invaders_minatar", size=(60, 80))
    with r.open() as frame:
        image = frame(jax.device_get(r.keep(state.inner)))
    assert image.shape == (60, 80, 3) and image.dtype == np.uint8
    assert len(np.unique(image.reshape(-1, 3), axis=0)) >= 3  # background + two objects


# ------------------------------------------------------------------------ Craftax
@pytest.fixture(scope="module")
def classic():
    return envs.make("craftax_classic")


def test_craftax_classic_spec(classic):
    from craftax.craftax_classic.constants import Achievement, Action

    spec = classic.spec
    assert (spec.obs_size, spec.action_size, spec.discrete) == (1345, 17, True)
    assert spec.episode_length == 10000 and spec.can_terminate
    assert len(spec.achievements) == 22 and spec.achievements[0] == "collect_wood"
    assert spec.achievements == tuple(a.name.lower() for a in Achievement)
    assert Action.DO.value == DO
    full = envs.spec_of("craftax")  # built without generating a world
    assert (full.obs_size, full.action_size, len(full.achievements)) == (8268, 43, 67)
    # full Craftax's enum declares achievements out of index order: names follow the index
    from craftax.craftax.constants import Achievement as FullAchievement

    for a in FullAchievement:
        assert full.achievements[a.value] == a.name.lower()


def _face_tree(state):
    """The player's four neighbours made trees (whichever way it faces, DO hits one)."""
    from craftax.craftax_classic.constants import BlockType

    inner = state.inner
    around = inner.player_position + jnp.array([[0, -1], [0, 1], [-1, 0], [1, 0]])
    new_map = inner.map.at[around[:, 0], around[:, 1]].set(BlockType.TREE.value)
    return state.replace(inner=inner.replace(map=new_map))


def test_craftax_collect_wood_unlocks_once(classic):
    step = jax.jit(classic.step)
    do = jax.nn.one_hot(DO, 17)
    state = classic.reset(jax.random.PRNGKey(0))
    state = step(_face_tree(state), do)
    wood = np.arange(22) == 0  # collect_wood
    np.testing.assert_array_equal(state.unlocked, wood)
    assert state.inner.achievements[0] and int(state.inner.inventory.wood) == 1
    # Classic's reward: +1 per new achievement (plus 0.1 x health change, here none)
    assert float(state.reward) == pytest.approx(1.0)
    state = step(_face_tree(state), do)  # wood again: nothing new (new & ~old)
    assert not state.unlocked.any() and int(state.inner.inventory.wood) == 2


def test_craftax_reset_step_truncation_and_autoreset_unlocked():
    """One-step episodes: the reset's shapes, a time-limit end (not a termination), and the
    auto-reset keeping the ending step's ``unlocked`` (collect_wood) in the next episode."""
    env = autoreset(envs.make("craftax_classic", episode_length=1))
    state = env.reset(jax.random.PRNGKey(1))
    assert state.obs.shape == (1345,) and state.obs.dtype == jnp.float32
    assert state.unlocked.shape == (22,) and state.unlocked.dtype == bool
    assert not state.unlocked.any()
    wrapper = state.inner
    trees = _face_tree(state.replace(inner=wrapper.inner)).inner
    state = jax.jit(env.step)(state.replace(inner=wrapper.replace(inner=trees)), jnp.eye(17)[DO])
    assert bool(state.done) and not bool(state.terminated)  # the time limit: a truncation
    assert int(state.t) == 0 and state.reward.dtype == jnp.float32
    assert ((state.final_obs >= 0) & (state.final_obs <= 1)).all()
    assert not state.inner.inner.achievements.any()  # the next episode's fresh world
    np.testing.assert_array_equal(state.unlocked, np.arange(22) == 0)  # the ending step's
