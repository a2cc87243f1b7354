"""RGB frames of env states, for episode videos (``python -m launcher.evaluate RUN --video``).

:func:`renderer` gives the :class:`EnvRenderer` of a registered env:

* ``keep(inner)``: a pure JAX function of the backend's own state (``EnvState.inner``)
  that keeps only what a frame needs (jit it into the rollout step: a few arrays to copy
  to the host per step, not a whole MJX ``Data``);
* ``open()``: a context manager yielding ``frame(kept) -> uint8 [H, W, 3]`` (host);
* ``fps``: the playback rate at one frame per agent step.

Backends:

* ``playground`` and ``brax``: MuJoCo's renderer (``mujoco.Renderer``) on the env's own
  ``MjModel``, seen from the model's first camera where it has one (DMC's tracking
  ``side`` camera of walker and cheetah, cartpole's ``fixed`` one), else MuJoCo's free
  camera; real time (``1 / (env.dt * action_repeat)`` frames per second). MuJoCo needs an
  OpenGL context: on a machine without a display ``MUJOCO_GL=egl`` (libEGL with a Mesa or
  NVIDIA driver) or ``MUJOCO_GL=osmesa``, set before ``mujoco`` is imported (the caller's
  job: it reads the process environment).
* ``gymnax`` classic control: gymnax's own render path for these envs,
  ``gymnax.visualize.vis_gym.render_gym_frame`` (Gymnasium's ``rgb_array`` renderer, which
  draws with pygame-ce: the ``gymnax[visualize]`` extra), at Gymnasium's ``render_fps``.

Probe envs and task sets have nothing to show: :class:`RenderError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from envs.registry import backend_of

RENDERED_BACKENDS = ("gymnax", "brax", "playground")
MUJOCO_BACKENDS = ("brax", "playground")
DEFAULT_SIZE = (240, 320)  # (height, width): within every MuJoCo model's offscreen buffer

Frame = Callable[[Any], np.ndarray]


class RenderError(ValueError):
    """An env that cannot be rendered here: the message names why and the fix."""


@dataclasses.dataclass(frozen=True)
class EnvRenderer:
    """How to draw one env's states (see the module docstring).

    Attributes:
      env_id: the registry id.
      fps: frames per second of the video, one frame per agent step.
      keep: pure ``inner -> pytree``: what ``frame`` reads of a backend state.
      open: ``() -> context manager`` yielding ``frame(kept) -> uint8 [H, W, 3]``.
    """

    env_id: str
    fps: float
    keep: Callable[[Any], Any]
    open: Callable[[], contextlib.AbstractContextManager[Frame]]


def renderer(
    env_id: str, action_repeat: int = 1, size: tuple[int, int] = DEFAULT_SIZE
) -> EnvRenderer:
    """The renderer of ``env_id`` run at ``action_repeat``; ``size`` = (height, width) of
    the MuJoCo frames (gymnax frames keep Gymnasium's size).

    Raises:
      RenderError: the env's backend has no renderer, or its renderer's package is missing.
      UnknownEnvError: ``env_id`` is not registered.
    """
    backend = backend_of(env_id)
    if backend == "gymnax":
        return _gymnax(env_id)
    if backend == "playground":
        from envs.playground_backend import PLAYGROUND_ENVS, load_raw

        env, _ = load_raw(PLAYGROUND_ENVS[env_id])
        model, keep = env.mj_model, _playground_keep
    elif backend == "brax":
        from brax import envs as brax_envs

        from envs.brax_backend import pipeline_for

        env = brax_envs.get_environment(env_id, backend=pipeline_for(env_id))
        model, keep = env.sys.mj_model, _brax_keep
    else:
        raise RenderError(
            f"{env_id}: {backend} envs have no renderer (rendered: gymnax classic control, "
            "brax and MuJoCo Playground envs)"
        )
    fps = 1.0 / (float(env.dt) * action_repeat)
    return EnvRenderer(env_id, fps, keep, lambda: _mujoco_frames(model, *size))


def probe_mujoco_gl() -> None:
    """Start and stop MuJoCo's renderer on an empty model: raises whatever MuJoCo or
    OpenGL raises when no context can be made (``MUJOCO_GL`` off, no libEGL / libOSMesa)."""
    import mujoco

    with _mujoco_frames(mujoco.MjModel.from_xml_string("<mujoco/>"), 8, 8) as frame:
        frame({"qpos": np.zeros(0), "qvel": np.zeros(0)})


# ------------------------------------------------------------------------- MuJoCo
def _playground_keep(inner: Any) -> dict[str, Any]:
    data = inner.data
    return {
        "qpos": data.qpos,
        "qvel": data.qvel,
        "mocap_pos": data.mocap_pos,
        "mocap_quat": data.mocap_quat,
    }


def _brax_keep(inner: Any) -> dict[str, Any]:
    return {"qpos": inner.pipeline_state.q, "qvel": inner.pipeline_state.qd}


@contextlib.contextmanager
def _mujoco_frames(model: Any, height: int, width: int) -> Iterator[Frame]:
    """``frame(kept)`` on one ``mujoco.Renderer`` (closed on exit).

    Hand-written rather than playground's ``render_array`` / brax's
    ``brax.io.image.render_array`` (the same MuJoCo calls: set the state, ``mj_forward``,
    ``update_scene``, ``render``): those take a whole trajectory and return all its frames
    at once (a 1,000-step episode at 240x320 is 230 MB; playground's also prints a tqdm
    bar), where a video streams one frame at a time.
    """
    import mujoco

    gl = mujoco.Renderer(model, height=height, width=width)
    data = mujoco.MjData(model)
    camera = 0 if model.ncam > 0 else -1

    def frame(kept: Any) -> np.ndarray:
        data.qpos[:] = np.asarray(kept["qpos"])
        data.qvel[:] = np.asarray(kept["qvel"])
        if model.nmocap and "mocap_pos" in kept:
            data.mocap_pos[:] = np.asarray(kept["mocap_pos"])
            data.mocap_quat[:] = np.asarray(kept["mocap_quat"])
        mujoco.mj_forward(model, data)
        gl.update_scene(data, camera=camera)
        return gl.render()

    try:
        yield frame
    finally:
        gl.close()


# ------------------------------------------------------------------------- gymnax
def _gymnax(env_id: str) -> EnvRenderer:
    if importlib.util.find_spec("pygame") is None:
        raise RenderError(
            f"{env_id}: gymnax's classic-control renderer (Gymnasium's) needs pygame-ce; "
            "pip install 'gymnax[visualize]'"
        )
    import gymnax

    from envs.gymnax_backend import GYMNAX_ENVS

    name = GYMNAX_ENVS[env_id]
    _, params = gymnax.make(name)
    fps = _gymnasium_fps(name)

    @contextlib.contextmanager
    def frames() -> Iterator[Frame]:
        from gymnax.visualize.vis_gym import render_gym_frame

        yield lambda kept: np.asarray(render_gym_frame(name, kept, params), np.uint8)

    return EnvRenderer(env_id, fps, lambda inner: inner, frames)


def _gymnasium_fps(name: str) -> float:
    """Gymnasium's playback rate of its env ``name`` (``metadata['render_fps']``, a class
    attribute: read off the registered class, no env is made)."""
    from gymnasium.envs.registration import load_env_creator, spec

    return float(load_env_creator(spec(name).entry_point).metadata["render_fps"])
