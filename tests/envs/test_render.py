"""envs.render: frames of env states (the MuJoCo path needs OpenGL, which this test session
switches off: it is tested through ``launcher.evaluate --video`` in a subprocess,
tests/launcher/test_launcher_tdmpc2.py)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import envs
from envs.render import RenderError, renderer


def test_gymnax_frames_draw_the_state():
    env = envs.make("pendulum")
    draw = renderer("pendulum")
    states = [env.reset(jax.random.key(k)) for k in (0, 1)]  # two random pole angles
    with draw.open() as frame:
        a, b = (frame(jax.device_get(draw.keep(s.inner))) for s in states)
    assert a.dtype == np.uint8 and a.shape == (500, 500, 3)  # Gymnasium's Pendulum-v1 frame
    assert np.ptp(a) > 0 and (a != b).any()
    assert draw.fps == 30.0  # Gymnasium's render_fps for Pendulum-v1


@pytest.mark.parametrize("env_id", ["probe_constant_reward", "mt3_cpu"])
def test_envs_without_a_picture_are_refused(env_id):
    with pytest.raises(RenderError, match="envs have no renderer"):
        renderer(env_id)
