"""The achievements contract (issue 46): ``EnvSpec.achievements``, ``EnvState.unlocked``, and
:func:`envs.autoreset.autoreset` keeping the ending step's ``unlocked``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs.autoreset import autoreset
from envs.core import Env, EnvSpec, EnvState

NAMES = ("first", "second", "third")
T = 3  # toy episode: achievement t - 1 unlocks on agent step t, the episode ends at t = T


def toy_env() -> Env:
    spec = EnvSpec("toy_ach", "custom", 1, 2, True, T, achievements=NAMES)

    def reset(key):
        return EnvState(
            inner=jnp.zeros((), jnp.int32),
            obs=jnp.zeros((1,), jnp.float32),
            reward=jnp.zeros((), jnp.float32),
            done=jnp.zeros((), bool),
            terminated=jnp.zeros((), bool),
            t=jnp.zeros((), jnp.int32),
            key=key,
            unlocked=jnp.zeros((len(NAMES),), bool),
        )

    def step(state, action):
        del action
        t = state.t + 1
        return state.replace(
            inner=state.inner + 1,
            obs=t.astype(jnp.float32)[None],
            reward=jnp.ones((), jnp.float32),
            done=t >= T,
            t=t,
            unlocked=jnp.arange(len(NAMES)) == t - 1,
        )

    return Env(spec=spec, reset=reset, step=step)


def test_defaults_leave_existing_envs_unchanged():
    env = envs.make("cartpole")
    assert env.spec.achievements == ()
    state = autoreset(env).step(autoreset(env).reset(jax.random.PRNGKey(0)), jnp.eye(2)[0])
    assert state.unlocked is None  # no new leaf in the pytree of envs without achievements


def test_autoreset_keeps_the_ending_steps_unlocked():
    env = autoreset(toy_env())
    state = env.reset(jax.random.PRNGKey(0))
    assert not state.unlocked.any()
    rows = []
    for _ in range(2 * T):
        state = env.step(state, jnp.eye(2)[0])
        rows.append((bool(state.done), int(state.t), np.asarray(state.unlocked)))
    # step T ends the episode: the state is already the next episode's (t = 0), but
    # unlocked is that ending step's (achievement T - 1), as its reward would be
    done, t, unlocked = rows[T - 1]
    assert done and t == 0
    np.testing.assert_array_equal(unlocked, np.arange(len(NAMES)) == T - 1)
    # OR over each episode's steps: the whole set, in both episodes
    for episode in (rows[:T], rows[T:]):
        np.testing.assert_array_equal(np.any([u for _, _, u in episode], axis=0), True)
