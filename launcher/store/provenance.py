"""Where a run's numbers came from: the code's git commit, whether the checkout had
uncommitted changes, and the JAX version, backend and devices that ran it.

:func:`collect` is stored in ``run.json`` (``provenance``) when a run starts and appended
to ``RUN_DIR/launches.jsonl`` by every launch (a resumed run may have been continued by
other code); a judged row of :mod:`analysis.acceptance` lists it.
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path
from typing import Any

SOURCE_ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str | None:
    """``git ARGS`` in the source checkout; None when git or the checkout is missing."""
    try:
        out = subprocess.run(
            ["git", *args], cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """``{"git_sha": <40 hex> | None, "git_dirty": bool | None}`` of the source checkout
    (dirty: tracked files changed or untracked files present, ``git status --porcelain``)."""
    sha = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=normal") if sha else None
    return {"git_sha": sha, "git_dirty": None if status is None else bool(status)}


def collect() -> dict[str, Any]:
    """This process's provenance: git state, JAX version, default backend, device kinds."""
    import jax

    devices = jax.devices()
    return {
        **git_state(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": sorted({d.device_kind for d in devices}),
        "n_devices": len(devices),
        "python": platform.python_version(),
        "host": platform.node(),
    }
