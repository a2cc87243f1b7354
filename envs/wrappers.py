"""Action mapping, action repeat and time limit around a raw backend (docs/design.md §3, §5.1).

Every backend module reduces its simulator to two raw functions

    raw_reset(key)                   -> (inner, obs)
    raw_step(inner, env_action, key) -> (inner, obs, reward, terminated)

(``env_action`` in the backend's units, ``key`` a fresh PRNG key for stochastic
backends, ``terminated`` a true termination) and :func:`build_env` turns them into an
:class:`envs.core.Env` that

* maps the agent's action to env units once per agent step (:func:`envs.bounds.to_env_action`);
* repeats it ``spec.action_repeat`` times, summing the rewards and OR-ing the
  terminations; the repeat does *not* stop on a termination (brax ``EpisodeWrapper``
  semantics; deviation E22);
* counts agent steps and sets ``done`` exactly on the step where ``t == T``
  (``spec.episode_length``) or on a termination; ``terminated`` only on the latter;
* never resets (:mod:`envs.autoreset` does that).

With ``observe`` (an image mode drawn from the state, :mod:`envs.pixels`), the raw functions'
observations are dropped and ``obs = observe(inner)`` is taken once per agent step, of the
state after the last repeat, and once per reset: no frame is drawn for the repeats between.
The env is then an :class:`envs.core.ObservedEnv` (the draw apart from the reset, for
:mod:`envs.autoreset`).

The inner state's leaf dtypes are pinned to those of the reset (weak types stripped), so
``step`` maps a state to a state of identical type: ``lax.scan`` and ``lax.cond`` over
it never trip on a backend that returns a Python float reward in ``step`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from envs.bounds import check_bounds, to_env_action
from envs.core import Env, EnvSpec, EnvState, ObservedEnv, initial_state

RawReset = Callable[[jax.Array], tuple[Any, Any]]
RawStep = Callable[[Any, jax.Array, jax.Array], tuple[Any, Any, jax.Array, jax.Array]]


def flatten_obs(obs: Any) -> jax.Array:
    """Flatten an observation pytree (array or dict of arrays) to one [n] float32 vector.

    Dict leaves are concatenated in ``jax.tree.leaves`` order (sorted keys).
    """
    leaves = jax.tree.leaves(obs)
    return jnp.concatenate([jnp.ravel(jnp.asarray(x, jnp.float32)) for x in leaves])


def _is_key(x: jax.Array) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def strong_types(tree: Any) -> Any:
    """``tree`` with every leaf an array of its own dtype, weak typing stripped."""

    def fix(x: Any) -> Any:
        x = jnp.asarray(x)
        return x if _is_key(x) else jnp.asarray(x, dtype=x.dtype)

    return jax.tree.map(fix, tree)


def like_types(tree: Any, reference: Any) -> Any:
    """Cast every leaf of ``tree`` to the dtype of the matching leaf of ``reference``."""

    def cast(x: Any, ref: Any) -> Any:
        x, ref = jnp.asarray(x), jnp.asarray(ref)
        return x if _is_key(ref) else jnp.asarray(x, dtype=ref.dtype)

    return jax.tree.map(cast, tree, reference)


def build_env(
    spec: EnvSpec,
    raw_reset: RawReset,
    raw_step: RawStep,
    observe: Callable[[Any, jax.Array | None], jax.Array] | None = None,
) -> Env:
    """An :class:`Env` from raw backend functions (see the module docstring).

    Args:
      spec: the finished spec (``episode_length`` = T in agent steps, ``action_repeat``).
      raw_reset: ``key -> (inner, obs)``.
      raw_step: ``(inner, env_action, key) -> (inner, obs, reward, terminated)``; reward and
        terminated are scalars (any numeric dtype).
      observe: None, or ``(inner, where) -> obs``: the observation of a state (zeros where
        ``where`` is False; None = draw), taken after the repeat and after a reset in place
        of the raw functions' (an ``image_shape`` uint8 image). The env is then an
        :class:`envs.core.ObservedEnv`.

    Returns:
      The Env; ``reset(key)`` splits ``key`` into the backend's reset key and the carried
      ``EnvState.key``; ``step`` splits one key per agent step off the carried key and one
      per repeat off that.
    """
    if not spec.discrete:
        if spec.action_low is None or spec.action_high is None:
            raise ValueError(f"{spec.env_id}: a continuous env needs finite Box bounds")
        check_bounds(spec.action_low, spec.action_high)
        if len(spec.action_low) != spec.action_size:
            raise ValueError(
                f"{spec.env_id}: {len(spec.action_low)} bounds for {spec.action_size} actions"
            )
    repeat = spec.action_repeat
    limit = spec.episode_length
    image = spec.image_shape is not None  # raw obs already the uint8 image (issue 47)
    as_obs = (lambda o: jnp.asarray(o, jnp.uint8)) if image else flatten_obs
    if observe is not None:
        as_obs = lambda o: jnp.zeros((), jnp.uint8)  # noqa: E731 - dropped: observe() replaces it

    def reset(key: jax.Array) -> EnvState:
        key_reset, key_carry = jax.random.split(key)
        inner, obs = raw_reset(key_reset)
        return initial_state(strong_types(inner), as_obs(obs), key_carry, image)

    def one(inner: Any, env_action: jax.Array, key: jax.Array) -> tuple:
        new_inner, obs, reward, terminated = raw_step(inner, env_action, key)
        return (
            like_types(new_inner, inner),
            as_obs(obs),
            jnp.asarray(reward, jnp.float32).reshape(()),
            jnp.asarray(terminated).reshape(()).astype(bool),
        )

    def step(state: EnvState, action: jax.Array) -> EnvState:
        env_action = to_env_action(spec, action)
        key, key_step = jax.random.split(state.key)
        if repeat == 1:
            inner, obs, reward, terminated = one(state.inner, env_action, key_step)
        else:

            def body(carry: tuple, k: jax.Array) -> tuple[tuple, None]:
                inner, _, total, term = carry
                inner, obs, reward, terminated = one(inner, env_action, k)
                return (inner, obs, total + reward, term | terminated), None

            obs0 = state.obs if observe is None else as_obs(None)
            init = (state.inner, obs0, jnp.zeros((), jnp.float32), jnp.zeros((), bool))
            (inner, obs, reward, terminated), _ = jax.lax.scan(
                body, init, jax.random.split(key_step, repeat)
            )
        if observe is not None:  # one frame per agent step, after the repeat
            obs = observe(inner, None)
        t = state.t + 1
        return EnvState(
            inner=inner,
            obs=obs,
            reward=reward,
            done=terminated | (t >= limit),
            terminated=terminated,
            t=t,
            key=key,
        )

    if observe is None:
        return Env(spec=spec, reset=reset, step=step)

    def reset_unobserved(key: jax.Array) -> EnvState:
        return reset(key).replace(obs=jnp.zeros(spec.obs_shape, jnp.uint8))

    def observed_reset(key: jax.Array) -> EnvState:
        state = reset(key)
        return state.replace(obs=observe(state.inner, None))

    return ObservedEnv(
        spec=spec,
        reset=observed_reset,
        step=step,
        reset_unobserved=reset_unobserved,
        observe=observe,
    )
