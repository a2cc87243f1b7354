"""The run loop across processes, with the fake agent: a relaunch after a process exit
or a ``kill -9`` mid-chunk resumes bit-identically, and seeds sharded over 4 fake CPU
devices give the result of the unsharded run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
DRIVER = HERE / "launcher_driver.py"
TIMING = ("time/steps_per_second", "time/chunk_seconds")


def env(**extra: str) -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), out.get("PYTHONPATH", "")])
    out.setdefault("JAX_PLATFORMS", "cpu")
    out.update(extra)
    return out


def drive(run_dir: Path, overrides: dict | None = None, **extra: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(run_dir), json.dumps(overrides or {})],
        capture_output=True,
        text=True,
        env=env(**extra),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rows(run_dir: Path, seed: int) -> list[dict]:
    lines = (run_dir / "metrics" / f"seed_{seed}.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(ln).items() if k not in TIMING} for ln in lines]


def in_process(run_dir: Path, overrides: dict | None = None) -> dict:
    """The driver's launch in this process (one CPU device)."""
    from launcher_fakes import fake_config, make_fake_env

    from launcher.checkpoint import fingerprint
    from launcher.config import resolve
    from launcher.run import run

    spec = resolve(fake_config(**(overrides or {})))
    result = run(spec, run_dir, make_env=make_fake_env, plot=False)
    return {"n_devices": result.n_devices, "fingerprint": fingerprint(result.state)}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("uninterrupted") / "run"
    return run_dir, in_process(run_dir)


def test_restart_between_halves_is_bit_identical(uninterrupted, tmp_path):
    full_dir, full = uninterrupted
    first = drive(tmp_path / "run", {"stop_after_chunks": 3})
    assert first["stopped_early"] and first["chunks_done"] == 3
    second = drive(tmp_path / "run")
    assert second["resumed_from"] == 3 and second["chunks_done"] == 6
    assert second["fingerprint"] == full["fingerprint"]
    for seed in (0, 1):
        assert rows(tmp_path / "run", seed) == rows(full_dir, seed)


def test_kill_9_mid_chunk_then_relaunch_resumes_from_last_complete_checkpoint(
    uninterrupted, tmp_path
):
    full_dir, full = uninterrupted
    run_dir = tmp_path / "run"
    slow = {"agent": {"sleep_s": 0.6}, "protocol": {"checkpoint_frequency": 10}}
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), str(run_dir), json.dumps(slow)],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        ckpts = run_dir / "checkpoints"
        while time.monotonic() < deadline:
            done = [p for p in ckpts.glob("*") if p.name.isdigit()] if ckpts.exists() else []
            if any(int(p.name) >= 20 for p in done):  # named by env step (10 per chunk)
                break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("no checkpoint appeared in time")
        time.sleep(0.3)  # inside the next chunk's 0.6 s of work
        assert proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    saved = [int(p.name) for p in (run_dir / "checkpoints").glob("*") if p.name.isdigit()]
    killed_at = max(saved) // 10  # the chunk of the latest checkpoint
    assert 2 <= killed_at < 6
    resumed = drive(run_dir, slow)  # the same command
    assert resumed["resumed_from"] == killed_at and resumed["chunks_done"] == 6
    assert resumed["fingerprint"] == full["fingerprint"]
    for seed in (0, 1):
        assert rows(run_dir, seed) == rows(full_dir, seed)


def test_seeds_sharded_over_4_cpu_devices_match_unsharded(tmp_path):
    four = {"protocol": {"seeds": [0, 1, 2, 3]}}
    flags = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    sharded = drive(tmp_path / "sharded", four, **flags)
    unsharded = in_process(tmp_path / "single", four)
    assert sharded["n_devices"] == 4 and unsharded["n_devices"] == 1
    assert sharded["compiles"]["train"] == 1
    assert sharded["fingerprint"] == unsharded["fingerprint"]
    for seed in (0, 1, 2, 3):
        assert rows(tmp_path / "sharded", seed) == rows(tmp_path / "single", seed)
