"""A toy env with achievements (issue 46), for the evaluation tests; also a user's env
factory (``env=custom env.factory=achievement_toy:make_env``).

Each episode draws a bit ``b`` at its reset (shown as ``obs[0]``). ``b = 1``: the episode
terminates on agent step 3 and unlocks ``stone`` on that ending step. ``b = 0``: it runs to
the time limit T and unlocks ``wood`` on step 1 and ``diamond`` on step T (the ending step,
by the time limit). Reward 1 per step, so the return tells the kind: 3 (``b = 1``) or T.
An env whose first episode is ``b = 1`` may unlock ``wood`` again in its next episode: an
evaluation that counts past the first episode's end would show it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import envs

NAMES = ("wood", "stone", "diamond")
SHORT = 3  # agent steps of a b = 1 episode


def make_env(action_repeat: int = 1, episode_length: int | None = None) -> envs.Env:
    """The toy at repeat 1 (only), time limit ``episode_length`` agent steps (default 10)."""
    if action_repeat != 1:
        raise ValueError("the achievement toy runs at action_repeat=1 only")
    T = 10 if episode_length is None else episode_length
    spec = envs.EnvSpec(
        "achievement_toy", "toy", obs_size=2, action_size=2, discrete=True, episode_length=T,
        can_terminate=True, achievements=NAMES,
    )  # fmt: skip

    def reset(key: jax.Array) -> envs.EnvState:
        key, draw = jax.random.split(key)
        b = jax.random.bernoulli(draw)
        obs = jnp.stack([b.astype(jnp.float32), 0.0])
        state = envs.EnvState(
            inner=b,
            obs=obs,
            reward=jnp.zeros((), jnp.float32),
            done=jnp.zeros((), bool),
            terminated=jnp.zeros((), bool),
            t=jnp.zeros((), jnp.int32),
            key=key,
        )
        return state.replace(unlocked=jnp.zeros((len(NAMES),), bool))

    def step(state: envs.EnvState, action: jax.Array) -> envs.EnvState:
        del action
        b, t = state.inner, state.t + 1
        terminated = b & (t == SHORT)
        unlocked = jnp.stack([~b & (t == 1), terminated, ~b & (t == T)])
        return state.replace(
            obs=jnp.stack([b.astype(jnp.float32), t / T]),
            reward=jnp.ones((), jnp.float32),
            done=terminated | (t >= T),
            terminated=terminated,
            t=t,
            unlocked=unlocked,
        )

    return envs.Env(spec=spec, reset=reset, step=step)
