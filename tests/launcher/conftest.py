"""Fixtures shared by the launcher tests (helpers live in launcher_fakes.py)."""

from __future__ import annotations

import pytest
from launcher_fakes import checkpoint_steps, launch

from launcher.store.checkpoint import fingerprint


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """The uninterrupted fake run (6 chunks, 2 seeds): (run dir, final state fingerprint)."""
    run_dir = tmp_path_factory.mktemp("full") / "run"
    result = launch(run_dir)
    assert checkpoint_steps(run_dir) == [40, 60]
    return run_dir, fingerprint(result.state)
