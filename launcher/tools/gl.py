"""MuJoCo's OpenGL for the launcher's renderers (``--video``, ``env.obs=image``): which
``MUJOCO_GL`` a launch uses when none is set, and the one-line refusal when none works.

``MUJOCO_GL`` is read once, when ``mujoco`` is first imported (by an env's build or by the
facts an image env's check reads), so :func:`choose_mujoco_gl` runs at the launcher's entry
points, before anything builds an env.
"""

from __future__ import annotations

import os
import sys

from launcher.errors import ConfigError

GL_FIX = (
    "run with MUJOCO_GL=egl (libEGL and a Mesa or NVIDIA EGL driver: apt install libegl1 "
    "libegl-mesa0) or MUJOCO_GL=osmesa (apt install libosmesa6)"
)
_GL_OFF = ("disable", "disabled", "off", "false", "0")


def choose_mujoco_gl() -> None:
    """With ``MUJOCO_GL`` unset and ``mujoco`` not imported yet, set it to
    :func:`envs.pixels.default_mujoco_gl` (NVIDIA egl, else osmesa, else Mesa egl, else
    disable); a set value is the user's and stays."""
    if "MUJOCO_GL" not in os.environ and "mujoco" not in sys.modules:
        from envs.pixels import default_mujoco_gl

        os.environ["MUJOCO_GL"] = default_mujoco_gl()  # mujoco reads it on import


def ensure_mujoco_gl(purpose: str) -> None:
    """Make MuJoCo's renderer usable in this process for ``purpose`` (``--video``,
    ``env.obs=image``): with ``MUJOCO_GL`` unset and mujoco not imported yet, set it to
    :func:`envs.pixels.default_mujoco_gl` (NVIDIA egl, else osmesa, else Mesa egl), then start
    a renderer once. ConfigError naming the setting and the package to install."""
    from envs.render import probe_mujoco_gl

    choose_mujoco_gl()
    setting = os.environ.get("MUJOCO_GL")
    if (setting or "").strip().lower() in _GL_OFF:
        raise ConfigError(f"{purpose}: MUJOCO_GL={setting} turns MuJoCo's renderer off; {GL_FIX}")
    try:
        probe_mujoco_gl()
    except Exception as err:  # noqa: BLE001 - whatever OpenGL raises, there is no renderer
        why = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConfigError(
            f"{purpose}: MuJoCo's renderer cannot start with MUJOCO_GL={setting or '(unset)'} "
            f"({why}); {GL_FIX}"
        ) from None
