"""``python -m analysis ... --compare paper`` (analysis.compare) on synthetic run
directories: an on-protocol TD-MPC2 run judged against the committed paper curves, an
off-protocol one reported with the differing keys, a DreamerV3 2-task sweep directory
(grid figure, table rows, verdict), and bad input. The real-run case is in the CLI smokes
of test_launcher_tdmpc2.py and test_launcher_dreamerv3.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from analysis import paper_curves
from analysis.cli import main
from analysis.compare import compare, registered_identity

TDMPC2 = {"name": "tdmpc2", "entry": "agents.tdmpc2.entry:ENTRY"}  # a composed agent section
PROVENANCE = {
    "git_sha": "a" * 40,
    "git_dirty": False,
    "jax": "0.0.1",
    "backend": "cpu",
    "devices": ["cpu"],
}


def fake_run(
    path: Path, agent: str, env_id: str, value: float, *, identity=None, steps=None
) -> Path:
    """A run dir whose every seed scores ``value`` at every logged point of the paper
    protocol (TD-MPC2: evaluations every 50K agent steps; DreamerV3: training rows every
    5K); ``identity`` defaults to the registered one."""
    section = {"name": agent, "entry": f"agents.{agent}.entry:ENTRY"}
    ref = paper_curves.curve(section, env_id)
    ident = identity or registered_identity(agent, env_id, ref.budget_env_frames)
    p = ident["protocol"]
    kind, key, every = (
        ("eval", "Eval/episodic mean reward", p["eval_frequency"])
        if ref.metric == "eval"
        else ("train", "Train/episodic mean reward", p["log_frequency"])
    )
    (path / "metrics").mkdir(parents=True)
    run = {
        "identity": ident,
        "config": {"agent": section},
        "config_hash": "0123456789",
        "provenance": PROVENANCE,
    }
    (path / "run.json").write_text(json.dumps(run))
    last = steps if steps is not None else p["n_timesteps"]
    for seed in p["seeds"]:
        rows = [{"kind": kind, "timestep": t, key: value} for t in range(0, last + 1, every)]
        (path / "metrics" / f"seed_{seed}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows)
        )
    return path


def test_on_protocol_tdmpc2_run_is_judged_against_the_paper(tmp_path, capsys):
    run_dir = fake_run(tmp_path / "run", "tdmpc2", "walker_walk", 960.0)
    assert main([str(run_dir), "--compare", "paper"]) == 0
    out = capsys.readouterr().out
    assert "| walker_walk | tdmpc2 | pass |" in out and "verdict: PASS: 1/1" in out
    plots = run_dir / "plots"
    assert (plots / "paper_walker_walk.png").stat().st_size > 10_000
    (row,) = list(csv.DictReader((plots / "paper_table.csv").open()))
    ref = paper_curves.curve(TDMPC2, "walker_walk").window_means(3_600_000, 4_000_000)
    assert row["reference"] == f"{sum(ref.values()) / 3:.1f}"
    assert row["bar"] == f"{min(ref.values()) - 50:.1f}" and row["ours"] == "960.0"
    assert row["git_sha"] == "a" * 12 and row["config_hash"] == "0123456789"
    assert (row["git_dirty"], row["jax"], row["backend"]) == ("false", "0.0.1", "cpu")
    assert row["window_env_frames"] == "3,600,000..4,000,000"


def test_below_the_bar_fails(tmp_path):
    run_dir = fake_run(tmp_path / "run", "tdmpc2", "walker_walk", 100.0)
    result = compare([run_dir])
    assert result["rows"][0]["status"] == "fail" and not result["summary"].passed


def test_off_protocol_run_is_reported_with_its_differences(tmp_path):
    ident = registered_identity("tdmpc2", "cartpole_swingup", 4_000_000)
    ident["protocol"]["n_timesteps"] = 100_000
    ident["agent"]["lr"] = 1e-3
    run_dir = fake_run(
        tmp_path / "run", "tdmpc2", "cartpole_swingup", 800.0, identity=ident, steps=100_000
    )
    (row,) = compare([run_dir])["rows"]
    assert row["status"] == "off-protocol"
    assert "protocol.n_timesteps: 100000 (registered: 2000000)" in row["reasons"]
    assert "agent.lr" in row["reasons"]
    # scored on its own last tenth (180K..200K env frames: the 200K evaluation)
    assert row["window_env_frames"] == "180,000..200,000" and row["ours"] == "800.0"


def test_dreamerv3_sweep_directory_grid_and_table(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    fake_run(sweep / "a", "dreamerv3", "walker_walk", 900.0)
    fake_run(sweep / "b", "dreamerv3", "cheetah_run", 10.0)
    (sweep / ".sweeps").mkdir()  # the sweep's status folder is not a run
    assert main([str(sweep), "--compare", "paper"]) == 0
    out = capsys.readouterr().out
    assert "| cheetah_run | dreamerv3 | fail |" in out
    assert "| walker_walk | dreamerv3 | pass |" in out
    assert "verdict: FAIL: 1/2 judged tasks pass" in out
    assert (sweep / "plots" / "paper_grid.png").stat().st_size > 10_000
    table = (sweep / "plots" / "paper_table.md").read_text()
    assert table.count("| dreamerv3 |") == 2
    # the training-episode windows: 450K..500K env frames (225K..250K agent steps)
    assert "450,000..500,000" in table
    # eight columns fit a terminal; seeds and provenance are in the CSV
    header = table.splitlines()[0]
    assert header.count("|") == 9 and "git_sha" not in header
    csv_header = (sweep / "plots" / "paper_table.csv").read_text().splitlines()[0]
    assert csv_header.count(",") == 16 and "git_sha" in csv_header


def test_env_without_a_reference_is_not_judged(tmp_path):
    ref = registered_identity("tdmpc2", "walker_walk", 4_000_000)
    ref["env"]["id"] = "point_mass_easy"  # in the TD-MPC2 sweep; no published curve
    run_dir = tmp_path / "run"
    (run_dir / "metrics").mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"identity": ref, "config": {"agent": TDMPC2}}))
    row = {"kind": "eval", "timestep": 0, "Eval/episodic mean reward": 5.0}
    (run_dir / "metrics" / "seed_1.jsonl").write_text(json.dumps(row) + "\n")
    result = compare([run_dir])
    assert result["rows"][0]["status"] == "no-reference" and result["summary"].judged == 0


@pytest.mark.parametrize("case", ["missing", "empty", "two-without-out"])
def test_bad_input_is_one_error_and_exit_2(tmp_path, capsys, case):
    a = tmp_path / "a"
    args = {
        "missing": [str(tmp_path / "nope")],
        "empty": [str(a)],
        "two-without-out": [str(a / "r1"), str(a / "r2")],
    }[case]
    a.mkdir()
    if case == "two-without-out":
        for name in ("r1", "r2"):
            fake_run(a / name, "tdmpc2", "walker_walk", 1.0)
    assert main([*args, "--compare", "paper"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def test_wandb_gets_the_reference_line(tmp_path):
    from analysis.paper_line import wandb_reference_rows
    from launcher.config.schema import LoggerSpec
    from launcher.logger.wandb_logger import WandbRuns

    rows = wandb_reference_rows(TDMPC2, "walker_walk", 2)
    x, mean, lo, hi = paper_curves.curve(TDMPC2, "walker_walk").mean_band()
    assert len(rows) == len(x) == 41
    key = "Paper/eval episodic mean reward"
    assert rows[1]["timestep"] == 50_000.0 and rows[1]["env_frames"] == 100_000.0
    assert [r[f"{key} (mean)"] for r in rows] == pytest.approx(mean.tolist())
    assert [r[f"{key} (min)"] for r in rows] == lo.tolist()
    assert wandb_reference_rows(TDMPC2, "pendulum", 1) == []  # no published curve

    class FakeRun:
        def __init__(self):
            self.logged = []

        def log(self, row, **_):  # step, commit: W&B's arguments
            self.logged.append(row)

    wb = WandbRuns(LoggerSpec(mode="disabled"), "name", [0, 1], {}, {}, tmp_path)
    wb.runs = [FakeRun(), FakeRun()]  # one per seed, as a started logger holds
    wb.log_reference(rows)
    assert all(run.logged == rows for run in wb.runs)


def test_a_short_run_logs_the_paper_only_up_to_its_end(tmp_path, monkeypatch):
    """A 40-step fake run (repeat 2: 80 env frames) on an env given a paper curve gets the
    curve's rows up to its span and one past it, not the 1M-frame curve."""
    import numpy as np
    from launcher_fakes import launch

    import analysis.paper_line
    from analysis.paper_line import wandb_reference_rows

    # the published walker curve for a 40-step smoke: 2 rows (0 and 100K), not 41 to 4M
    rows = wandb_reference_rows(TDMPC2, "walker_walk", 2, upto_frames=80)
    assert [r["env_frames"] for r in rows] == [0, 100_000]
    x = np.array([0, 50, 100, 150, 1_000_000])
    curve = paper_curves.PaperCurve("fake", "probe", "task", "eval", 1_000_000, {0: (x, x / 1e3)})
    monkeypatch.setattr(paper_curves, "curve", lambda agent, env_id, obs="vector": curve)
    logged = []

    def spy(*args, **kwargs):
        logged.append(wandb_reference_rows(*args, **kwargs))
        return logged[-1]

    monkeypatch.setattr(analysis.paper_line, "wandb_reference_rows", spy)
    launch(
        tmp_path / "run",
        env={"action_repeat": 2},
        protocol={"n_timesteps": 40, "checkpoint_frequency": 20, "seeds": [0]},
    )
    assert logged and all([r["env_frames"] for r in rows] == [0, 50, 100] for rows in logged)
    assert [r["timestep"] for r in logged[0]] == [0, 25, 50]


