"""benchmarks/accelerator_check.py --tiny end to end: every section runs, each timing is
positive and finite, the JSON and the Markdown table are written, TD-MPC2's phase breakdown
adds up; and the CPU MuJoCo step of walker that the breakdown sets beside MJX.

A subprocess, not the benchmark-script loader (launcher_fakes.benchmark_script): the script
re-executes its process for glibc's huge-page tunable (launcher.loop.malloc) and sets XLA_FLAGS
before its backend starts, neither of which may happen inside the test process.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "benchmarks" / "accelerator_check.py"
SECTIONS = {
    "dv3_step",
    "tdmpc2_step",
    "dv3_chunk",
    "tdmpc2_chunk",
    "tdmpc2_phases",
    "dv3_seeds",
    "dv3_image_step",
}
PHASES = ("physics", "collector", "replay", "update", "plan")


def _run_on_cpu(args: list[str], timeout: int) -> subprocess.CompletedProcess:
    """``python *args`` from the repo root on the CPU backend; must exit 0."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[dict, str, str]:
    """One ``--tiny`` run on CPU: (the JSON report, the Markdown table, stdout)."""
    out = tmp_path_factory.mktemp("accelerator_check")
    # A guard against a hang, not a speed bar: the run compiles ~10 programs (about 2 min on an
    # idle 2-core box, over 5 min on a loaded one).
    proc = _run_on_cpu([str(SCRIPT), "--tiny", "--out-dir", str(out)], timeout=1200)
    report = json.loads((out / "accelerator_check.json").read_text())
    return report, (out / "accelerator_check.md").read_text(), proc.stdout


@pytest.mark.slow
def test_every_section_has_positive_finite_timings(tiny):
    report, _, _ = tiny
    assert report["tiny"] and report["backend"] == "cpu"
    assert set(report["sections"]) == SECTIONS
    for name, section in report["sections"].items():
        assert "error" not in section and "skipped" not in section, (name, section)
        timings = section["timings"]
        assert timings, name
        for key, seconds in timings.items():
            assert math.isfinite(seconds) and seconds > 0, (name, key, seconds)
    # the DreamerV3 step at both compute dtypes (auto resolves to float32 on CPU)
    step = report["sections"]["dv3_step"]
    assert step["config"]["compute_dtype"] == "float32"
    assert step["timings"]["train_step_bfloat16_s"] > 0
    assert step["train_bfloat16"]["dot_flops"] == step["train"]["dot_flops"]  # same model
    seeds = report["sections"]["dv3_seeds"]["seeds"]
    assert set(seeds) == {"1", "2"}
    for s in seeds.values():
        assert s["need_bytes"] > 0 and s["per_seed_wall_s"] > 0
    for chunk in ("dv3_chunk", "tdmpc2_chunk"):
        c = report["sections"][chunk]
        assert c["env_frames"] > 0 and c["updates"] > 0, chunk
        assert math.isfinite(c["env_frames_per_s"]) and c["env_frames_per_s"] > 0


@pytest.mark.slow
def test_markdown_table_and_published_figures(tiny):
    report, table, stdout = tiny
    assert "| section | quantity | value | unit | published figure |" in table
    n_rows = sum(len(s["rows"]) for s in report["sections"].values())
    assert sum(line.startswith("| ") for line in table.splitlines()) == 1 + n_rows
    for name in SECTIONS:
        assert f"| {name} |" in table
    # tiny configs are no preset with a published figure
    assert "Published figures compared against:" in stdout
    assert "no published figure" in stdout


