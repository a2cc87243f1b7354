"""The launcher's layout by concern (issue 45 item 4): the old flat module paths that
scripts still import are the moved modules themselves, and ``python -m analysis`` is the
analysis package's entry (``launcher.report`` / ``launcher.paper_curves`` its old
spellings, run by name)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import launcher
from analysis.__main__ import main as analysis_main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("old", sorted(launcher.MOVED))
def test_an_old_path_is_the_moved_module(old):
    new = importlib.import_module(launcher.MOVED[old])
    module = importlib.import_module(old)
    assert module is new  # one module: a monkeypatch through either name is seen by both
    assert module.__name__ == new.__spec__.name == launcher.MOVED[old]
    assert not (ROOT / Path(*old.split("."))).with_suffix(".py").exists()  # no second copy


def test_python_m_analysis_runs_the_report_and_the_paper_curves(tmp_path, capsys):
    assert analysis_main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'missing'}: no such run directory\n"
    assert analysis_main(["paper-curves", "check", "--agent", "nope", "--src", "x"]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_the_old_paper_curves_spelling_runs_analysis_by_name(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "launcher.paper_curves", "check", "--agent", "nope", "--src", "x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
