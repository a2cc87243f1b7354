"""Helpers for the launcher tests that run the real agents: a subprocess launch sharing the
test session's persistent compile cache, and the metrics rows of a run dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax

from launcher.loop.run import TIMING_KEYS
from launcher.store.rundir import read_metrics

ROOT = Path(__file__).parents[2]


def launcher(
    *args: str,
    cwd: Path,
    timeout: int = 1200,
    check: bool = True,
    module: str = "launcher",
    **extra: str,
) -> subprocess.CompletedProcess:
    """``python -m launcher *args`` (or ``-m module``: ``launcher.evaluate``) in ``cwd`` with
    the session's compile cache and matmul precision; ``extra`` are environment variables.
    Asserts exit 0 when ``check``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "JAX_COMPILATION_CACHE_DIR": str(jax.config.jax_compilation_cache_dir or ""),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.5",
        "JAX_DEFAULT_MATMUL_PRECISION": str(jax.config.jax_default_matmul_precision or ""),
        "WANDB_SILENT": "true",
        "MUJOCO_GL": "disable",
        **extra,
    }
    env = {k: v for k, v in env.items() if v != ""}
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )
    assert not check or proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


def rows(run_dir: Path, seed: int = 0) -> list[dict]:
    out = read_metrics(run_dir / "metrics" / f"seed_{seed}.jsonl")
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in out]


def checkpoint_meta(run_dir: Path) -> dict:
    latest = max(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    return json.loads((run_dir / "checkpoints" / str(latest) / "meta" / "metadata").read_text())


def assert_judged_off_protocol(run_dir: Path, agent: str, env_id: str, *, reference: bool) -> None:
    """``python -m analysis RUN_DIR --compare paper`` on a real (smoke) run: exit 0,
    one row reported off-protocol (its protocol differs from the paper's) with the run's
    provenance, and the figure and tables written; every launch recorded its provenance.
    ``reference``: the paper curve reaches back to the run's last x (interpolated)."""
    from analysis.cli import main

    assert main([str(run_dir), "--compare", "paper"]) == 0
    table = json.loads((run_dir / "plots" / "paper_verdict.json").read_text())
    (row,) = table["rows"]
    assert (row["task"], row["agent"], row["status"]) == (env_id, agent, "off-protocol")
    assert "protocol.name: 'smoke' (registered: 'paper')" in row["reasons"]
    assert row["backend"] == "cpu" and (row["reference"] != "") == reference
    assert table["summary"].startswith("verdict: nothing judged")
    assert (run_dir / "plots" / f"paper_{env_id}.png").exists()
    launches = read_metrics(run_dir / "launches.jsonl")
    assert launches and {"git_sha", "git_dirty", "jax", "backend"} <= set(launches[0])


def assert_episode_video(path: Path, n_frames: int) -> None:
    """``path`` is an MP4 of ``n_frames`` frames (read back with imageio-ffmpeg, the writer
    of ``launcher.evaluate --video``), none of them one flat colour, not all the same."""
    import imageio_ffmpeg
    import numpy as np

    assert path.is_file(), path
    reader = imageio_ffmpeg.read_frames(str(path))
    with warnings.catch_warnings():  # its child execs ffmpeg at once: no JAX to deadlock
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        width, height = next(reader)["size"]  # starts ffmpeg
    frames = np.stack([np.frombuffer(f, np.uint8).reshape(height, width, 3) for f in reader])
    assert frames.shape[0] == n_frames
    assert all(np.ptp(f) > 0 for f in frames)  # something drawn in every frame
    # and it moves (by more than the codec's noise: an edge crossing some pixel)
    assert np.abs(frames.astype(np.int16) - frames[0]).max() > 32
