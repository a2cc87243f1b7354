"""RGB frames of env states, for episode videos (``python -m launcher.evaluate RUN --video``).

:func:`renderer` gives the :class:`EnvRenderer` of a registered env, made by its backend's
declared renderer (:attr:`envs.core.Backend.renderer`):

* ``keep(inner)``: a pure JAX function of the backend's own state (``EnvState.inner``)
  that keeps only what a frame needs (jit it into the rollout step: a few arrays to copy
  to the host per step, not a whole MJX ``Data``);
* ``open()``: a context manager yielding ``frame(kept) -> uint8 [H, W, 3]`` (host);
* ``fps``: the playback rate at one frame per agent step.

The backends' renderers:

* ``playground`` and ``brax``: MuJoCo's renderer (``mujoco.Renderer``) on the env's own
  ``MjModel`` (:func:`mujoco_renderer`, here), seen from the model's first camera where it
  has one (DMC's tracking ``side`` camera of walker and cheetah, cartpole's ``fixed`` one),
  else MuJoCo's free camera; real time (``1 / (env.dt * action_repeat)`` frames per second).
  MuJoCo needs an OpenGL context: on a machine without a display ``MUJOCO_GL=egl`` (libEGL
  with a Mesa or NVIDIA driver) or ``MUJOCO_GL=osmesa``, set before ``mujoco`` is imported
  (the caller's job: it reads the process environment).
* ``gymnax`` classic control: gymnax's own render path (:func:`envs.gymnax_backend.renderer`)
  at Gymnasium's ``render_fps``.
* ``minatar``: gymnax's MinAtar drawing (:func:`envs.minatar_backend.renderer`), ``size`` pixels.
* ``craftax``: Craftax's own pixel renderer, drawn on device
  (:func:`envs.craftax_backend.renderer`).

Probe envs, task sets and a user's own env have nothing to show: :class:`RenderError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from envs.registry import backend_of, backends

# The backends with a renderer, and those whose renderer is MuJoCo's (read off their
# declarations, envs.core.Backend).
RENDERED_BACKENDS = tuple(n for n, b in backends().items() if b.renderer is not None)
MUJOCO_BACKENDS = tuple(n for n, b in backends().items() if b.mujoco_gl)
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
    make = backends()[backend].renderer
    if make is None:
        raise RenderError(
            f"{env_id}: {backend} envs have no renderer (rendered: gymnax classic control, "
            "MinAtar, Craftax, brax and MuJoCo Playground envs)"
        )
    return make(env_id, action_repeat, size)


def mujoco_renderer(
    env_id: str, model: Any, keep: Callable[[Any], Any], dt: float, size: tuple[int, int]
) -> EnvRenderer:
    """The renderer of a MuJoCo-based env: ``model`` its ``MjModel``, ``keep`` what a frame
    reads of its state (``qpos`` and ``qvel``, optionally ``mocap_pos`` / ``mocap_quat``),
    ``dt`` the seconds of one agent step (real-time playback), ``size`` = (height, width)."""
    return EnvRenderer(env_id, 1.0 / dt, keep, lambda: mujoco_frames(model, *size))


def probe_mujoco_gl() -> None:
    """Start and stop MuJoCo's renderer on an empty model: raises whatever MuJoCo or
    OpenGL raises when no context can be made (``MUJOCO_GL`` off, no libEGL / libOSMesa)."""
    import mujoco

    with mujoco_frames(mujoco.MjModel.from_xml_string("<mujoco/>"), 8, 8) as frame:
        frame({"qpos": np.zeros(0), "qvel": np.zeros(0)})


# ------------------------------------------------------------------------- MuJoCo
@contextlib.contextmanager
def mujoco_frames(
    model: Any, height: int, width: int, camera: int | None = None
) -> Iterator[Frame]:
    """``frame(kept)`` on one ``mujoco.Renderer`` (closed on exit), from camera id ``camera``
    (None: the model's first camera where it has one, else MuJoCo's free camera). Videos and
    the image observations of :mod:`envs.pixels` both draw through it.

    Hand-written rather than playground's ``render_array`` / brax's
    ``brax.io.image.render_array`` (the same MuJoCo calls: set the state, ``mj_forward``,
    ``update_scene``, ``render``): those take a whole trajectory and return all its frames
    at once (a 1,000-step episode at 240x320 is 230 MB; playground's also prints a tqdm
    bar), where a video streams one frame at a time.
    """
    import mujoco

    gl = mujoco.Renderer(model, height=height, width=width)
    data = mujoco.MjData(model)
    if camera is None:
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
