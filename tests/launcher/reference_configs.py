"""The DreamerV3 reference's ``configs.yaml`` for the protocol tests that pin values to it
(``test_protocol_crafter.py``, ``test_protocol_dmc_vision.py``): read from the fetched
snapshot when it is on this machine, else the test is skipped (CI checks the pinned values
against the project's own configs only)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REFERENCE_GIT = Path("/work/.mirror/danijar+dreamerv3/repo")
COMMIT = "29eb964"


def reference_text() -> str:
    """``dreamerv3/configs.yaml`` at :data:`COMMIT`; skips the test without the snapshot."""
    try:
        return subprocess.run(
            ["git", "-C", str(REFERENCE_GIT), "show", f"{COMMIT}:dreamerv3/configs.yaml"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("the reference's snapshot is not on this machine")


def check_pinned(pinned: dict[tuple[str, ...], tuple[Any, int]]) -> dict[str, Any]:
    """Each ``path -> (value, line)`` of ``pinned`` is the reference file's: the value at
    that key path (a float compared as a float: YAML reads ``6e5`` as a string) and the
    path's last key named on that 1-based line (a regex key with its ``.*`` / ``\\``
    stripped). Returns the parsed file, for further checks."""
    text = reference_text()
    config, lines = yaml.safe_load(text), text.splitlines()
    for path, (value, line) in pinned.items():
        node = config
        for key in path:
            node = node[key]
        got = float(node) if isinstance(value, float) else node
        assert got == value, path
        assert path[-1].split(".")[-1].strip("*\\") in lines[line - 1], (path, line)
    return config
