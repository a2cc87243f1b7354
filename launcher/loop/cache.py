"""JAX's persistent compilation cache, on by default for every launch.

A relaunch (a resume, the next job of a sweep, ``make run`` twice) loads its compiled
programs instead of compiling them again. Where the cache lives:

* ``JAX_COMPILATION_CACHE_DIR`` (JAX's own variable) when set;
* else ``WMRL_COMPILE_CACHE``: a directory, or ``off`` to disable it;
* else ``$XDG_CACHE_HOME/wmrl/jax`` (default ``~/.cache/wmrl/jax``).
"""

from __future__ import annotations

import os
from pathlib import Path

VARIABLE = "WMRL_COMPILE_CACHE"


def cache_dir() -> Path | None:
    """The directory the launcher's compile cache uses (None: disabled)."""
    own = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if own:
        return Path(own)
    choice = os.environ.get(VARIABLE, "")
    if choice.lower() == "off":
        return None
    if choice:
        return Path(choice).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "wmrl" / "jax"


def enable_compile_cache() -> Path | None:
    """Point JAX's persistent cache at :func:`cache_dir` (unless a directory is already
    configured); returns the directory in use."""
    import jax

    current = jax.config.jax_compilation_cache_dir
    if current:
        return Path(current)
    directory = cache_dir()
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    return directory
