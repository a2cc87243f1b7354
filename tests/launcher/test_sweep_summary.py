"""A multirun's summary (launcher/loop/sweep_status.py) ends with the overlay command of its
completed runs (issue 44 item 8)."""

from __future__ import annotations

import json

from launcher.loop import sweep_status


def _record(sweep_dir, rows) -> None:
    path = sweep_status.status_file(sweep_dir, "abc")
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _row(job, run_dir, status="completed"):
    return {
        "job": job,
        "overrides": [f"env=e{job}"],
        "run_dir": str(run_dir),
        "status": status,
        "error": "RunStopped: x" if status == "failed" else None,
        "logs": None,
    }


def test_the_summary_names_the_overlay_of_the_completed_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sweep = tmp_path / "runs"
    runs = [sweep / "a", sweep / "b", sweep / "c", tmp_path.parent / "elsewhere"]
    _record(
        sweep, [_row(0, runs[0]), _row(1, runs[1], "failed"), _row(2, runs[2]), _row(3, runs[3])]
    )
    text = sweep_status.report([f"hydra.sweep.dir={sweep}"], "abc")
    lines = text.splitlines()
    assert lines[0] == "sweep: 4 job(s), 1 failed"
    # the failed run is left out; runs below the working directory are written relative
    assert lines[-1] == f"overlay: python -m analysis runs/a runs/c {runs[3]}"


def test_one_completed_run_has_no_overlay(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sweep = tmp_path / "runs"
    _record(sweep, [_row(0, sweep / "a"), _row(1, sweep / "b", "failed")])
    text = sweep_status.report([f"hydra.sweep.dir={sweep}"], "abc")
    assert text.startswith("sweep: 2 job(s), 1 failed") and "overlay:" not in text
