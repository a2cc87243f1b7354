"""The run loop across processes, with the fake agent: seeds sharded over 4 fake CPU
devices give the result of the unsharded run; and the subprocess helpers the
reliability tests use (relaunches after a ``kill -9`` at 9 points of a run are in
test_launcher_reliability.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


def test_seeds_sharded_over_4_cpu_devices_match_unsharded(tmp_path):
    four = {"protocol": {"seeds": [0, 1, 2, 3]}}
    # the session's compile flags (tests/conftest.py) as well: bits are compared
    flags = {"XLA_FLAGS": os.environ["XLA_FLAGS"] + " --xla_force_host_platform_device_count=4"}
    sharded = drive(tmp_path / "sharded", four, **flags)
    unsharded = in_process(tmp_path / "single", four)
    assert sharded["n_devices"] == 4 and unsharded["n_devices"] == 1
    assert sharded["compiles"]["train"] == 1
    assert sharded["fingerprint"] == unsharded["fingerprint"]
    for seed in (0, 1, 2, 3):
        assert rows(tmp_path / "sharded", seed) == rows(tmp_path / "single", seed)
