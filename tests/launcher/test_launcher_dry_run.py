"""``+dry_run=true``: the plan and estimated accelerator hours of a launch or sweep, from
validated RunSpecs; the CLI prints it, exits 0 and creates nothing. Composition only:
nothing is built, trained or compiled."""

from __future__ import annotations

import importlib.resources

import pytest
import yaml
from real_agents import launcher

from agents.dreamerv3.entry import ENTRY as DREAMER
from agents.tdmpc2.entry import ENTRY as TDMPC2
from agents.tdmpc2.entry import MULTITASK
from launcher.cli import check_overrides, compose_spec
from launcher.config import guards
from launcher.tools import dry_run

SWEEP = importlib.resources.files("sweeps") / "sweep" / "tdmpc2_paper_dmc.yaml"
# 2M agent steps x 3 seeds x 0.0145 s (TD-MPC2 5M, measured on one H200)
PAPER_JOB_HOURS = 2_000_000 * 3 * 0.0145 / 3600


def test_only_measured_figures_are_declared():
    (td,) = TDMPC2.tables.accelerator_seconds_per_step.values()
    (dv3,) = DREAMER.tables.accelerator_seconds_per_step.values()
    assert list(TDMPC2.tables.accelerator_seconds_per_step) == [5]  # not 19 (not timed)
    assert list(DREAMER.tables.accelerator_seconds_per_step) == ["12m"]  # not 1m
    for cost in (td, dv3):
        assert cost.measured_here and "H200" in cost.device
        assert "results/accelerator_gpu_20261204" in cost.source
    assert MULTITASK.tables.accelerator_seconds_per_step == {}


def test_a_tdmpc2_paper_job_is_24_accelerator_hours():
    spec = compose_spec(["+dry_run=true"])  # the paper protocol on walker_walk, 5M
    job = dry_run.estimate(spec, index=3, cores=1)
    assert (job.index, job.env, job.agent, job.model_size) == (
        3,
        "walker_walk",
        "tdmpc2",
        "tdmpc2_5",
    )
    assert (job.seeds, job.agent_steps, job.env_frames) == (3, 2_000_000, 4_000_000)
    assert job.accelerator_hours == pytest.approx(PAPER_JOB_HOURS)
    text = dry_run.format_plan([job], cores=1)
    assert f"total: 1 job, 3 seed-runs, {PAPER_JOB_HOURS:.1f} accelerator hours" in text
    assert "measured with this project" in text and "H200" in text
    assert "upper bound" in text


def test_a_dreamerv3_paper_job_is_its_rows_times_seeds_times_the_measured_step():
    job = dry_run.estimate(compose_spec(["agent=dreamerv3", "env=walker_walk"]), cores=1)
    assert (job.model_size, job.seeds, job.agent_steps) == ("dreamerv3_12m", 5, 250_000)
    assert job.accelerator_hours == pytest.approx(250_000 * 5 * 0.0122 / 3600)


def test_a_job_without_a_figure_is_unknown_with_the_cpu_estimate_for_comparison():
    spec = compose_spec(["agent=dreamerv3", "env=walker_walk", "model_size=dreamerv3_1m"])
    job = dry_run.estimate(spec, cores=1)
    assert job.cost is None and job.accelerator_hours is None
    unknown = "unknown (no accelerator figure for agent=dreamerv3 model_size=dreamerv3_1m)"
    assert job.unknown == unknown
    cpu_hours = guards.estimate_cpu_seconds(spec, cores=1)[0] / 3600
    assert cpu_hours > 0 and job.cpu_exact
    # the CPU figure is the agent's model of this config, not a constant per preset
    assert "modelled from the config (agents/dreamerv3/cost.py" in dry_run._figure(job, 1)
    total = dry_run.total_line([job], cores=1)
    assert total == (
        f"total: 1 job, 5 seed-runs, accelerator hours {unknown}; CPU for comparison: "
        f"{cpu_hours:,.1f} CPU hours on this machine's 1 core (not an accelerator)"
    )


def test_a_mixed_plan_totals_the_known_jobs_and_names_the_unknown_ones():
    known = dry_run.estimate(compose_spec([]), 0, cores=1)
    big = dry_run.estimate(compose_spec(["model_size=tdmpc2_19"]), 1, cores=1)
    # 19M: no accelerator figure; its CPU figure is modelled from its FLOPs (an estimate,
    # no longer the largest measured preset's figure as a lower bound)
    assert big.cost is None and big.cpu_exact
    total = dry_run.total_line([known, big], cores=1)
    assert total.startswith(
        f"total: 2 jobs, 6 seed-runs, {PAPER_JOB_HOURS:.1f} accelerator hours for the 1 job "
        "with a figure; "
        "the other 1: accelerator hours unknown (no accelerator figure for agent=tdmpc2 "
        "model_size=tdmpc2_19); CPU for comparison: "
    )


def test_the_cpu_column_of_a_dreamerv3_quick_run_is_minutes_not_hours():
    """issue 30: the dry run put `agent=dreamerv3 env=acrobot protocol=quick` at 1.6 h (it
    took 11.5 min on a loaded box); the CPU figure now follows the quick config (train
    ratio 64: 1/8 update per row, windows of 32, 8 envs). Against a measured launch:
    2,000 of its rows took 117 s of CPU (benchmarks/cpu_estimate_check.py,
    docs/PERFORMANCE.md "CPU budget estimate")."""
    short = ["protocol.n_timesteps=2000", "protocol.checkpoint_frequency=1000"]
    spec = compose_spec(["agent=dreamerv3", "env=acrobot", "protocol=quick", *short])
    job = dry_run.estimate(spec, cores=1)
    assert 117 / 2 <= job.cpu_seconds <= 117 * 2
    quick = dry_run.estimate(compose_spec(["agent=dreamerv3", "env=acrobot", "protocol=quick"]))
    assert quick.cpu_seconds < 11.5 * 60  # not 1.6 h


def test_the_cpu_budget_never_refuses_a_dry_run_and_it_is_no_part_of_the_identity():
    spec = compose_spec(["+dry_run=true"])
    guards.check_cpu_budget(spec, backend="cpu")  # 2M steps x 3 seeds: no refusal
    (checked,) = check_overrides(["+dry_run=true"])
    assert checked.control.dry_run and not checked.control.allow_long_cpu_run
    assert spec.run_name == compose_spec([]).run_name


def test_the_cli_prints_the_sweep_plan_and_creates_nothing(tmp_path):
    envs = yaml.safe_load(SWEEP.read_text())["hydra"]["sweeper"]["params"]["env"].split(",")
    proc = launcher(
        "-m",
        "+sweep=tdmpc2_paper_dmc",
        "+dry_run=true",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cwd=tmp_path,
        JAX_PLATFORMS="cpu",
    )
    lines = proc.stdout.splitlines()
    rows = [line.split() for line in lines if line.split()[:1] and line.split()[0].isdigit()]
    assert [(int(r[0]), r[1]) for r in rows] == list(enumerate(envs))
    assert all(r[2:4] == ["tdmpc2", "tdmpc2_5"] and r[-2] == f"{PAPER_JOB_HOURS:.1f}" for r in rows)
    hours = len(envs) * PAPER_JOB_HOURS
    assert (
        f"total: {len(envs)} jobs, {3 * len(envs)} seed-runs, {hours:,.1f} accelerator hours"
        in lines
    )
    assert list(tmp_path.iterdir()) == []  # no sweep dir, no runs/, nothing
