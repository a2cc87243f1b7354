"""benchmarks/_refs.py: the speed benchmarks take the reference checkouts from options or
environment variables, and without them stop with one ``error:`` line naming both and the
recipe (no machine's path as a default)."""

from __future__ import annotations

import argparse

import pytest
from launcher_fakes import benchmark_script

refs = benchmark_script("_refs")


def test_missing_reference_is_one_error_line_naming_the_fix(capsys):
    with pytest.raises(SystemExit) as exc:
        refs.require(refs.TDMPC2, "", "", "--no-ref")
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ")
    for part in ("--ref", "$WMRL_TDMPC2_REF", "$WMRL_TDMPC2_REF_PYTHON", "5f6fade"):
        assert part in err
    assert "Reference checkouts" in err and "--no-ref" in err


def test_a_wrong_path_is_named(tmp_path):
    msg = refs.problem(refs.DREAMERV3, str(tmp_path / "none"), "/bin/sh", "--skip-reference")
    assert msg.startswith(f"--ref {tmp_path / 'none'}: no such directory") and "29eb964" in msg
    msg = refs.problem(refs.DREAMERV3, str(tmp_path), str(tmp_path / "py"), "--skip-reference")
    assert msg.startswith("--ref-python") and "--skip-reference" in msg
    assert refs.problem(refs.DREAMERV3, str(tmp_path), "/bin/sh", "--skip-reference") is None


def test_options_default_to_the_environment(monkeypatch):
    monkeypatch.setenv("WMRL_TDMPC2_REF", "/somewhere/tdmpc2")
    monkeypatch.delenv("WMRL_TDMPC2_REF_PYTHON", raising=False)
    parser = argparse.ArgumentParser()
    refs.add_arguments(parser, refs.TDMPC2)
    args = parser.parse_args([])
    assert (args.ref, args.ref_python) == ("/somewhere/tdmpc2", "")
    assert parser.parse_args(["--ref-python", "py"]).ref_python == "py"
