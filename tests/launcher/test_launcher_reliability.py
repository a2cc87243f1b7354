"""Reliability of the run loop, with the fake agent (tests/launcher/launcher_fakes.py).

* ``kill -9`` at 9 points of a run (during compile, during the start evaluation,
  inside a chunk's train call, after it, between the seeds' metric rows, after an
  evaluation, during and after a checkpoint save, during the final save), then the
  same command again: the final state and the metrics rows equal an uninterrupted
  run's, with no duplicated or torn rows.
* A corrupt, truncated or deleted latest checkpoint: a relaunch falls back to the
  previous one with a warning and ends bit-identical; ``launcher.evaluate`` evaluates
  the previous one and moves nothing.
* Two launches into one run directory at once: the second is refused ("in use by
  another launch") and the first is unharmed, also when the second comes while the
  first is still starting (its run directory still empty).

The guards (NaN, divergence, run-level bad inputs) are in test_launcher_guards.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from launcher_fakes import (
    FAKE_CLI,
    QUIET_HYDRA,
    checkpoint_steps,
    launch,
    make_fake_env,
    one_error_line,
    tree_digest,
)
from test_launcher_process import DRIVER, TIMING, drive, env, rows

from launcher.cli import main as cli_main
from launcher.errors import ConfigError
from launcher.store.checkpoint import fingerprint
from launcher.store.rundir import read_metrics
from launcher.tools.evaluate import evaluate_run
from launcher.tools.evaluate import main as evaluate_main

HERE = Path(__file__).parent
# the fake agent's smoke through the real CLI
CLI_FAKE = [*FAKE_CLI, "protocol=smoke", "env=pendulum", "logger=disabled", *QUIET_HYDRA]
CHUNK_STEPS = 10  # fake_config: log_frequency 10 env steps, 6 chunks, checkpoints every 2
ckpt_steps = checkpoint_steps


def assert_clean_metrics(run_dir: Path, seeds=(0, 1)) -> None:
    """Every line a JSON row ending in a newline; no (kind, chunk) twice."""
    for seed in seeds:
        text = (Path(run_dir) / "metrics" / f"seed_{seed}.jsonl").read_text()
        assert text.endswith("\n"), f"seed {seed}: a torn last line"
        keys = [(r["kind"], r["chunk"]) for r in map(json.loads, text.splitlines())]
        assert len(keys) == len(set(keys)), f"seed {seed}: duplicated rows {keys}"


def assert_equals_full(run_dir: Path, out: dict, full, steps=(40, 60)) -> None:
    """The final state, metrics rows and checkpoints of the uninterrupted run."""
    full_dir, full_fp = full
    assert out["chunks_done"] == 6
    assert out["fingerprint"] == full_fp
    for seed in (0, 1):
        assert rows(run_dir, seed) == rows(full_dir, seed), f"seed {seed}"
    assert_clean_metrics(run_dir)
    names = sorted((p.name for p in (run_dir / "checkpoints").iterdir()), key=int)  # no tmp
    assert names == [str(s) for s in steps]


# ------------------------------------------------------------------ kill -9 at 9 points
def kill_at_point(run_dir: Path, overrides: dict, point: str) -> None:
    """A launch that SIGKILLs itself at ``point`` (launcher.loop.faults)."""
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(run_dir), json.dumps(overrides)],
        capture_output=True,
        text=True,
        env=env(WMRL_KILL_AT=point),
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, (
        f"not killed at {point} (status {proc.returncode}): {proc.stderr[-3000:]}"
    )


# External kills: the launch's overrides (slow or held where the kill must land; its
# config differs, its numbers do not), the launcher.log line to wait for, then the
# delay before the SIGKILL. "go" (in the test's tmp dir) releases a held launch.
EXTERNAL = {
    # train traced for 2 s
    "compile": (lambda go: {"agent": {"trace_sleep_s": 2.0}}, "compiling train", 0.3),
    # inside chunk 3's jitted train call (from tick 22 on, a host callback waits for go)
    "mid-chunk": (
        lambda go: {"agent": {"hold_file": str(go), "hold_at": 22}},
        "chunk 2: checkpoint at env step 20",
        0.3,
    ),
}


def kill_from_outside(run_dir: Path, overrides: dict, point: str) -> None:
    """SIGKILL the launch from outside, ``delay`` s after ``marker`` is in its log."""
    _, marker, delay = EXTERNAL[point]
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), str(run_dir), json.dumps(overrides)],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log_file = run_dir / "launcher.log"
    try:
        deadline = time.monotonic() + 240
        while marker not in (log_file.read_text() if log_file.exists() else ""):
            assert proc.poll() is None, f"the launch ended before {marker!r}"
            assert time.monotonic() < deadline, f"no {marker!r} in launcher.log"
            time.sleep(0.02)
        time.sleep(delay)
        assert proc.poll() is None, "the launch ended before the kill"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL


# (kill point, rows per seed at the kill, the checkpoints it may leave). Per seed the
# uninterrupted file holds: eval 0, train 1, train 2, eval 2, train 3, train 4, eval 4,
# train 5, train 6, eval 6; checkpoints at chunks 2, 4, 6 (the latest 2 kept).
KILLS = [
    ("compile", (1, 1), [[]]),  # the start evaluation done, train being traced
    ("metrics:0", (1, 0), [[]]),  # seed 0's start-evaluation row written, seed 1's not
    ("mid-chunk", (4, 4), [[20]]),  # inside chunk 3's train call (held there)
    ("trained:3", (4, 4), [[20]]),  # chunk 3 computed, nothing written
    ("metrics:3", (5, 4), [[20]]),  # between the seeds' rows (+ a torn line, below)
    ("evaluated:4", (7, 7), [[20]]),  # the eval rows of chunk 4, its checkpoint not started
    ("saving:4", (7, 7), [[20], [20, 40]]),  # mid-save (orbax may or may not have finished)
    ("saved:4", (7, 7), [[20, 40]]),  # the checkpoint complete
    ("saving:6", (10, 10), [[20, 40], [40, 60], [20, 40, 60]]),  # the final save
]


@pytest.mark.parametrize(("point", "n_rows", "may_leave"), KILLS, ids=[k[0] for k in KILLS])
def test_kill_9_then_relaunch_is_bit_identical(point, n_rows, may_leave, full, tmp_path):
    run_dir = tmp_path / "run"
    go = tmp_path / "go"
    if point in EXTERNAL:
        overrides = EXTERNAL[point][0](go)
        kill_from_outside(run_dir, overrides, point)
    else:
        overrides = {}
        kill_at_point(run_dir, overrides, point)

    # the kill left what the point says: a prefix of the uninterrupted rows
    full_dir, _ = full
    for seed, n in zip((0, 1), n_rows, strict=True):
        path = run_dir / "metrics" / f"seed_{seed}.jsonl"
        got = read_metrics(path) if path.exists() else []
        got = [{k: v for k, v in r.items() if k not in TIMING} for r in got]
        assert got == rows(full_dir, seed)[:n], f"seed {seed} at the kill"
    saved = ckpt_steps(run_dir)
    assert saved in may_leave
    if point.startswith("saving:"):  # mid-save: never both the checkpoint and its tmp dir
        # (orbax creates the tmp dir in its background thread: it may not exist yet)
        step = int(point.split(":")[1]) * CHUNK_STEPS
        tmp = list((run_dir / "checkpoints").glob(f"{step}.orbax-checkpoint-tmp*"))
        assert not (step in saved and tmp)
    if point == "metrics:3":  # a kill in the middle of writing seed 1's row
        with (run_dir / "metrics" / "seed_1.jsonl").open("a") as f:
            f.write('{"kind": "train", "chunk": 3, "timestep": 3')

    go.touch()  # a held launch runs through
    out = drive(run_dir, overrides)  # the same command again
    latest = max(saved, default=0) // CHUNK_STEPS
    assert out["resumed_from"] == (None if latest in (0, 6) else latest)
    # killed after the final save (before orbax dropped the oldest): complete, unchanged
    assert_equals_full(run_dir, out, full, steps=saved if latest == 6 else (40, 60))
    assert not (run_dir / "corrupt_checkpoints").exists()  # no half-written checkpoint seen


def test_kill_points_cover_compile_mid_chunk_and_checkpoint_saves():
    names = {k[0].split(":")[0] for k in KILLS}
    assert len(KILLS) >= 6
    assert {"compile", "mid-chunk", "trained", "metrics", "evaluated", "saving", "saved"} <= names


# ------------------------------------------------------------------ damaged checkpoints
@pytest.fixture(scope="module")
def stopped4(tmp_path_factory):
    """A run stopped after chunk 4: checkpoints at env steps 20 and 40."""
    run_dir = tmp_path_factory.mktemp("stopped4") / "run"
    launch(run_dir, stop_after_chunks=4)
    assert ckpt_steps(run_dir) == [20, 40]
    return run_dir


def _data_files(step_dir: Path) -> list[Path]:
    files = [f for f in (step_dir / "state").rglob("*") if f.is_file() and f.parent.name == "d"]
    assert files, f"no OCDBT data files under {step_dir}"
    return files


def corrupt(step_dir: Path) -> None:
    """Flip the bits of the last 3/4 of every state data file (sizes kept)."""
    for f in _data_files(step_dir):
        data = bytearray(f.read_bytes())
        for i in range(len(data) // 4, len(data)):
            data[i] ^= 0xFF
        f.write_bytes(bytes(data))


def truncate(step_dir: Path) -> None:
    """Cut every state data file to half its length."""
    for f in _data_files(step_dir):
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def truncate_meta(step_dir: Path) -> None:
    meta = step_dir / "meta" / "metadata"
    meta.write_bytes(meta.read_bytes()[: meta.stat().st_size // 2])


def delete_state(step_dir: Path) -> None:
    shutil.rmtree(step_dir / "state")


def delete_step(step_dir: Path) -> None:
    """The whole step directory: orbax no longer lists it (nothing to warn about)."""
    shutil.rmtree(step_dir)


DAMAGE = [corrupt, truncate, truncate_meta, delete_state, delete_step]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # orbax
@pytest.mark.parametrize("damage", DAMAGE, ids=[d.__name__ for d in DAMAGE])
def test_damaged_latest_checkpoint_falls_back_to_the_previous(
    damage, stopped4, full, tmp_path, caplog
):
    run_dir = tmp_path / "run"
    shutil.copytree(stopped4, run_dir)
    damage(run_dir / "checkpoints" / "40")
    warns = damage is not delete_step

    # launcher.evaluate: the previous checkpoint, a warning, nothing moved (read only)
    before = tree_digest(run_dir)
    with caplog.at_level(logging.WARNING, logger="launcher.store.checkpoint"):
        out = evaluate_run(run_dir, make_env=make_fake_env)
    assert (out["chunk"], out["timestep"]) == (2, 20)
    assert np.all(np.isfinite(out["mean"]))
    said = [r for r in caplog.records if "checkpoint 40 is unreadable" in r.message]
    assert len(said) == warns  # once, naming the checkpoint
    assert all("falling back to the previous one" in r.message for r in said)
    assert tree_digest(run_dir) == before
    caplog.clear()

    # the relaunch: resumes after chunk 2 with a warning, sets the bad one aside
    with caplog.at_level(logging.WARNING, logger="launcher.store.checkpoint"):
        result = launch(run_dir)
    assert result.resumed_from == 2
    said = [r for r in caplog.records if "unreadable" in r.message]
    assert len(said) == warns  # one warning, naming the checkpoint and where it went
    if warns:
        assert said[0].message.startswith("checkpoint 40 is unreadable (")
        assert "moved to" in said[0].message and "falling back to the previous" in said[0].message
    aside = run_dir / "corrupt_checkpoints"
    moved = sorted(p.name.split("-")[0] for p in aside.iterdir()) if aside.exists() else []
    assert moved == (["40"] if warns else [])  # 40-<time>
    out = {"chunks_done": result.chunks_done, "fingerprint": fingerprint(result.state)}
    assert_equals_full(run_dir, out, full)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_evaluate_with_no_readable_checkpoint_exits_2_and_moves_nothing(stopped4, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(stopped4, run_dir)
    for step in ("20", "40"):
        corrupt(run_dir / "checkpoints" / step)
    before = tree_digest(run_dir)
    assert evaluate_main([str(run_dir)]) == 2
    err = one_error_line(capsys.readouterr().err)
    assert "no checkpoint in" in err and "can be restored" in err
    assert tree_digest(run_dir) == before


# ---------------------------------------------------------------------------- the lock
def start_driver(run_dir: Path, overrides: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(DRIVER), str(run_dir), json.dumps(overrides)],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def wait_for(proc: subprocess.Popen, ready, what: str) -> None:
    deadline = time.monotonic() + 240
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the first launch ended before {what}: {proc.communicate()[1][-3000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_second_launch_while_the_first_trains_is_refused(full, tmp_path, capsys, monkeypatch):
    run_dir = tmp_path / "run"
    go = tmp_path / "go"
    held = {"agent": {"hold_file": str(go)}}  # chunk 1's train call waits for `go`
    first = start_driver(run_dir, held)
    log_file = run_dir / "launcher.log"
    try:
        wait_for(
            first,
            lambda: log_file.exists() and "compiling train" in log_file.read_text(),
            "it compiled",
        )
        # through the CLI (another config: the lock comes first): exit 2, one line
        monkeypatch.chdir(tmp_path)
        assert cli_main([*CLI_FAKE, f"hydra.run.dir={run_dir}"]) == 2
        err = one_error_line(capsys.readouterr().err)
        assert f"run dir {run_dir} is in use by another launch" in err
        # in process, the same command
        with pytest.raises(ConfigError, match="is in use by another launch"):
            launch(run_dir, **held)
        assert first.poll() is None, "the first launch ended: the refusals proved nothing"
        assert ckpt_steps(run_dir) == []  # still in chunk 1
    finally:
        go.touch()
        out = finish(first)
    assert_equals_full(run_dir, out, full)


def test_second_launch_while_the_first_starts_does_not_remove_its_dir(full, tmp_path):
    """The first launch holds the lock on a still-empty run directory (its init traces
    for 3 s): a refused second launch must not take the directory for its own new one
    and remove it."""
    run_dir = tmp_path / "run"
    slow_start = {"agent": {"init_sleep_s": 3.0}}
    first = start_driver(run_dir, slow_start)
    try:
        wait_for(first, run_dir.exists, "its run directory")
        time.sleep(0.3)  # mkdir, then the lock: microseconds apart
        assert not any(run_dir.iterdir()), "too late: the first launch already wrote files"
        with pytest.raises(ConfigError, match="is in use by another launch"):
            launch(run_dir, **slow_start)
        assert run_dir.is_dir()
    finally:
        out = finish(first)
    assert_equals_full(run_dir, out, full)
