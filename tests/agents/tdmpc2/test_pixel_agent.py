"""TD-MPC2 on image envs (issue 48), the pieces around the pixel model: the frame stack the
policy carries (the reference's ``PixelWrapper``: three copies of the reset frame, then a
shift per step), the episode buffer's uint8 frames and the stacks it rebuilds from them, and
the agent's wiring and refusals. No update or planner is compiled here: the end-to-end run
is ``tests/launcher/test_launcher_tdmpc2_pixels.py``'s."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from agents.tdmpc2.agent import TDMPC2
from agents.tdmpc2.buffer import EpisodeBuffer
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.pixels import FRAMES, push_frame, stack_rows, stacking_policy

TINY = TDMPC2Config(
    model_size=1,
    enc_dim=16,
    mlp_dim=32,
    latent_dim=16,
    num_channels=1,  # 16 features = latent_dim (the reference needs them equal)
    num_q=2,
    batch_size=4,
    num_samples=8,
    num_pi_trajs=1,
    num_elites=2,
    iterations=1,
    seed_steps=10,
)
T = 10


def frames_of(n_rows: int, side: int = 4) -> np.ndarray:
    """``uint8 [n_rows, side, side, 3]``, row k filled with distinct values (k, k+100, k+200)
    so any frame taken from the wrong row or channel shows."""
    k = np.arange(n_rows, dtype=np.uint8)[:, None, None, None]
    return np.broadcast_to(k + np.array([0, 100, 200], np.uint8), (n_rows, side, side, 3)).copy()


def test_push_frame_fills_on_the_first_frame_then_shifts():
    f = jnp.asarray(frames_of(4))
    stack = jnp.zeros((1, 4, 4, 3 * FRAMES), jnp.uint8) + 77  # stale: must be overwritten
    stack = push_frame(stack, f[0:1], jnp.array([True]))
    np.testing.assert_array_equal(stack[0], np.concatenate([f[0]] * 3, axis=-1))
    stack = push_frame(stack, f[1:2], jnp.array([False]))
    np.testing.assert_array_equal(stack[0], np.concatenate([f[0], f[0], f[1]], axis=-1))
    stack = push_frame(stack, f[2:3], jnp.array([False]))
    stack = push_frame(stack, f[3:4], jnp.array([False]))
    np.testing.assert_array_equal(stack[0], np.concatenate([f[1], f[2], f[3]], axis=-1))


def test_replayed_stacks_equal_the_stacks_the_policy_saw():
    """Row k's stack rebuilt from the stored frames equals the carry's stack after pushing the
    episode's frames 0..k (for every k; two episodes, the second stored first)."""
    L = 6
    eps = np.stack([frames_of(L), frames_of(L)[::-1]])  # [2, L, 4, 4, 3]
    seen = []
    stack = jnp.zeros((2, 4, 4, 3 * FRAMES), jnp.uint8)
    for k in range(L):
        stack = push_frame(stack, jnp.asarray(eps[:, k]), jnp.full((2,), k == 0))
        seen.append(np.asarray(stack))
    seen = np.stack(seen, axis=1)  # [2, L, 4, 4, 9]
    ep = jnp.array([1, 0, 1])
    rows = jnp.array([[0, 1, 2], [3, 4, 5], [5, 2, 0]])
    got = np.asarray(stack_rows(jnp.asarray(eps), ep, rows))
    np.testing.assert_array_equal(got, seen[np.asarray(ep)[:, None], np.asarray(rows)])


def test_stacking_policy_carries_the_stack():
    seen = []

    def inner(carry, obs, is_first, key):
        seen.append(obs)
        return jnp.zeros((obs.shape[0], 1)), carry + 1, None

    policy = stacking_policy(inner)
    f = jnp.asarray(frames_of(2))
    carry = (jnp.zeros(()), jnp.zeros((1, 4, 4, 9), jnp.uint8))
    _, carry, _ = policy(carry, f[0:1], jnp.array([True]), None)
    _, carry, _ = policy(carry, f[1:2], jnp.array([False]), None)
    assert int(carry[0]) == 2
    np.testing.assert_array_equal(seen[1][0], np.concatenate([f[0], f[0], f[1]], axis=-1))
    np.testing.assert_array_equal(carry[1], seen[1])


