"""Helpers for the launcher tests that run the real agents: a subprocess launch sharing the
test session's persistent compile cache, and the metrics rows of a run dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax

from launcher.run import TIMING_KEYS
from launcher.rundir import read_metrics

ROOT = Path(__file__).parents[2]


def launcher(
    *args: str, cwd: Path, timeout: int = 1200, check: bool = True, **extra: str
) -> subprocess.CompletedProcess:
    """``python -m launcher *args`` in ``cwd`` with the session's compile cache and matmul
    precision; ``extra`` are environment variables. Asserts exit 0 when ``check``."""
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
        [sys.executable, "-m", "launcher", *args],
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
