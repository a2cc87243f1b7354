"""The ``env=`` options (Hydra's ``env`` group), generated from the env registry, without
jax where the registry is not loaded yet.

The registry's tables are static (each backend module's ``BACKEND``), but its modules
import jax and flax at module level (``envs.core``, ``envs.wrappers``), about 2 s of
``wmrl --help`` and of every tab completion. So the options are kept in a small cache
file named by a hash of the env package's source (and of this module's)::

    $XDG_CACHE_HOME/wmrl/env_options/<sha256 of envs/**/*.py + this file>.json

A process that has not imported ``envs.registry`` reads the file when it is there (no
jax); else it builds the options from the registry and writes the file (atomically; an
unwritable cache is skipped). Any edit of ``envs/`` names another file, so a stale list
is never read. A process that has the registry loaded reads the registry itself (it
may hold a backend the program registered) and writes nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

Options = dict[str, dict[str, Any]]


def env_options() -> Options:
    """The ``env=`` options: one per registered id, ``{id}`` plus the ``action_repeat``
    its backend declares for its options when not 1 (``envs.core.Backend.
    preset_action_repeat``: 2 on DMC), then ``custom``, a user's own env
    (``env=custom env.factory=pkg.module:make_env``, :mod:`envs.custom`)."""
    if "envs.registry" in sys.modules:  # loaded: what this process registered counts
        return registry_options()
    path = cache_file()
    try:
        cached = json.loads(path.read_text()) if path is not None else None
    except (OSError, ValueError):
        cached = None
    if isinstance(cached, dict) and all(isinstance(v, dict) for v in cached.values()):
        return cached
    options = registry_options()  # imports the registry: the static tables only
    if path is not None:
        _write(path, options)
    return options


def registry_options() -> Options:
    """:func:`env_options` read from the registry (imports it, and jax)."""
    import envs
    from launcher.config.schema import CUSTOM_ENV

    declared = envs.backends()
    options: Options = {}
    for env_id in envs.list_envs():
        node: dict[str, Any] = {"id": env_id}
        repeat = declared[envs.backend_of(env_id)].preset_action_repeat
        if repeat != 1:  # 1 is the schema's default: not restated
            node["action_repeat"] = repeat
        options[env_id] = node
    options[CUSTOM_ENV] = {"id": CUSTOM_ENV}
    return options


def source_key(package: Path | None = None) -> str | None:
    """sha256 of the env package's ``.py`` files (path and bytes, in path order) and of
    this module; None if the package cannot be found."""
    if package is None:
        spec = importlib.util.find_spec("envs")  # finds the package, runs none of it
        if spec is None or not spec.submodule_search_locations:
            return None
        package = Path(next(iter(spec.submodule_search_locations)))
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_file() -> Path | None:
    """Where the options of the current env source are kept (None: no env package)."""
    key = source_key()
    if key is None:
        return None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "wmrl" / "env_options" / f"{key}.json"


def _write(path: Path, options: Options) -> None:
    """Write the file via a temporary file + rename (a concurrent reader sees the whole
    file or none); skipped where the cache cannot be written (a read-only home)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(options, f)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