def test_markdown_lists_the_first_three_differences():
    from analysis.compare import _short

    assert _short("a; b; c; d; e") == "a; b; c; +2 more (paper_table.csv)"
    assert _short("a; b") == "a; b" and _short("") == ""


def test_short_run_figure_shows_the_reference_up_to_its_length():
    from analysis.compare import reference_line

    ref = paper_curves.curve(TDMPC2, "reacher_easy")
    assert reference_line(ref, 12_000).x == [0, 100_000]  # up to the first point past it
    assert reference_line(ref, 100_000).x == [0, 100_000]
    assert len(reference_line(ref).x) == len(reference_line(ref, 5e6).x) == 41


def test_paper_sweeps_cover_every_task_with_a_curve_at_its_budget():
    """The TD-MPC2 sweeps (2M agent steps, and humanoid at 7M) and the DreamerV3 sweep
    hold every env id with a published curve, each on the registered protocol (no
    identity difference), so a full sweep is judged, not reported off-protocol."""
    from agents.dreamerv3.entry import ENTRY as DREAMERV3
    from agents.tdmpc2.entry import ENTRY as TDMPC2_ENTRY
    from launcher.config.identity import identity
    from launcher.config.precheck import check_overrides

    for entry, sweeps in (
        (TDMPC2_ENTRY, ("tdmpc2_paper_dmc", "tdmpc2_paper_dmc_humanoid")),
        (DREAMERV3, ("dreamerv3_paper_dmc",)),
    ):
        table = paper_curves.load(entry)
        specs = [
            s
            for sweep in sweeps
            for s in check_overrides([f"+sweep={sweep}", "+allow_long_cpu_run=true"], True)
        ]
        judged = {s.env.id: s for s in specs if table.curve(s.env.id) is not None}
        assert sorted(judged) == table.tasks(), entry.name
        for env_id, spec in judged.items():
            budget = table.curve(env_id).budget_env_frames
            assert identity(spec) == registered_identity(entry.name, env_id, budget), env_id
