"""Image observations of MuJoCo envs, drawn on the host inside jitted env code (issue 47, E30).

The seam: :func:`host_pixels` returns ``pixels(kept) -> uint8 [H, W, 3]``, a JAX function of
what a frame reads of a state (``qpos``, ``qvel``, ``mocap_pos``, ``mocap_quat``: the
``keep`` of :mod:`envs.render`). Today it leaves the device: a ``jax.pure_callback`` hands
the states to MuJoCo's own renderer (``mujoco.Renderer``, OpenGL) on the host, as both
references render their DMC frames on the host (dm_control's ``physics.render``). A renderer
that draws on the accelerator (e.g. a batch rasteriser over MJX states) would replace
:func:`host_pixels` with a pure JAX function of the same signature; nothing else changes
(:mod:`envs.playground_backend` calls it through this one name).

Batching: ``vmap_method="broadcast_all"``, so a ``vmap`` over envs (and seeds: the loop nests
both inside ``lax.scan``) makes ONE callback with every env's state stacked on leading axes,
drawn one after another by one renderer on one host thread of its own.

Camera (:func:`camera_of`): the references' rule, DreamerV3 ``embodied/envs/dmc.py``
(``camera=-1`` -> ``DEFAULT_CAMERAS``: quadruped 2, else 0) and TD-MPC2
``tdmpc2/envs/dmcontrol.py`` (``camera_id = 2 if domain == 'quadruped' else 0``); both at
64 x 64 (DreamerV3 ``size=(64, 64)``, TD-MPC2 ``Pixels(size=64)``).

OpenGL (:func:`default_mujoco_gl`): MuJoCo picks its GL from ``MUJOCO_GL`` when ``mujoco``
is first imported; the launcher (:func:`launcher.tools.gl.ensure_mujoco_gl`) and the test
session set it from here before that.
"""

from __future__ import annotations

import ctypes.util
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

IMAGE_SIZE = (64, 64)  # (height, width): DreamerV3 dmc.py size=(64, 64); TD-MPC2 Pixels size=64
DEFAULT_CAMERAS = {"quadruped": 2}  # every other domain: camera 0 (both references)


def camera_of(env_id: str) -> int:
    """The camera id the references observe ``env_id`` (``<domain>_<task>``) from."""
    return DEFAULT_CAMERAS.get(env_id.split("_", 1)[0], 0)


def default_mujoco_gl() -> str:
    """The ``MUJOCO_GL`` to use when none is set: ``egl`` where NVIDIA's EGL driver is
    installed (rendering on the GPU), else ``osmesa`` where libOSMesa is (Mesa's software
    rasteriser, no display or device needed), else ``egl`` where libEGL is (Mesa's), else
    ``disable`` (no OpenGL: ``import mujoco`` still works, ``mujoco.Renderer`` does not).
    Only libraries that load are named: ``import mujoco`` fails when the chosen one is missing.
    """
    if ctypes.util.find_library("EGL_nvidia"):
        return "egl"
    if ctypes.util.find_library("OSMesa"):
        return "osmesa"
    if ctypes.util.find_library("EGL"):
        return "egl"
    return "disable"


def host_pixels(
    model: Any, camera: int, size: tuple[int, int] = IMAGE_SIZE
) -> Callable[[Any], jax.Array]:
    """``pixels(kept) -> uint8 [H, W, 3]``: ``model``'s scene at the state ``kept`` seen from
    camera ``camera``, drawn on the host by ``mujoco.Renderer`` (see the module docstring).

    Args:
      model: the env's ``mujoco.MjModel`` (the host twin of its MJX model).
      camera: the camera id (:func:`camera_of`).
      size: (height, width) in pixels.

    Returns:
      ``pixels(kept, where=None)``, a JAX function; under ``vmap`` ``kept``'s leaves gain
      leading batch axes and so does the image. ``where`` ([] bool): draw only if True, else
      the image is zeros and costs nothing (the auto-reset's reset frame, drawn only for the
      envs whose episode ended). Needs a working ``MUJOCO_GL`` when it runs (not traced).
    """
    height, width = size
    # One thread of its own draws: an OpenGL context is current in one thread at a time, and
    # drawing on the thread XLA calls back on crashed (a segfault in Mesa under jit with
    # osmesa; the same draw on a Python thread works). A daemon thread: never joined at exit,
    # its renderer is freed with the process (closing an EGL context from another thread at
    # exit prints EGL errors).
    requests: queue.SimpleQueue = queue.SimpleQueue()
    started = threading.Lock()
    threads: list[threading.Thread] = []

    def serve() -> None:
        from envs.render import mujoco_frames

        try:
            with mujoco_frames(model, height, width, camera) as frame:
                while True:
                    flat, which, reply = requests.get()
                    out = np.zeros((len(which), height, width, 3), np.uint8)
                    for i in np.flatnonzero(which):
                        out[i] = frame({k: v[i] for k, v in flat.items()})
                    reply.put(out)
        except Exception as err:  # noqa: BLE001 - no renderer: every request gets the error
            gl = os.environ.get("MUJOCO_GL", "(unset)")
            why = (str(err).strip().splitlines() or [type(err).__name__])[0]
            failed = RuntimeError(
                f"MuJoCo's renderer cannot start with MUJOCO_GL={gl} ({why}); image observations "
                "need MUJOCO_GL=osmesa (apt install libosmesa6) or egl, set before mujoco is "
                "imported"
            )
            while True:
                requests.get()[2].put(failed)

    def draw_all(flat: dict[str, np.ndarray], which: np.ndarray) -> np.ndarray:
        with started:
            if not threads:
                threads.append(threading.Thread(target=serve, name="mujoco-pixels", daemon=True))
                threads[0].start()
        reply: queue.SimpleQueue = queue.SimpleQueue()
        requests.put((flat, which, reply))
        out = reply.get()
        if isinstance(out, Exception):
            raise out
        return out

    def draw(kept: dict[str, np.ndarray], where: np.ndarray) -> np.ndarray:
        batch = kept["qpos"].shape[:-1]  # the vmap axes (broadcast_all: on every leaf)
        n = int(np.prod(batch))
        flat = {k: np.asarray(v).reshape(n, *v.shape[len(batch) :]) for k, v in kept.items()}
        out = draw_all(flat, np.broadcast_to(where, batch).reshape(n))
        return out.reshape(*batch, height, width, 3)

    def pixels(kept: Any, where: jax.Array | None = None) -> jax.Array:
        shape = jax.ShapeDtypeStruct((height, width, 3), jnp.uint8)
        where = jnp.ones((), bool) if where is None else jnp.asarray(where, bool)
        return jax.pure_callback(draw, shape, kept, where, vmap_method="broadcast_all")

    return pixels