def test_buffer_keeps_uint8_frames_and_samples_stacks():
    buf = EpisodeBuffer.for_run(T, 1, 0, 2, 1_000_000, 2 * T, image_shape=(4, 4, 3))
    state = buf.init()
    assert state.obs.dtype == jnp.uint8 and state.obs.shape == (buf.episodes, T + 1, 4, 4, 3)
    # 48 bytes a frame + 4 (A + 1) for the action and reward, per row
    assert buf.nbytes() == buf.episodes * (T + 1) * (48 + 4 * 3)
    frames = jnp.asarray(frames_of(T + 1))
    for tick in range(T + 1):
        state = buf.add(state, tick, frames[tick][None], jnp.zeros((1, 2)), jnp.zeros(1))
    batch = buf.sample(state, T, jax.random.key(0), batch=5, horizon=3)
    assert batch.obs.shape == (4, 5, 4, 4, 9) and batch.obs.dtype == jnp.uint8
    # each stack's newest frame names its row; its older frames are the two rows before it
    # (row 0 standing in for the rows before the episode)
    newest = np.asarray(batch.obs[:, :, 0, 0, 6]).astype(int)  # [H+1, B]: channel 0 of frame 2
    for j in range(3):
        np.testing.assert_array_equal(batch.obs[:, :, 0, 0, 3 * j], np.maximum(newest - 2 + j, 0))
    np.testing.assert_array_equal(np.diff(newest, axis=0), 1)  # consecutive rows


def test_memory_per_seed_at_the_paper_protocol():
    """docs/PERFORMANCE.md's figures: walker_walk-sized (T 500, A 6), 1M steps, 64x64x3."""
    buf = EpisodeBuffer.for_run(500, 1, 0, 6, 1_000_000, 1_000_000, image_shape=(64, 64, 3))
    per_row = 64 * 64 * 3 + 4 * (6 + 1)  # 12,316 bytes
    assert buf.nbytes() == buf.episodes * 501 * per_row == 2001 * 501 * per_row


def pixel_agent(cfg=TINY, **kw):
    env = envs.make("probe_pixel_point", episode_length=T, obs="image", **kw)
    return TDMPC2(cfg, env, total_env_steps=4 * T)


def test_an_image_env_gets_the_pixel_model_and_frame_buffer():
    agent = pixel_agent()
    assert agent.cfg.obs == "rgb"  # from the env, though the config said state
    assert agent.wm.image_shape == (64, 64, 9)
    assert agent.buffer.image_shape == (64, 64, 3)
    mean, stack = agent.zero_carry(2)
    assert mean.shape == (2, TINY.horizon, 2) and stack.shape == (2, 64, 64, 9)
    assert stack.dtype == jnp.uint8
    mem = agent.memory_bytes()
    assert mem["replay"] == agent.buffer.nbytes()


def test_vector_agent_is_unchanged():
    env = envs.make("probe_pixel_point", episode_length=T)
    agent = TDMPC2(TINY, env, total_env_steps=4 * T)
    assert agent.cfg.obs == "state" and agent.wm.image_shape is None
    carry = agent.zero_carry(3)
    assert isinstance(carry, jax.Array) and carry.shape == (3, TINY.horizon, 2)


def test_refusals():
    with pytest.raises(ValueError, match="agent.obs=rgb needs an env observed as images"):
        TDMPC2(dataclasses.replace(TINY, obs="rgb"), envs.make("probe_pixel_point"), 40)
    with pytest.raises(ValueError, match=r"16 x num_channels = 32 features.*num_channels"):
        pixel_agent(dataclasses.replace(TINY, num_channels=2))
    with pytest.raises(ValueError, match="64 x 64 RGB|\\(64, 64, 3\\) RGB"):
        spec = dataclasses.replace(pixel_agent().env.spec, image_shape=(10, 10, 4))
        env = envs.make("probe_pixel_point", obs="image")
        TDMPC2(TINY, dataclasses.replace(env, spec=spec), 40)
