"""Agent units <-> environment units for actions (docs/design.md §5.1).

Continuous actions: the agent acts in [-1, 1]^A. A finite Box [low, high] is reached by

    a_env = c + h * clip(a, -1, 1),   c = (high + low) / 2,   h = (high - low) / 2,

which on a [-1, 1] box is exactly the clip (DreamerV3's NormalizeAction + ClipAction,
TD-MPC2's action scaling). The inverse, used to read env-unit actions (experts) in agent
units, is (a_env - c) / h (no clip).

Discrete actions: the agent's action is a float one-hot vector over ``action_size``
choices; the env receives its argmax (an int32 index). The inverse is the one-hot.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from envs.core import EnvSpec


def check_bounds(low: tuple[float, ...], high: tuple[float, ...]) -> None:
    """Raise ValueError unless ``low`` and ``high`` are finite, same-sized and low < high."""
    if len(low) != len(high):
        raise ValueError(f"action bounds differ in size: low {low}, high {high}")
    for lo, hi in zip(low, high, strict=True):
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"action bounds must be finite, got low {low}, high {high}")
        if not lo < hi:
            raise ValueError(f"action bounds need low < high, got low {low}, high {high}")


def centre_and_half_range(spec: EnvSpec) -> tuple[jax.Array, jax.Array]:
    """c = (high + low) / 2 and h = (high - low) / 2, each [action_size] float32."""
    if spec.discrete or spec.action_low is None or spec.action_high is None:
        raise ValueError(f"{spec.env_id}: no continuous Box bounds to map actions with")
    low = jnp.asarray(spec.action_low, jnp.float32)
    high = jnp.asarray(spec.action_high, jnp.float32)
    return (high + low) / 2, (high - low) / 2


def to_env_action(spec: EnvSpec, action: jax.Array) -> jax.Array:
    """Map an agent action to the backend's units (docs/design.md §5.1).

    Args:
      spec: the env's spec.
      action: [action_size] float, agent units ([-1, 1] continuous, one-hot discrete).
        Leading batch dims are allowed.

    Returns:
      continuous: [..., action_size] float32 ``c + h * clip(action, -1, 1)``;
      discrete: [...] int32 ``argmax(action)``.
    """
    action = jnp.asarray(action)
    if spec.discrete:
        return jnp.argmax(action, axis=-1).astype(jnp.int32)
    c, h = centre_and_half_range(spec)
    return c + h * jnp.clip(action.astype(jnp.float32), -1.0, 1.0)


def to_agent_action(spec: EnvSpec, env_action: jax.Array) -> jax.Array:
    """Inverse of :func:`to_env_action`: an env-unit action in agent units (docs/design.md §5.1).

    Args:
      spec: the env's spec.
      env_action: continuous [..., action_size] in env units; discrete [...] int index.

    Returns:
      continuous: [..., action_size] float32 ``(env_action - c) / h`` (not clipped);
      discrete: [..., action_size] float32 one-hot.
    """
    env_action = jnp.asarray(env_action)
    if spec.discrete:
        return jax.nn.one_hot(env_action, spec.action_size, dtype=jnp.float32)
    c, h = centre_and_half_range(spec)
    return (env_action.astype(jnp.float32) - c) / h
