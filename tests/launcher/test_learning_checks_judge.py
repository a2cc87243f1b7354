"""The DreamerV3 learning checks' judge and table (analysis.learning_check, printed by
benchmarks/learning_checks.py) on hand-written metric rows.

The judge decides issue 10's acceptance from a launcher run dir; these rows are small
enough to compute each statistic by hand (values chosen exact in binary floating point).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from analysis import learning_check as checks


def write_run(run_dir: Path, evals: dict[int, list[float]], train_return=None) -> Path:
    """``evals[seed]`` = eval returns at 2,000, 4,000, ... rows, one chunk each; a train row
    per chunk (``train_return(seed, chunk)``: its training-episode mean, None = no key)."""
    (run_dir / "metrics").mkdir(parents=True)
    for seed, values in evals.items():
        lines = []
        for i, value in enumerate(values):
            chunk = i + 1
            train = {"kind": "train", "chunk": chunk, "Train/n_updates": 1000 * chunk - 519}
            train |= {"Train/ent/action/mean": 1.25 - 0.125 * i, "time/chunk_seconds": 900.0}
            ret = train_return(seed, chunk) if train_return else None
            if ret is not None:
                train["Train/episodic mean reward"] = ret
            ev = {"kind": "eval", "chunk": chunk, "timestep": 2000 * chunk}
            ev["Eval/episodic mean reward"] = value
            lines += [json.dumps(train), json.dumps(ev)]
        (run_dir / "metrics" / f"seed_{seed}.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


def cartpole_curve(window_value: float) -> list[float]:
    """Evals at 2k..24k: 1,000 outside the window (2k..10k), ``window_value`` inside."""
    return [1000.0] * 5 + [window_value] * 7


def test_cartpole_has_no_verdict_before_the_window_ends(tmp_path):
    run = write_run(tmp_path, {0: cartpole_curve(500.0)[:10], 1: cartpole_curve(500.0)})
    out = checks.judge_dreamerv3("cartpole", str(run))
    assert out["evaluated_up_to"] == 20_000 and out["complete"] is False
    assert out["passed"] is None


@pytest.mark.parametrize(("seed_1", "passed"), [(250.0, True), (249.75, False)])
def test_cartpole_is_the_window_mean_over_seeds_against_250(tmp_path, seed_1, passed):
    # seed 1's window mean 250 or 249.75: the mean over seeds lands on the bar (>= passes)
    # or just under it; the 1,000s before 12k must not count.
    run = write_run(tmp_path, {0: cartpole_curve(250.0), 1: cartpole_curve(seed_1)})
    out = checks.judge_dreamerv3("cartpole", str(run))
    assert out["per_seed"]["seed_0"] == 250.0 and out["per_seed"]["seed_1"] == seed_1
    assert out["complete"] is True and out["passed"] is passed


def test_pendulum_takes_each_seeds_last_eval_at_20k(tmp_path):
    # an eval after 20k (22k) is outside the check: a collapse there does not fail it
    good = [-1200.0] * 9 + [-399.5, -2000.0]
    run = write_run(tmp_path, {0: good, 1: [*good[:9], -150.0, -2000.0]})
    out = checks.judge_dreamerv3("pendulum", str(run))
    assert out["per_seed"]["seed_0"] == -399.5 and out["per_seed"]["seed_1"] == -150.0
    assert out["passed"] is True


def test_pendulum_fails_when_one_seed_misses_the_bar(tmp_path):
    run = write_run(tmp_path, {0: [-1200.0] * 9 + [-400.0], 1: [-1200.0] * 9 + [-100.0]})
    assert checks.judge_dreamerv3("pendulum", str(run))["passed"] is False  # > -400, strict


def test_table_has_a_column_per_eval_and_blanks_where_no_episode_ended(tmp_path):
    def train_return(seed, chunk):
        return None if chunk == 2 else (math.nan if seed == 1 and chunk == 3 else 10.0 * chunk)

    run = write_run(tmp_path, {0: [20.5, 40.25, 60.0], 1: [1.0, 2.0, 3.0]}, train_return)
    lines = checks.dreamerv3_table(str(run)).splitlines()
    assert lines[0] == "| rows | 2,000 | 4,000 | 6,000 |"
    assert lines[1] == "|---|---|---|---|"
    assert lines[2] == "| updates per seed | 481 | 1,481 | 2,481 |"
    assert lines[3] == "| seed 0: eval | 20.5 | 40.2 | 60.0 |"  # 40.25 rounds half to even
    assert lines[4] == "| seed 1: eval | 1.0 | 2.0 | 3.0 |"
    assert lines[5] == "| seed 0: training episodes | 10.0 |  | 30.0 |"
    assert lines[6] == "| seed 1: training episodes | 10.0 |  |  |"
    assert lines[7] == "| seed 0: actor entropy | 1.250 | 1.125 | 1.000 |"
    assert lines[-1] == "| chunk wall (s) | 900 | 900 | 900 |"


def test_table_names_the_problem_for_a_dir_without_metrics(tmp_path):
    with pytest.raises(SystemExit, match="no metrics/seed_"):
        checks.dreamerv3_table(str(tmp_path))
