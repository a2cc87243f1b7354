"""Image observations as an env mode (issue 47 item 3): ``envs.make(id, obs="image")`` on
MinAtar (the grid as a 10 x 10 x C uint8 image) and Craftax-Classic (its 63 x 63 pixels on a
64 x 64 canvas), and the DreamerV3 agent on them in process: its replay stores the images as
uint8, its networks take ``{"image": ...}``.

The agent runs the tiny config at the default CNN settings: the image's size picks the
stages (D43), on MinAtar's 10 x 10 grid ``mults (1, 2)`` ending at 5 x 5 (one stride-2
convolution, 10 = 5 x 2^1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from agents.dreamerv3.agent import DreamerV3
from tests.agents.dreamerv3.conftest import agent_config

K = 12  # ticks (36 rows with 3 envs): past the gate at tick 6, so updates ran


def test_minatar_image_is_the_vector_grid():
    vec, img = envs.make("breakout_minatar"), envs.make("breakout_minatar", obs="image")
    assert img.spec.obs_mode == "image" and img.spec.obs_size == 0
    assert img.spec.obs_shape == (10, 10, 4) and img.spec.obs_dtype == jnp.uint8
    assert vec.spec.obs_shape == (400,) and vec.spec.image_shape is None
    key = jax.random.key(1)
    a, b = vec.reset(key), img.reset(key)
    action = jnp.eye(3)[1]
    for _ in range(3):  # same key, same action: the same game
        a, b = vec.step(a, action), img.step(b, action)
    assert b.obs.dtype == jnp.uint8
    # the image is the flat grid's row-major [row, col, channel] reshape, 1 -> 255
    np.testing.assert_array_equal(np.asarray(b.obs), 255 * np.asarray(a.obs).reshape(10, 10, 4))


def test_craftax_classic_image_is_crafters_canvas():
    env = envs.make("craftax_classic", obs="image")
    assert env.spec.obs_shape == (64, 64, 3) and env.spec.achievements
    obs = np.asarray(env.reset(jax.random.key(0)).obs)
    assert obs.dtype == np.uint8 and obs[:63, :63].max() > 0
    assert obs[63].max() == 0 and obs[:, 63].max() == 0  # Crafter's black last row, column


def test_unoffered_modes_are_refused():
    with pytest.raises(ValueError, match="observation modes are"):
        envs.make("cartpole", obs="image")
    with pytest.raises(ValueError, match="craftax_classic"):
        envs.make("craftax", obs="image")


@pytest.fixture(scope="module")
def image_run():
    env = envs.make("breakout_minatar", obs="image", episode_length=10)
    cfg = agent_config()  # no CNN flags: the 10 x 10 image sizes the CNN itself (D43)
    agent = DreamerV3(cfg, env, total_env_steps=cfg.n_envs * K)
    state = jax.jit(agent.init)(jax.random.key(0))
    state, metrics = jax.jit(agent.train)(state, jnp.arange(K))
    return agent, state, metrics


def test_dreamerv3_trains_on_images(image_run):
    agent, state, metrics = image_run
    assert agent.nets.image_shape == (10, 10, 4) and agent.nets.obs_size == 0
    assert agent.nets.cnn_stages == ((1, 2), 5)
    assert int(state.n_updates) > 0
    assert np.isfinite(np.asarray(metrics["Train/loss"])).all()
    obs = np.asarray(state.replay.obs)
    assert obs.dtype == np.uint8 and obs.shape[2:] == (10, 10, 4)
    assert set(np.unique(obs)) == {0, 255}  # the grids written, as the env's images
    # bytes per row: the image in uint8 beside the float32 action, reward, deter
    rep = agent.replay
    per_row = 400 + 4 * (3 + 1 + agent.cfg.deter_size) + 3 + rep.stoch
    assert rep.nbytes() == rep.n_envs * rep.capacity * per_row + 8
