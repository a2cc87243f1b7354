"""TD-MPC2's frame stack for image envs (issue 48; docs/design.md §7.7).

The reference observes a DMC task through its ``PixelWrapper`` (tdmpc2@5f6fade
``tdmpc2/envs/wrappers/pixels.py``): the last ``FRAMES`` = 3 renders at 64 x 64, concatenated
along the channel axis, oldest first; on a reset it renders the reset state three times, so the
first stack is three copies of the reset frame and the stack then shifts by one frame a step.

Here the stack lives in the agent, not in an env wrapper (docs/design.md §7.7):

* acting: the policy's carry holds the stack (:func:`stacking_policy`); the first observation
  of an episode (the row collector's ``is_first``) fills it with three copies, as the reference's
  reset does; every later one shifts it by a frame;
* replay: the episode buffer keeps each step's newest frame only and rebuilds the stack of row
  ``k`` from rows ``k-2..k`` of the same episode, row 0 standing in for the rows before it
  (:func:`stack_rows`) -- the same stacks the reference stores, at a third of the memory.

The env stays as configured (one frame per step), so evaluation, videos and other agents see
the same env.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

FRAMES = 3  # PixelWrapper(num_frames=3) (pixels.py:13)
FRAME_SHAPE = (64, 64, 3)  # its render_size 64, RGB; the conv encoder takes 64 x 64


def stacked_shape(image_shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """``(H, W, FRAMES * C)``: the model's input for env images ``(H, W, C)``."""
    h, w, c = image_shape
    return (h, w, FRAMES * c)


def check_image(image_shape: tuple[int, ...] | None, env_id: str) -> None:
    """Hold that an image env gives the reference's 64 x 64 RGB frames (ValueError)."""
    if image_shape is not None and tuple(image_shape) != FRAME_SHAPE:
        raise ValueError(
            f"env {env_id!r} gives {tuple(image_shape)} images, and TD-MPC2's conv encoder takes "
            f"{FRAME_SHAPE} RGB frames (the reference's 64 x 64 renders, layers.py:125-139)"
        )


def push_frame(stack: jax.Array, frame: jax.Array, is_first: jax.Array) -> jax.Array:
    """The stack after ``frame``: ``stack [n, H, W, F*C]``, ``frame [n, H, W, C]``, ``is_first
    [n]`` bool -> ``[n, H, W, F*C]`` (same dtype): F copies of ``frame`` where ``is_first``
    (the reference's reset, ``pixels.py:29-33``), else the oldest frame dropped and ``frame``
    appended last (its deque of ``maxlen`` F)."""
    c = frame.shape[-1]
    frame = frame.astype(stack.dtype)
    shifted = jnp.concatenate([stack[..., c:], frame], axis=-1)
    filled = jnp.concatenate([frame] * (stack.shape[-1] // c), axis=-1)
    mask = is_first.reshape((-1,) + (1,) * (stack.ndim - 1))
    return jnp.where(mask, filled, shifted)


def stacking_policy(policy: Any) -> Any:
    """A row-collector policy over single frames from one over stacks: carry ``(inner carry,
    stack [n, H, W, F*C] uint8)``; each call pushes ``obs [n, H, W, C]`` (:func:`push_frame`)
    and hands the stack to ``policy``."""

    def stacked(carry, obs, is_first, key):
        inner, stack = carry
        stack = push_frame(stack, obs, is_first)
        action, inner, extra = policy(inner, stack, is_first, key)
        return action, (inner, stack), extra

    return stacked


def empty_stack(n: int, image_shape: tuple[int, int, int]) -> jax.Array:
    """``uint8 [n, H, W, F*C]`` zeros: the carry's stack before the first observation (every
    episode's first observation overwrites it)."""
    return jnp.zeros((n, *stacked_shape(image_shape)), jnp.uint8)


def stack_rows(frames: jax.Array, ep: jax.Array, rows: jax.Array) -> jax.Array:
    """Stacks of stored frames: ``frames [E, L, H, W, C]``, episodes ``ep [B]``, rows
    ``rows [B, K]`` -> ``[B, K, H, W, F*C]``: row ``k``'s stack is rows ``k-F+1..k`` of its
    episode, oldest first, rows below 0 replaced by row 0 (the reset frame, as
    :func:`push_frame` fills it)."""
    back = jnp.arange(FRAMES) - (FRAMES - 1)  # [-2, -1, 0]
    src = jnp.maximum(rows[..., None] + back, 0)  # [B, K, F]
    got = frames[ep[:, None, None], src]  # [B, K, F, H, W, C]
    got = jnp.moveaxis(got, 2, -2)  # [B, K, H, W, F, C]
    return got.reshape(*got.shape[:-2], -1)
