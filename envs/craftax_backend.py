"""Craftax 1.6.1 (the JAX Crafter) adapted to :class:`envs.core.Env`, symbolic observations
(docs/design.md §5.1, §5.5; issue 46).

Two envs:

* ``craftax_classic``: ``Craftax-Classic-Symbolic-v1``, Crafter's game (22 achievements,
  17 actions). Observation: 1,345 floats, the 7 x 9 local map one-hot over 17 block kinds
  and 4 mob kinds (7 * 9 * 21 = 1,323, flattened row-major), then inventory counts / 10 (12),
  health, food, drink, energy / 10 (4), the facing direction one-hot (4), light level and
  sleeping (2): Craftax's own ``render_craftax_symbolic``, unchanged.
* ``craftax``: ``Craftax-Symbolic-v1``, full Craftax (67 achievements, 43 actions,
  8,268 floats: the same layout on a 9 x 11 map with more kinds and more player state).

Values lie in [0, 1], most of them 0/1 (the map), the rest multiples of 0.1 or Craftax's
light level: not a bit vector (docs/design.md §5: replay bytes per step).

Termination: Craftax's own ``is_terminal`` (death, standing in lava; full Craftax also the
boss defeated) with its time limit taken out; the time limit is ours (``spec.episode_length``),
by default Craftax's ``max_timesteps`` (Classic 10,000, full 100,000 steps). ``action_repeat``
is 1 only (Crafter's protocol has none).

Achievements (the issue 46 contract, :class:`envs.core.EnvSpec`): ``spec.achievements`` are
Craftax's ``Achievement`` names lower-cased, in the order of their index into the state's
``achievements`` array (its enum values; Classic's declaration order, full Craftax's differs);
``EnvState.unlocked`` = ``new & ~old`` of that array across the agent step (achievements only
ever switch on within an episode, so this is the OR over the step's backend steps).

Image mode (``envs.make("craftax_classic", obs="image")``, issue 47; Classic only):
Craftax's own agent view, ``Craftax-Classic-Pixels-v1`` (its renderer at 7 pixels a block:
9 x 9 blocks, the 7 x 9 map over 2 rows of inventory, 63 x 63 x 3), as uint8 (Craftax's
``render / 255`` times 255, rounded: exact), placed at the top left of a 64 x 64 x 3 black
canvas. That is what Crafter itself shows the reference's agent at its ``size`` 64 x 64:
Crafter's unit is ``64 // 9 = 7`` pixels and its border ``(64 - 63) // 2 = 0``, so its last
row and column stay black. ``obs_size`` 0. The state, the dynamics and the achievements are
the symbolic env's (the same ``craftax_step``).
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
from envs.wrappers import build_env

# registry id -> Craftax name
CRAFTAX_ENVS: dict[str, str] = {
    "craftax_classic": "Craftax-Classic-Symbolic-v1",
    "craftax": "Craftax-Symbolic-v1",
}

# registry id -> static facts, read off each env built once with craftax 1.6.1
# (``observation_space(params).shape``, ``action_space(params).n``, ``params.max_timesteps``);
# the registry smoke test checks them against the built specs.
CRAFTAX_FACTS: dict[str, StaticFacts] = {
    # StaticFacts(obs_size, action_size, discrete, can_terminate, default_episode_length)
    "craftax_classic": StaticFacts(1345, 17, True, True, 10000),
    "craftax": StaticFacts(8268, 43, True, True, 100000),
}

# registry id -> Craftax's pixel env of the image mode (Classic only: full Craftax's pixel
# view is not Crafter's and no reference trains on it)
CRAFTAX_PIXEL_ENVS: dict[str, str] = {"craftax_classic": "Craftax-Classic-Pixels-v1"}
IMAGE_SIZE = 64  # Crafter's canvas at the reference's crafter `size` (64 x 64)

CRAFTAX_ACTION_REPEATS = (1,)  # Crafter's protocol repeats no action
_NO_TIME_LIMIT = 2**31 - 1  # Craftax's max_timesteps when asking it for true terminations only
# Craftax's texture size for human-viewed images (its BLOCK_PIXEL_SIZE_IMG): frames of
# 9 x 9 blocks (Classic; full Craftax 11 x 11) of 16 pixels
_VIDEO_BLOCK_PIXELS = 16


def _craftax_env(env_id: str, image: bool = False) -> Any:
    from craftax.craftax_env import make_craftax_env_from_name

    name = CRAFTAX_PIXEL_ENVS[env_id] if image else CRAFTAX_ENVS[env_id]
    return make_craftax_env_from_name(name, auto_reset=False)


def _achievement_enum(env_id: str) -> Any:
    if env_id == "craftax_classic":
        from craftax.craftax_classic.constants import Achievement
    else:
        from craftax.craftax.constants import Achievement
    return Achievement


def achievement_names(env_id: str) -> tuple[str, ...]:
    """Craftax's achievement names of ``env_id``, lower-cased, by index into its state's
    ``achievements`` array (imports Craftax)."""
    members = sorted(_achievement_enum(env_id), key=lambda a: a.value)
    if [a.value for a in members] != list(range(len(members))):
        raise ValueError(f"{env_id}: Craftax's achievement indices are not 0..n-1")
    return tuple(a.name.lower() for a in members)


def build(
    env_id: str, action_repeat: int = 1, episode_length: int | None = None, obs: str = "vector"
) -> Env:
    """Build Craftax env ``env_id`` (a key of :data:`CRAFTAX_ENVS`); no world is generated.

    Args:
      env_id: registry id.
      action_repeat: must be 1 (:data:`CRAFTAX_ACTION_REPEATS`).
      episode_length: time limit in env steps; None = Craftax's ``max_timesteps``.
      obs: ``vector`` (symbolic) or ``image`` (64 x 64 x 3 uint8; ``craftax_classic`` only).

    Returns:
      The env; its states carry ``unlocked`` ([n_achievements] bool).

    Raises:
      ActionRepeatError: ``action_repeat`` is not 1.
      EpisodeLengthError: ``episode_length`` is not an int >= 1.
    """
    check_action_repeat(action_repeat, env_id, CRAFTAX_ACTION_REPEATS, "craftax")
    import jax.numpy as jnp

    image = obs == "image"
    if image and env_id not in CRAFTAX_PIXEL_ENVS:
        raise ValueError(f"obs='image' is offered on {tuple(CRAFTAX_PIXEL_ENVS)} only")
    env = _craftax_env(env_id, image)
    params = env.default_params
    limit = int(params.max_timesteps) if episode_length is None else episode_length
    agent_limit = agent_episode_length(limit, action_repeat, env_id)
    # Craftax's is_terminal ORs its own time limit in: lift it, the limit is ours
    terminal_params = params.replace(max_timesteps=_NO_TIME_LIMIT)
    shape = env.observation_space(params).shape
    names = achievement_names(env_id)
    spec = EnvSpec(
        env_id=env_id,
        backend="craftax",
        obs_size=0 if image else int(shape[0]),
        obs_mode=obs,
        image_shape=(IMAGE_SIZE, IMAGE_SIZE, int(shape[-1])) if image else None,
        action_size=int(env.action_space(params).n),
        discrete=True,
        episode_length=agent_limit,
        action_repeat=action_repeat,
        can_terminate=CRAFTAX_FACTS[env_id].can_terminate,
        achievements=names,
    )

    def view(x):  # the image mode's canvas: Craftax's [0, 1] render -> uint8, padded to 64
        if not image:
            return x
        x = jnp.round(x * 255).astype(jnp.uint8)
        pad = [(0, IMAGE_SIZE - x.shape[0]), (0, IMAGE_SIZE - x.shape[1]), (0, 0)]
        return jnp.pad(x, pad)

    def raw_reset(key):
        x, state = env.reset_env(key, params)
        return state, view(x)

    def raw_step(state, env_action, key):
        x, state, reward, _, _ = env.step_env(key, state, env_action, params)
        return state, view(x), reward, env.is_terminal(state, terminal_params)

    inner_env = build_env(spec, raw_reset, raw_step)

    def reset(key):
        state = inner_env.reset(key)
        return state.replace(unlocked=jnp.zeros((len(names),), bool))

    def step(state, action):
        new = inner_env.step(state, action)
        return new.replace(unlocked=new.inner.achievements & ~state.inner.achievements)

    return Env(spec=spec, reset=reset, step=step)


def renderer(env_id: str, action_repeat: int, size: tuple[int, int]) -> Any:
    """Craftax's own pixel renderer (``make_craftax_pixel_renderer``, the one its pixel envs
    observe with) at its 16-pixel blocks: 144 x 144 frames (Classic; full Craftax 176 x 176),
    drawn on device inside the rollout (``keep`` is the render); ``size`` unused. 10 frames
    per second (Crafter's viewer has no fixed rate). The first renderer made after an install
    builds Craftax's texture cache (about a minute, a file in Craftax's package directory,
    announced on stdout by Craftax); later ones load it."""
    del action_repeat, size
    from envs.render import EnvRenderer

    if env_id == "craftax_classic":
        from craftax.craftax_classic.renderer import make_craftax_pixel_renderer
    else:
        from craftax.craftax.renderer import make_craftax_pixel_renderer
    render = make_craftax_pixel_renderer(_VIDEO_BLOCK_PIXELS)

    @contextlib.contextmanager
    def frames() -> Iterator[Any]:
        import numpy as np

        yield lambda kept: np.clip(np.asarray(kept), 0, 255).astype(np.uint8)

    return EnvRenderer(env_id, 10.0, render, frames)


BACKEND = Backend(
    name="craftax",
    tasks=CRAFTAX_FACTS,
    build=build,
    action_repeats=CRAFTAX_ACTION_REPEATS,
    renderer=renderer,
    obs_modes=("vector", "image"),
    # Craftax-Classic, one env in the row collector's dynamic mode (DreamerV3's): 3.4 ms a
    # step on this 2-core box at load 16 (benchmarks/env_throughput.py --games), ~10x its raw
    # step: the auto-reset's world generation runs every step under vmap; an order of magnitude
    frame_cpu_s=1e-3,
)
