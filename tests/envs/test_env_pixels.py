"""Image observations of the Playground DMC tasks (``obs="image"``, envs/pixels.py, E30).

The oracle is MuJoCo's own renderer, called here directly on the same ``MjModel``, state and
camera: the env's frames come from the same renderer on the host, so they must be equal to
the last bit (no tolerance: the same float64 ``mj_forward`` and the same OpenGL draw).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs.pixels import IMAGE_SIZE, camera_of, default_mujoco_gl, host_pixels

pytestmark = pytest.mark.skipif(
    os.environ.get("MUJOCO_GL", "disable") == "disable",
    reason="no OpenGL for MuJoCo's renderer: apt-get install libosmesa6 (make install does)",
)


def oracle(model, inner, camera: int) -> np.ndarray:
    """The frame ``mujoco.Renderer`` draws of a playground state, without envs/."""
    import mujoco

    data = mujoco.MjData(model)
    data.qpos[:] = np.asarray(inner.data.qpos)
    data.qvel[:] = np.asarray(inner.data.qvel)
    if model.nmocap:
        data.mocap_pos[:] = np.asarray(inner.data.mocap_pos)
        data.mocap_quat[:] = np.asarray(inner.data.mocap_quat)
    mujoco.mj_forward(model, data)
    with mujoco.Renderer(model, *IMAGE_SIZE) as gl:
        gl.update_scene(data, camera=camera)
        return gl.render()


@pytest.fixture(scope="module")
def cartpole():
    from envs.playground_backend import load_raw

    env = envs.make("cartpole_swingup", action_repeat=2, obs="image")
    return env, load_raw("CartpoleSwingup")[0].mj_model


def test_camera_is_the_references_choice():
    # DreamerV3 dmc.py DEFAULT_CAMERAS / TD-MPC2 dmcontrol.py: quadruped 2, every other domain 0
    assert camera_of("quadruped_run") == 2
    assert {camera_of(i) for i in envs.list_envs() if envs.backend_of(i) == "playground"} == {0}


def test_playground_models_have_the_camera(cartpole):
    import mujoco

    model = cartpole[1]
    assert model.ncam == 2  # camera 0 is a real camera, not MuJoCo's free one
    assert mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, 0) == "fixed"


def test_spec_and_facts_declare_a_uint8_image(cartpole):
    spec = cartpole[0].spec
    assert (spec.obs_mode, spec.obs_size, spec.image_shape) == ("image", 0, (64, 64, 3))
    assert spec.obs_shape == (64, 64, 3) and spec.obs_dtype == jnp.uint8
    facts = envs.facts("cartpole_swingup", 2, obs="image")
    assert (facts.obs_mode, facts.obs_size) == ("image", 0)
    assert envs.make("cartpole_swingup").spec.obs_mode == "vector"  # the default is unchanged


def test_a_batch_renders_each_envs_own_state(cartpole):
    """seeds x envs, as the train loop vmaps them, inside lax.scan (one callback per tick):
    the reset frame and the frame after each step (after the whole repeat of 2 control steps)
    are MuJoCo's own frames of that env's state."""
    env, model = cartpole
    keys = jax.random.split(jax.random.key(1), 4).reshape(2, 2)
    actions = jnp.array([[[1.0], [-1.0]], [[0.5], [-0.2]]])

    def run(keys):
        first = jax.vmap(jax.vmap(env.reset))(keys)

        def tick(states, _):
            states = jax.vmap(jax.vmap(env.step))(states, actions)
            return states, states.obs

        last, frames = jax.lax.scan(tick, first, None, length=2)
        return first, last, frames

    first, last, frames = jax.jit(run)(keys)
    assert first.obs.dtype == jnp.uint8 and frames.shape == (2, 2, 2, 64, 64, 3)
    for s in range(2):
        for e in range(2):
            for state, frame in ((first, first.obs[s, e]), (last, frames[-1, s, e])):
                inner = jax.tree.map(lambda x, s=s, e=e: x[s, e], state.inner)
                np.testing.assert_array_equal(frame, oracle(model, inner, 0))
    assert np.asarray(frames).std() > 0  # a scene, not a blank buffer
    assert not np.array_equal(frames[-1, 0, 0], frames[-1, 0, 1])  # the envs differ
    assert not np.array_equal(frames[-1, 0, 0], frames[0, 0, 0])  # and move: a new frame a step


def test_autoreset_draws_the_reset_frame_only_where_an_episode_ended(cartpole, monkeypatch):
    """DreamerV3's dynamic mode: under vmap both auto-reset branches run; the reset frame is
    drawn after the select, for the ended envs only (2 envs, T = 2, 3 steps: 2 reset frames
    + 3 x 2 step frames + 2 reset frames at the episode end = 10 draws, not 14)."""
    import contextlib

    import envs.render
    from envs.autoreset import autoreset
    from envs.playground_backend import build

    drawn = []
    real = envs.render.mujoco_frames

    @contextlib.contextmanager
    def counting(*args, **kwargs):
        with real(*args, **kwargs) as frame:
            yield lambda kept: (drawn.append(1), frame(kept))[1]

    monkeypatch.setattr(envs.render, "mujoco_frames", counting)
    env = autoreset(build("cartpole_swingup", 2, 4, obs="image"))  # a new renderer, T = 2

    def run(keys):
        def tick(states, _):
            states = jax.vmap(env.step)(states, jnp.ones((2, 1)))
            return states, states

        first = jax.vmap(env.reset)(keys)
        return first.obs, jax.lax.scan(tick, first, None, length=3)[1]

    # (the first frames are returned: an unused pure_callback is dead code, never drawn)
    first, states = jax.jit(run)(jax.random.split(jax.random.key(2), 2))
    assert len(drawn) == 10 and np.asarray(first).std() > 0
    assert np.asarray(states.done).tolist() == [[False, False], [True, True], [False, False]]
    for e in range(2):
        inner = jax.tree.map(lambda x, e=e: x[1, e], states.inner.inner)  # the reset state
        np.testing.assert_array_equal(states.obs[1, e], oracle(cartpole[1], inner, 0))
        assert not np.array_equal(states.final_obs[1, e], states.obs[1, e])
        np.testing.assert_array_equal(states.final_obs[0, e], states.obs[0, e])


def test_host_pixels_unbatched_is_the_seam(cartpole):
    """The seam alone: a JAX function of the kept arrays, jitted, no env around it."""
    model = cartpole[1]
    qpos = np.array([0.1, 2.0])
    kept = {"qpos": qpos, "qvel": np.zeros(2), "mocap_pos": np.zeros((0, 3))}
    kept["mocap_quat"] = np.zeros((0, 4))
    frame = jax.jit(host_pixels(model, 1, (32, 48)))(kept)  # camera 1 "lookatcart", 32 x 48
    import mujoco

    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    with mujoco.Renderer(model, 32, 48) as gl:
        gl.update_scene(data, camera=1)
        np.testing.assert_array_equal(frame, gl.render())


def test_default_gl_names_a_library_that_is_here():
    import ctypes.util

    gl = default_mujoco_gl()
    lib = {"osmesa": "OSMesa", "egl": "EGL"}.get(gl)
    assert gl == "disable" or ctypes.util.find_library(lib)


def test_the_cpu_budget_counts_the_render_in_image_mode_only():
    from launcher.config.cpu_budget import image_cpu_s

    declared = envs.backends()["playground"].image_cpu_s
    assert declared > 0 and image_cpu_s("playground", "image") == declared
    assert image_cpu_s("playground", "vector") == 0.0 and image_cpu_s("custom", "image") == 0.0