@pytest.mark.slow
def test_tdmpc2_phase_breakdown_adds_up(tiny):
    """Every phase timed and named, on the chunk section's own window: the counts agree
    with the agent's counters, the sum and the remainder are the phases' arithmetic."""
    report, _, stdout = tiny
    s, chunk = report["sections"]["tdmpc2_phases"], report["sections"]["tdmpc2_chunk"]
    assert tuple(s["phases"]) == PHASES
    c = s["counts"]
    # tiny: T = 10, burst tick 11, the timed window is ticks 12-13: one env steps, plans and
    # updates once on each
    assert c == {"ticks": 2, "stepping_ticks": 2, "agent_steps": 2, "policy_ticks": 2, "updates": 2}
    assert (c["agent_steps"], c["updates"]) == (chunk["agent_steps"], chunk["updates"])
    per = s["per_agent_step"]
    for name in PHASES:
        assert per[name] > 0 and s["phases"][name]["calls"] > 0, name
    # derived figures are sums of a few doubles: equal to within rounding (rel 1e-12)
    assert per["sum_s"] == pytest.approx(sum(per[k] for k in PHASES[1:]), rel=1e-12)
    assert per["chunk_s"] == pytest.approx(chunk["s_per_agent_step"], rel=1e-12)
    assert per["remainder_s"] == pytest.approx(per["chunk_s"] - per["sum_s"], rel=1e-9)
    cpu = s["cpu_per_agent_step"]  # the same figures in process CPU time
    assert cpu["sum_s"] == pytest.approx(sum(cpu[k] for k in PHASES[1:]), rel=1e-12)
    assert cpu["chunk_s"] == pytest.approx(
        chunk["chunk"]["cpu_median_s"] / c["agent_steps"], rel=1e-12
    )
    labels = ("physics", "collector overhead", "replay", "update", "plan", "sum", "whole chunk")
    quantities = [r["quantity"] for r in s["rows"]]
    for label in (*labels, "remainder (chunk - sum)"):
        assert any(f": {label}" in q for q in quantities), label
    assert "remainder (chunk - sum)" in stdout  # the printed table has the breakdown
    assert "mujoco_cpu" not in s  # pendulum (gymnax) has no MuJoCo model


def test_cpu_mujoco_step_of_walker():
    """walker: 10 MuJoCo substeps per control step (ctrl_dt 0.025 / sim_dt 0.0025) times
    the action repeat, on Playground's model and on dm_control's (the reference's)."""
    from launcher_fakes import benchmark_script

    mj = benchmark_script("_tdmpc2_phases").mujoco_cpu_step("walker_walk", 2, steps=3, reps=1)
    assert (mj["substeps"], mj["mj_steps_per_agent_step"]) == (10, 20)
    assert mj["playground_mj_step_s"] > 0
    if "dm_control" not in mj:  # dm_control importable: the reference env timed too
        assert mj["dm_control_substeps"] == 10 and mj["dm_control_env_step_s"] > 0


FAILING_RUN = """
import sys, time
sys.path.insert(0, "benchmarks")
import accelerator_check as a
from _accelerator_plan import row

def boom(plan, found):
    raise RuntimeError("injected failure")

def slow(plan, found):
    time.sleep(0.5)
    return {"timings": {"x_s": 0.5}, "rows": [row("x", 0.5, "s")]}

a.RUNNERS.update(dv3_step=boom, tdmpc2_step=slow)
sys.argv = ["accelerator_check.py", "--tiny", "--budget-s", "0.3", "--out-dir", sys.argv[1],
            "--sections", "dv3_step", "tdmpc2_step", "dv3_chunk"]
a.main()
"""


def test_a_failing_section_is_recorded_and_the_rest_goes_on(tmp_path):
    """dv3_step raises (recorded, the run goes on), tdmpc2_step runs, dv3_chunk starts after
    --budget-s and is skipped; exit status 0, the table says so."""
    _run_on_cpu(["-c", FAILING_RUN, str(tmp_path)], timeout=120)
    sections = json.loads((tmp_path / "accelerator_check.json").read_text())["sections"]
    assert sections["dv3_step"]["error"] == "RuntimeError: injected failure"
    assert "injected failure" in sections["dv3_step"]["traceback"]
    assert sections["tdmpc2_step"]["timings"] == {"x_s": 0.5}
    assert sections["dv3_chunk"]["skipped"].startswith("not started")
    table = (tmp_path / "accelerator_check.md").read_text()
    assert "| dv3_step | error | — | RuntimeError: injected failure | |" in table
    assert "| dv3_chunk | skipped |" in table
