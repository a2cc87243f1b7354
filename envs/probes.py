"""Probe envs with known answers (docs/design.md §5.4; backend ``"probe"``).

Fixed-length and non-terminating: every episode ends by the time limit only
(``done`` at ``t == T``, ``terminated`` never), so a correct agent bootstraps at the end
of every episode. Their default T is :data:`PROBE_EPISODE_LENGTH` agent steps (override
with ``episode_length``, in probe steps; with ``action_repeat`` the rewards of the repeated
steps are summed like on every backend). The first two have a 1-D continuous action in
[-1, 1] and a constant 1-D observation ``[1.0]``:

* ``probe_constant_reward``: reward 1 every step, whatever the action. Since the
  observation never changes and the time limit is bootstrapped through, the value of
  every state is the infinite discounted sum V = sum_k gamma^k = 1 / (1 - gamma)
  (times ``action_repeat``). Checks discounting and time-limit bootstrapping.
* ``probe_reward_is_action``: reward = the action in agent units, clipped to [-1, 1]
  (the spec's bounds are [-1, 1], so env units are agent units). The optimal action is
  +1 everywhere, with value 1 / (1 - gamma). Checks that the actor/planner follows the
  reward's gradient in the action.
* ``probe_pixel_point``: a point ``p`` in the square [-1, 1]^2, drawn uniformly at reset and
  moved by ``POINT_SPEED * a`` (2-D action, clipped to the square); reward
  ``1 - |p| / sqrt(2)`` in [0, 1] for the position reached (1 at the centre). Observed as the
  position ``[2]`` (``obs="vector"``) or as a 64 x 64 x 3 uint8 image (``obs="image"``,
  issue 48: the pixel path of TD-MPC2 without a renderer): channel 0 a 5 x 5 square of 255
  centred on the point's pixel, channel 1 a 3 x 3 square at the centre (the target),
  channel 2 zero. Checks that an image agent reads a position off its pixels; exact and
  cheap on any device.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from envs.core import Backend, Env, EnvSpec, StaticFacts, agent_episode_length
from envs.errors import UnknownEnvError
from envs.wrappers import build_env

PROBE_EPISODE_LENGTH = 20
PROBE_ENVS = ("probe_constant_reward", "probe_reward_is_action", "probe_pixel_point")
# registry id -> StaticFacts(obs_size, action_size, discrete, can_terminate, default T):
# continuous, never terminating
PROBE_FACTS: dict[str, StaticFacts] = {
    "probe_constant_reward": StaticFacts(1, 1, False, False, PROBE_EPISODE_LENGTH),
    "probe_reward_is_action": StaticFacts(1, 1, False, False, PROBE_EPISODE_LENGTH),
    "probe_pixel_point": StaticFacts(2, 2, False, False, PROBE_EPISODE_LENGTH),
}
POINT_SPEED = 0.2  # probe_pixel_point: the largest move per probe step, per axis
POINT_IMAGE = 64  # its image side: TD-MPC2's conv encoder takes 64 x 64 (layers.py:133)


def build(
    env_id: str, action_repeat: int = 1, episode_length: int | None = None, obs: str = "vector"
) -> Env:
    """Build probe ``env_id`` (one of :data:`PROBE_ENVS`).

    Args:
      env_id: registry id.
      action_repeat: probe steps per agent step (rewards summed).
      episode_length: time limit in probe steps; None = :data:`PROBE_EPISODE_LENGTH`.
      obs: ``vector``, or ``image`` (``probe_pixel_point`` only).

    Raises:
      UnknownEnvError: ``env_id`` is not a probe.
      ActionRepeatError: ``action_repeat`` is not an int >= 1.
      EpisodeLengthError: the time limit is not an int >= 1 or not divisible by the repeat.
      ValueError: ``obs="image"`` on a probe without an image.
    """
    if env_id not in PROBE_ENVS:
        raise UnknownEnvError(env_id, PROBE_ENVS)
    facts = PROBE_FACTS[env_id]
    limit = facts.default_episode_length if episode_length is None else episode_length
    image = obs == "image"
    if image and env_id != "probe_pixel_point":
        raise ValueError(f"{env_id}: obs='image' is offered by probe_pixel_point only")
    side = POINT_IMAGE
    spec = EnvSpec(
        env_id=env_id,
        backend="probe",
        obs_size=0 if image else facts.obs_size,
        action_size=facts.action_size,
        discrete=facts.discrete,
        episode_length=agent_episode_length(limit, action_repeat, env_id),
        action_repeat=action_repeat,
        action_low=(-1.0,) * facts.action_size,
        action_high=(1.0,) * facts.action_size,
        can_terminate=facts.can_terminate,
        obs_mode=obs,
        image_shape=(side, side, 3) if image else None,
    )
    if env_id == "probe_pixel_point":
        return build_env(spec, *_point_functions(image))
    constant = env_id == "probe_constant_reward"

    def raw_reset(key: jax.Array):
        del key
        return jnp.zeros((), jnp.int32), jnp.ones((1,), jnp.float32)

    def raw_step(inner: jax.Array, env_action: jax.Array, key: jax.Array):
        del key
        reward = jnp.ones((), jnp.float32) if constant else env_action[0]
        return inner + 1, jnp.ones((1,), jnp.float32), reward, jnp.zeros((), bool)

    return build_env(spec, raw_reset, raw_step)


def _point_functions(image: bool):
    """``raw_reset`` and ``raw_step`` of ``probe_pixel_point`` (module docstring); inner =
    the position ``[2]`` float32."""
    side = POINT_IMAGE
    grid = jnp.arange(side)

    def square(row: jax.Array, col: jax.Array, half: int) -> jax.Array:
        near_r = jnp.abs(grid - row) <= half
        near_c = jnp.abs(grid - col) <= half
        return near_r[:, None] & near_c[None, :]  # [side, side]

    def view(p: jax.Array) -> jax.Array:
        if not image:
            return p
        # x -> column, y -> row, both from -1 (first pixel) to +1 (last pixel)
        col, row = (jnp.round((p + 1.0) / 2.0 * (side - 1))).astype(jnp.int32)
        centre = (side - 1) // 2
        point = square(row, col, 2)
        target = square(jnp.int32(centre), jnp.int32(centre), 1)
        chans = jnp.stack([point, target, jnp.zeros_like(point)], axis=-1)
        return jnp.where(chans, 255, 0).astype(jnp.uint8)

    def raw_reset(key: jax.Array):
        p = jax.random.uniform(key, (2,), jnp.float32, -1.0, 1.0)
        return p, view(p)

    def raw_step(p: jax.Array, env_action: jax.Array, key: jax.Array):
        del key
        p = jnp.clip(p + POINT_SPEED * env_action, -1.0, 1.0)
        reward = 1.0 - jnp.sqrt(jnp.sum(p * p)) / jnp.sqrt(2.0)
        return p, view(p), reward, jnp.zeros((), bool)

    return raw_reset, raw_step


# Probes have nothing to show (no renderer) and cost nothing to step.
BACKEND = Backend(name="probe", tasks=PROBE_FACTS, build=build, obs_modes=("vector", "image"))
