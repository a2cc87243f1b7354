"""``wmrl --help`` and tab completion import no jax (issue 45 item 2): the ``env=`` options
come from a cache file named by the env package's source
(:mod:`launcher.config.env_listing`), so only the first listing after an edit of
``envs/`` imports the registry (and jax with it). Each check runs the launcher in a fresh
interpreter (a subprocess) and reads its ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from launcher.config import env_listing

ROOT = Path(__file__).resolve().parents[2]
# `python -m launcher ARGS` in process, then what it imported and printed, as JSON.
PROBE = """
import contextlib, io, json, runpy, sys
sys.argv = ["launcher", *sys.argv[1:]]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        runpy.run_module("launcher", run_name="__main__")
    except SystemExit:
        pass
loaded = [m for m in sys.modules if m.split(".")[0] in ("jax", "flax", "envs")]
print(json.dumps({"loaded": sorted(loaded), "out": out.getvalue()}))
"""


def launcher(cache: Path, *args: str, **env: str) -> dict:
    """What ``python -m launcher ARGS`` printed and which jax/flax/envs modules it loaded,
    with ``XDG_CACHE_HOME=cache``."""
    environ = {**os.environ, "XDG_CACHE_HOME": str(cache), **env}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def env_line(text: str) -> str:
    (line,) = [x for x in text.splitlines() if x.startswith("env: ")]
    return line


def test_help_and_completion_import_no_jax_once_the_env_list_is_cached(tmp_path):
    cache = tmp_path / "cache"
    first = launcher(cache, "--help")  # no cache file yet: listed from the registry
    assert "jax" in first["loaded"]  # the registry's modules import it (why the cache)
    (written,) = (cache / "wmrl" / "env_options").glob("*.json")
    assert json.loads(written.read_text()) == env_listing.registry_options()
    again = launcher(cache, "--help")
    assert again["loaded"] == []  # neither jax nor flax nor any env module
    assert env_line(again["out"]) == env_line(first["out"])
    assert "walker_walk" in env_line(again["out"]) and "custom" in env_line(again["out"])
    line = "wmrl env=walker_w"
    done = launcher(cache, "-sc", "query=bash", COMP_LINE=line, COMP_POINT=str(len(line)))
    assert done["loaded"] == [] and done["out"].split() == ["env=walker_walk"]


def test_the_cache_file_is_named_by_the_env_source(tmp_path):
    """Any edit of a file of the env package names another file: a stale list is never
    read."""
    package = tmp_path / "envs"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("A = 1\n")
    (package / "sub" / "b.py").write_text("B = 2\n")
    key = env_listing.source_key(package)
    assert env_listing.source_key(package) == key  # the same source: the same file
    (package / "sub" / "b.py").write_text("B = 3\n")
    changed = env_listing.source_key(package)
    (package / "c.py").write_text("")
    added = env_listing.source_key(package)
    assert len({key, changed, added}) == 3
    assert env_listing.source_key() != env_listing.source_key(package)  # the real package


def test_a_loaded_registry_is_read_itself_and_not_cached(tmp_path, monkeypatch):
    """A process with the registry loaded lists what it holds (a backend it registered
    too) and writes no cache file."""
    import envs  # noqa: F401 - the registry loaded, as in a launch

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert env_listing.env_options() == env_listing.registry_options()
    assert not (tmp_path / "wmrl").exists()
