"""gymnax 1.0.1 classic-control envs adapted to :class:`envs.core.Env` (docs/design.md §5.1).

We call the env's raw ``step_env`` / ``reset_env`` (never gymnax's auto-resetting
``step``), so a step never resets, the time limit is ours (``spec.episode_length``, in
agent steps; gymnax's own ``max_steps_in_episode`` is set to the same value) and
``terminated`` is the env's true termination only. gymnax steps take a key: it is split
from ``EnvState.key`` by :func:`envs.wrappers.build_env`.

``action_repeat > 1`` raises :class:`envs.errors.ActionRepeatError`: no paper uses it on
these tasks (docs/design.md §5.1).
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from typing import Any

from envs.core import (
    Backend,
    Env,
    EnvSpec,
    StaticFacts,
    agent_episode_length,
    check_action_repeat,
)
from envs.wrappers import build_env

# registry id -> gymnax name
GYMNAX_ENVS: dict[str, str] = {
    "pendulum": "Pendulum-v1",
    "cartpole": "CartPole-v1",
    "mountain_car_continuous": "MountainCarContinuous-v0",
    "acrobot": "Acrobot-v1",
    "mountain_car": "MountainCar-v0",
}

# registry id -> static facts, read off each env built with gymnax 1.0.1 (the default
# time limit is gymnax's max_steps_in_episode); can_terminate is ours: true terminations.
GYMNAX_FACTS: dict[str, StaticFacts] = {
    # StaticFacts(obs_size, action_size, discrete, can_terminate, default_episode_length)
    "pendulum": StaticFacts(3, 1, False, False, 200),
    "cartpole": StaticFacts(4, 2, True, True, 500),
    "mountain_car_continuous": StaticFacts(2, 1, False, True, 999),
    "acrobot": StaticFacts(6, 3, True, True, 500),
    "mountain_car": StaticFacts(2, 3, True, True, 200),
}

# The only action repeats gymnax envs take (docs/design.md §5.1: no paper uses a repeat on them).
GYMNAX_ACTION_REPEATS = (1,)


def build(env_id: str, action_repeat: int = 1, episode_length: int | None = None) -> Env:
    """Build gymnax env ``env_id`` (a key of :data:`GYMNAX_ENVS`).

    Args:
      env_id: registry id.
      action_repeat: must be 1 (:data:`GYMNAX_ACTION_REPEATS`).
      episode_length: time limit in env steps; None = gymnax's ``max_steps_in_episode``
        (Pendulum-v1 200, CartPole-v1 500, MountainCarContinuous-v0 999, ...).

    Raises:
      ActionRepeatError: ``action_repeat`` is not 1.
      EpisodeLengthError: ``episode_length`` is not an int >= 1.
    """
    check_action_repeat(action_repeat, env_id, GYMNAX_ACTION_REPEATS, "gymnax")
    import gymnax
    from gymnax.environments import spaces

    name, can_terminate = GYMNAX_ENVS[env_id], GYMNAX_FACTS[env_id].can_terminate
    env, params = gymnax.make(name)
    limit = int(params.max_steps_in_episode) if episode_length is None else episode_length
    agent_limit = agent_episode_length(limit, action_repeat, env_id)
    params = params.replace(max_steps_in_episode=limit)
    space = env.action_space(params)
    obs_shape = env.observation_space(params).shape
    obs_size = 1
    for d in obs_shape:
        obs_size *= int(d)

    if isinstance(space, spaces.Discrete):
        discrete, action_size, low, high = True, int(space.n), None, None
    else:
        shape = tuple(space.shape) or (1,)
        action_size = 1
        for d in shape:
            action_size *= int(d)
        low = _per_dim(space.low, action_size)
        high = _per_dim(space.high, action_size)
        discrete = False

    spec = EnvSpec(
        env_id=env_id,
        backend="gymnax",
        obs_size=obs_size,
        action_size=action_size,
        discrete=discrete,
        episode_length=agent_limit,
        action_repeat=action_repeat,
        action_low=low,
        action_high=high,
        can_terminate=can_terminate,
    )

    return build_env(spec, *gymnax_functions(env, params))


def gymnax_functions(env: Any, params: Any) -> tuple[Callable, Callable]:
    """``(raw_reset, raw_step)`` for :func:`envs.wrappers.build_env` over a gymnax-API env's
    ``reset_env`` / ``step_env`` (no auto-reset: the project's wrapper resets; the env's
    ``done`` flag is its termination, the time limit is the wrapper's). Shared with
    :mod:`envs.minatar_backend`."""

    def raw_reset(key):
        obs, state = env.reset_env(key, params)
        return state, obs

    def raw_step(state, env_action, key):
        obs, state, reward, terminated, _ = env.step_env(key, state, env_action, params)
        return state, obs, reward, terminated

    return raw_reset, raw_step


def _per_dim(bound, size: int) -> tuple[float, ...]:
    import numpy as np

    values = np.broadcast_to(np.asarray(bound, np.float64), (size,))
    return tuple(float(v) for v in values)


def renderer(env_id: str, action_repeat: int, size: tuple[int, int]) -> Any:
    """gymnax's own render path for classic control,
    ``gymnax.visualize.vis_gym.render_gym_frame`` (Gymnasium's ``rgb_array`` renderer, drawn
    with pygame-ce: the ``gymnax[visualize]`` extra), at Gymnasium's ``render_fps``; frames
    keep Gymnasium's size (``size`` unused; no repeat: gymnax takes only 1)."""
    del action_repeat, size
    from envs.render import EnvRenderer, RenderError

    if importlib.util.find_spec("pygame") is None:
        raise RenderError(
            f"{env_id}: gymnax's classic-control renderer (Gymnasium's) needs pygame-ce; "
            "pip install 'gymnax[visualize]'"
        )
    import gymnax

    name = GYMNAX_ENVS[env_id]
    _, params = gymnax.make(name)
    fps = _gymnasium_fps(name)

    @contextlib.contextmanager
    def frames() -> Iterator[Any]:
        import numpy as np
        from gymnax.visualize.vis_gym import render_gym_frame

        yield lambda kept: np.asarray(render_gym_frame(name, kept, params), np.uint8)

    return EnvRenderer(env_id, fps, lambda inner: inner, frames)


def _gymnasium_fps(name: str) -> float:
    """Gymnasium's playback rate of its env ``name`` (``metadata['render_fps']``, a class
    attribute: read off the registered class, no env is made)."""
    from gymnasium.envs.registration import load_env_creator, spec

    return float(load_env_creator(spec(name).entry_point).metadata["render_fps"])


BACKEND = Backend(
    name="gymnax",
    tasks=GYMNAX_FACTS,
    build=build,
    action_repeats=GYMNAX_ACTION_REPEATS,
    renderer=renderer,
)
