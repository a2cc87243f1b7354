"""Fresh auto-reset wrapper (docs/design.md §5.2, deviation E20).

``autoreset(env)`` returns an :class:`AutoResetEnv` whose ``step`` steps ``env`` and,
when that step ends the episode (``done``: termination or time limit), resets it in the
same call. The returned :class:`envs.core.EnvState` then holds

* ``reward``, ``done``, ``terminated``, ``unlocked``: those of the step that ended the
  episode (``unlocked``: the achievements of that step, issue 46; None on envs without);
* ``final_obs``: that step's observation (the episode's final observation);
* ``obs``, ``inner``, ``t = 0``, ``key``: the next episode's reset state.

When the step does not end the episode the state is the inner step's with
``final_obs = obs``. :func:`get_final_obs` reads the final observation of any state
(``final_obs`` on wrapped envs, ``obs`` on plain ones), so the row collector's dynamic
mode emits the terminal obs (is_last row) and then the reset obs (is_first row).

Resets:

* ``fresh_reset=True`` (default): ``env.reset`` with a fresh key split from the carried
  ``EnvState.key``, so every episode starts from a new random initial state on every
  backend.
* ``fresh_reset=False``: restart from the first state this env slot was reset to,
  cached in the wrapper state (MuJoCo Playground's ``BraxAutoResetWrapper`` default).
  Every episode of a slot then starts from the same state; the flag
  ``AutoResetEnv.fresh_reset`` lets the row collector warn about it. The carried key
  still advances, so a stochastic backend's steps differ between episodes.

Under ``jax.vmap`` the reset is computed for every env at every step and selected
(``lax.cond`` becomes a select); unbatched it is a real branch. On an
:class:`envs.core.ObservedEnv` (an image drawn on the host) the branch resets without the
draw, and the reset frame is drawn after it only for the envs whose episode ended (E30).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from envs.core import Env, EnvState, ObservedEnv


@struct.dataclass
class AutoResetInner:
    """Wrapper state kept in ``EnvState.inner``.

    Attributes:
      inner: the wrapped env's own ``inner``.
      first_inner, first_obs: the cached first reset state (``fresh_reset=False``), else None.
    """

    inner: Any
    first_inner: Any = None
    first_obs: jax.Array | None = None


@dataclasses.dataclass(frozen=True)
class AutoResetEnv(Env):
    """An :class:`Env` that auto-resets ``wrapped`` (see the module docstring)."""

    wrapped: Env | None = None
    fresh_reset: bool = True


@functools.cache
def autoreset(env: Env, fresh_reset: bool = True) -> AutoResetEnv:
    """Wrap ``env`` so that ``step`` resets it when an episode ends (docs/design.md §5.2, E20).

    Cached: wrapping the same env twice returns the same object, so jitted functions
    that take it as a static argument are not retraced.

    Args:
      env: an unwrapped env (wrapping twice raises ValueError).
      fresh_reset: True: reset with a fresh key every episode; False: restart from the
        cached first state.

    Returns:
      The wrapped env, same spec; its states carry ``final_obs`` ([obs_size] float32).
    """
    if isinstance(env, AutoResetEnv):
        raise ValueError(f"{env.spec.env_id} is already auto-reset-wrapped")

    def reset(key: jax.Array) -> EnvState:
        state = env.reset(key)
        wrapper = AutoResetInner(
            inner=state.inner,
            first_inner=None if fresh_reset else state.inner,
            first_obs=None if fresh_reset else state.obs,
        )
        return state.replace(inner=wrapper, final_obs=state.obs)

    # a host-drawn image: reset without the draw in the branch, draw after it where needed
    drawn = fresh_reset and isinstance(env, ObservedEnv)
    reset_in_branch = env.reset_unobserved if drawn else env.reset

    def step(state: EnvState, action: jax.Array) -> EnvState:
        wrapper = state.inner
        stepped = env.step(state.replace(inner=wrapper.inner, final_obs=None), action)

        def restart(_: None) -> tuple[Any, jax.Array, jax.Array]:
            key_next, key_reset = jax.random.split(stepped.key)
            if fresh_reset:
                new = reset_in_branch(key_reset)
                return new.inner, new.obs, new.key
            return wrapper.first_inner, wrapper.first_obs, key_next

        def carry_on(_: None) -> tuple[Any, jax.Array, jax.Array]:
            return stepped.inner, stepped.obs, stepped.key

        inner, obs, key = jax.lax.cond(stepped.done, restart, carry_on, None)
        if drawn:  # the reset frame, drawn only where the episode ended
            obs = jnp.where(stepped.done, env.observe(inner, stepped.done), obs)
        return EnvState(
            inner=wrapper.replace(inner=inner),
            obs=obs,
            reward=stepped.reward,
            done=stepped.done,
            terminated=stepped.terminated,
            t=jnp.where(stepped.done, jnp.zeros_like(stepped.t), stepped.t),
            key=key,
            final_obs=stepped.obs,
            unlocked=stepped.unlocked,  # the ending step's, like its reward
        )

    return AutoResetEnv(spec=env.spec, reset=reset, step=step, wrapped=env, fresh_reset=fresh_reset)


def get_final_obs(state: EnvState) -> jax.Array:
    """The final observation of the episode a step ended: ``final_obs`` on an auto-reset
    env's state, ``obs`` on a plain env's (which does not reset). [..., obs_size]."""
    return state.obs if state.final_obs is None else state.final_obs
