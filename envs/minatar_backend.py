"""gymnax 1.0.1's MinAtar games adapted to :class:`envs.core.Env` (docs/design.md §5.1, §5.5).

Four games (gymnax also registers ``Seaquest-MinAtar``; not offered here, the issue's set is
these four): ``breakout_minatar``, ``asterix_minatar``, ``freeway_minatar``,
``space_invaders_minatar`` (snake_case, the game's name first, as DMC ids put the domain first).

Observation: the game's 10 x 10 x C boolean grid (C channels, one per object kind: Breakout 4,
Asterix 4, Freeway 7, SpaceInvaders 6) flattened row-major to a float32 vector of 100 * C
entries in {0, 1}: ``obs[(row * 10 + col) * C + channel]`` (``jnp.ravel`` of gymnax's
``[row, col, channel]`` array). Actions: gymnax's minimal action set per game (Breakout 3,
Asterix 5, Freeway 3, SpaceInvaders 4), one-hot in agent units. No sticky actions (gymnax's
MinAtar has none).

As in :mod:`envs.gymnax_backend`: the raw ``step_env`` / ``reset_env`` (a step never resets);
``terminated`` is the game's own end (ball lost, hit by an enemy; Freeway never ends: gymnax
1.0.1's ``step_env`` reports it without the time limit); the time limit is ours
(``spec.episode_length``), by default gymnax's ``max_steps_in_episode`` (1,000; Freeway 2,500),
so episodes end at variable lengths. ``action_repeat`` is 1 only (MinAtar has no frame skip).

Image mode (``envs.make(id, obs="image")``, issue 47): the same grid kept as a 10 x 10 x C
uint8 image, 255 where gymnax's boolean is set and 0 elsewhere (the full range, so the image
encoder's ``x / 255 - 0.5`` sees -0.5 and 0.5, not a grid squeezed near -0.5); ``obs_size`` 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from envs.core import (
    Backend,
    Env,
    EnvSpec,
    StaticFacts,
    agent_episode_length,
    check_action_repeat,
)
from envs.gymnax_backend import gymnax_functions
from envs.wrappers import build_env

# registry id -> gymnax name
MINATAR_ENVS: dict[str, str] = {
    "breakout_minatar": "Breakout-MinAtar",
    "asterix_minatar": "Asterix-MinAtar",
    "freeway_minatar": "Freeway-MinAtar",
    "space_invaders_minatar": "SpaceInvaders-MinAtar",
}

# registry id -> static facts, read off each env built with gymnax 1.0.1 (obs_size = 100 *
# channels of ``env.obs_shape``, action_size = ``env.action_space(params).n``, the default time
# limit = ``params.max_steps_in_episode``); can_terminate read off each game's ``is_terminated``:
# Freeway's is constant False (its episodes always run to the limit), the others' a game over.
MINATAR_FACTS: dict[str, StaticFacts] = {
    # StaticFacts(obs_size, action_size, discrete, can_terminate, default_episode_length)
    "breakout_minatar": StaticFacts(400, 3, True, True, 1000),
    "asterix_minatar": StaticFacts(400, 5, True, True, 1000),
    "freeway_minatar": StaticFacts(700, 3, True, False, 2500),
    "space_invaders_minatar": StaticFacts(600, 4, True, True, 1000),
}

MINATAR_ACTION_REPEATS = (1,)  # MinAtar has no frame skip; no paper repeats its actions


def build(
    env_id: str, action_repeat: int = 1, episode_length: int | None = None, obs: str = "vector"
) -> Env:
    """Build MinAtar game ``env_id`` (a key of :data:`MINATAR_ENVS`).

    Args:
      env_id: registry id.
      action_repeat: must be 1 (:data:`MINATAR_ACTION_REPEATS`).
      episode_length: time limit in env steps; None = gymnax's ``max_steps_in_episode``.
      obs: ``vector`` (the flat float32 grid) or ``image`` (the [10, 10, C] uint8 grid).

    Raises:
      ActionRepeatError: ``action_repeat`` is not 1.
      EpisodeLengthError: ``episode_length`` is not an int >= 1.
    """
    check_action_repeat(action_repeat, env_id, MINATAR_ACTION_REPEATS, "minatar")
    import gymnax

    env, params = gymnax.make(MINATAR_ENVS[env_id])
    limit = int(params.max_steps_in_episode) if episode_length is None else episode_length
    agent_limit = agent_episode_length(limit, action_repeat, env_id)
    # gymnax's own limit set to ours: step_env ignores it (1.0.1), kept equal for clarity
    params = params.replace(max_steps_in_episode=limit)
    rows, cols, channels = (int(d) for d in env.obs_shape)
    image = obs == "image"
    spec = EnvSpec(
        env_id=env_id,
        backend="minatar",
        obs_size=0 if image else rows * cols * channels,
        obs_mode=obs,
        image_shape=(rows, cols, channels) if image else None,
        action_size=int(env.action_space(params).n),
        discrete=True,
        episode_length=agent_limit,
        action_repeat=action_repeat,
        can_terminate=MINATAR_FACTS[env_id].can_terminate,
    )

    raw_reset, raw_step = gymnax_functions(env, params)
    if not image:
        return build_env(spec, raw_reset, raw_step)

    def view(grid):  # the image mode's grid: 0 / 255 uint8
        import jax.numpy as jnp

        return jnp.where(grid, 255, 0).astype(jnp.uint8)

    def image_reset(key):
        state, grid = raw_reset(key)
        return state, view(grid)

    def image_step(state, env_action, key):
        state, grid, reward, terminated = raw_step(state, env_action, key)
        return state, view(grid), reward, terminated

    return build_env(spec, image_reset, image_step)


def renderer(env_id: str, action_repeat: int, size: tuple[int, int]) -> Any:
    """gymnax's own MinAtar drawing (``gymnax.visualize.vis_minatar``: the grid as one image,
    a colour per channel, drawn with matplotlib), on an off-screen figure of ``size`` (height,
    width) pixels; 10 frames per second (MinAtar has no frame rate of its own)."""
    del action_repeat
    import gymnax

    from envs.render import EnvRenderer

    env, params = gymnax.make(MINATAR_ENVS[env_id])

    @contextlib.contextmanager
    def frames() -> Iterator[Any]:
        import matplotlib.figure
        import numpy as np
        from gymnax.visualize.vis_minatar import init_minatar
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        height, width = size
        fig = matplotlib.figure.Figure(figsize=(width / 100, height / 100), dpi=100)
        canvas = FigureCanvasAgg(fig)
        ax = fig.add_axes((0, 0, 1, 1))

        def frame(kept: Any) -> np.ndarray:
            ax.clear()
            init_minatar(ax, env, kept, params)
            canvas.draw()
            return np.asarray(canvas.buffer_rgba())[..., :3].copy()

        yield frame

    return EnvRenderer(env_id, 10.0, lambda inner: inner, frames)


BACKEND = Backend(
    name="minatar",
    tasks=MINATAR_FACTS,
    build=build,
    action_repeats=MINATAR_ACTION_REPEATS,
    renderer=renderer,
    obs_modes=("vector", "image"),
)
