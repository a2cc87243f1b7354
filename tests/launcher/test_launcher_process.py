"""The run loop across processes, with the fake agent: seeds sharded over 4 (and 2) fake
CPU devices give the result of the unsharded run, also when a run stopped on one device
count is resumed on another; and the subprocess helpers the reliability tests use
(relaunches after a ``kill -9`` at 9 points of a run are in test_launcher_reliability.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from launcher_fakes import checkpoint_steps

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

    from launcher.config.validate import resolve
    from launcher.loop.run import run
    from launcher.store.checkpoint import fingerprint

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


def devices(n: int) -> dict[str, str]:
    """The environment of a subprocess that sees ``n`` CPU devices (and the session's
    compile flags, tests/conftest.py: bits are compared)."""
    return {"XLA_FLAGS": os.environ["XLA_FLAGS"] + f" --xla_force_host_platform_device_count={n}"}


@pytest.mark.parametrize("first,then", [(2, 1), (1, 2), (2, 2)])
def test_a_run_resumed_on_another_device_count_ends_as_the_uninterrupted_one(
    first, then, full, tmp_path
):
    """2 seeds: stopped after chunk 2 (its checkpoint at step 20) on ``first`` CPU devices,
    resumed in the same run directory on ``then``. A checkpoint holds whole seed-batched
    arrays, restored onto the resuming launch's sharding (launcher.store.checkpoint), and every
    device runs each of its seeds' unbatched program (launcher.loop.program), so the run ends
    bit-identical to the uninterrupted one-device run (``full``, tests/launcher/conftest.py):
    same final state, same metrics rows, same checkpoints."""
    full_dir, full_fp = full
    run_dir = tmp_path / "run"
    stopped = drive(run_dir, {"stop_after_chunks": 2}, **devices(first))
    assert stopped["n_devices"] == first and stopped["stopped_early"]
    assert stopped["chunks_done"] == 2 and checkpoint_steps(run_dir) == [20]
    resumed = drive(run_dir, {}, **devices(then))
    assert resumed["n_devices"] == then and resumed["resumed_from"] == 2
    assert resumed["chunks_done"] == 6
    assert resumed["fingerprint"] == full_fp
    for seed in (0, 1):
        assert rows(run_dir, seed) == rows(full_dir, seed), f"seed {seed}"
    assert checkpoint_steps(run_dir) == checkpoint_steps(full_dir) == [40, 60]


# Run with 2 CPU devices: the fake agent's seed program sharded or not, each in both seed
# layouts (launcher.loop.program.SeedProgram(shard=, batched=)); prints the final fingerprints.
LAYOUTS = """
import json
from launcher_fakes import fake_config, make_fake_env
import jax.numpy as jnp
from launcher.loop import build
from launcher.store.checkpoint import fingerprint
from launcher.config.validate import resolve
from launcher.loop.program import SeedProgram, seed_keys

spec = resolve(fake_config())
agent = build.make_agent(spec, build.make_env(spec, make_fake_env))
init_keys, eval_keys = seed_keys([0, 1])
out = {}
for shard in (False, True):
    for batched in (False, True):
        prog = SeedProgram(agent, 2, shard=shard, batched=batched)
        state = prog.init(prog.place(init_keys))
        state, _ = prog.train(state, jnp.arange(22))
        state, _ = prog.evaluate(state, prog.place(eval_keys))
        out[f"{shard} {batched}"] = [prog.n_devices, fingerprint(state)]
print(json.dumps(out))
"""


def test_sharded_seeds_in_both_layouts_match_the_unsharded_loop():
    """On 2 CPU devices the accelerators' multi-device program (``shard_map`` over the
    seeds, ``vmap`` inside) and the CPU's (``lax.map`` inside), and both unsharded: one
    final state, bit for bit (the fake agent's maths is elementwise, which neither
    sharding nor vmap reorders)."""
    proc = subprocess.run(
        [sys.executable, "-c", LAYOUTS],
        capture_output=True,
        text=True,
        env=env(**devices(2)),
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {k: n for k, (n, _) in out.items()} == {
        "False False": 1,
        "False True": 1,
        "True False": 2,
        "True True": 2,
    }
    assert len({fp for _, fp in out.values()}) == 1, out
