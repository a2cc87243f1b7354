"""The DreamerV3 learning checks' judge and table (analysis.learning_check, printed by
benchmarks/learning_checks.py) on hand-written metric rows.

The judge decides issue 10's acceptance from a launcher run dir; these rows are small
enough to compute each statistic by hand (values chosen exact in binary floating point).
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np
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


def test_table_leaves_the_eval_at_start_without_updates(tmp_path):
    # a run evaluated before training (timestep 0, chunk 0) has no train row for that column
    run = write_run(tmp_path, {0: [5.0, 6.0]})
    path = run / "metrics" / "seed_0.jsonl"
    start = {"kind": "eval", "chunk": 0, "timestep": 0, "Eval/episodic mean reward": 0.5}
    path.write_text(json.dumps(start) + "\n" + path.read_text())
    lines = checks.dreamerv3_table(str(run)).splitlines()
    assert lines[0] == "| rows | 0 | 2,000 | 4,000 |"
    assert lines[2] == "| updates per seed |  | 481 | 1,481 |"
    assert lines[3] == "| seed 0: eval | 0.5 | 5.0 | 6.0 |"


def test_table_names_the_problem_for_a_dir_without_metrics(tmp_path):
    with pytest.raises(SystemExit, match="no metrics/seed_"):
        checks.dreamerv3_table(str(tmp_path))


# Issue 46's checks: the window's returns pooled over evaluations and seeds against a bar
# above the random policy, strictly; craftax_classic also the pooled Crafter score.
def game_curve(name: str, window_value: float, before: float = 100.0) -> list[float]:
    """Evals at 2k, 4k, ... up to the check's window end: ``before`` outside the window,
    ``window_value`` inside (the window's bounds are multiples of 2,000 rows)."""
    lo, hi = checks.DREAMERV3_CHECKS[name]["window"]
    return [window_value if t >= lo else before for t in range(2000, hi + 1, 2000)]


def test_breakout_is_the_pooled_window_mean_strictly_above_its_bar(tmp_path, monkeypatch):
    # a bar exact in binary (0.75): seeds at 1.75 and -0.25 average to it exactly, which a
    # strict bar does not pass; 1.75 and 0.0 average to 0.875, which does
    monkeypatch.setitem(checks.DREAMERV3_CHECKS["breakout_minatar"], "threshold", 0.75)
    curve = functools.partial(game_curve, "breakout_minatar")
    at = write_run(tmp_path / "at", {0: curve(1.75), 1: curve(-0.25)})
    out = checks.judge_dreamerv3("breakout_minatar", str(at))
    assert out["statistic"] == 0.75 and out["complete"] is True and out["passed"] is False
    above = write_run(tmp_path / "above", {0: curve(1.75), 1: curve(0.0)})
    assert checks.judge_dreamerv3("breakout_minatar", str(above))["passed"] is True
    # the window's end not reached yet: no verdict
    short = write_run(tmp_path / "short", {0: curve(50.0)[:-1], 1: curve(50.0)})
    assert checks.judge_dreamerv3("breakout_minatar", str(short))["passed"] is None


def write_craftax_run(run_dir: Path, rates: dict[int, float], window_return: float) -> Path:
    """A craftax_classic run: every eval row in the window has return ``window_return`` and
    its seed's rate ``rates[seed]`` (percent) on all 22 achievements; before the window,
    return 100 and rates 100 (which must not count)."""
    write_run(run_dir, {s: game_curve("craftax_classic", window_return) for s in rates})
    lo, _ = checks.DREAMERV3_CHECKS["craftax_classic"]["window"]
    for seed, rate in rates.items():
        path = run_dir / "metrics" / f"seed_{seed}.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows:
            if row["kind"] == "eval":
                value = rate if row["timestep"] >= lo else 100.0
                row |= {f"{checks.RATE_PREFIX}a{k:02d}": value for k in range(22)}
                row[checks.SCORE_KEY] = -1.0  # the judge pools the rates, not the logged score
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return run_dir


def test_crafter_score_is_the_numpy_twin():
    # equal rates s give score s; rates 0 and 99 give exp(ln(100) / 2) - 1 = 9 (float64)
    assert checks.crafter_score([[7.0] * 22])[0] == pytest.approx(7.0, rel=1e-12)
    assert checks.crafter_score([0.0, 99.0]) == pytest.approx(9.0, rel=1e-12)


def test_craftax_needs_both_the_return_and_the_pooled_score(tmp_path, monkeypatch):
    spec = checks.DREAMERV3_CHECKS["craftax_classic"]
    monkeypatch.setitem(spec, "threshold", 0.75)
    monkeypatch.setitem(spec, "score_threshold", 1.5)
    # seeds at rates 0 and 5 pool to 2.5 on every achievement: a score of 2.5 (> 1.5); the
    # seeds' own scores are 0 and 5. Rates 0 and 2 pool to 1 (< 1.5).
    good = write_craftax_run(tmp_path / "good", {0: 0.0, 1: 5.0}, 1.0)
    out = checks.judge_dreamerv3("craftax_classic", str(good))
    assert out["score"] == pytest.approx(2.5, rel=1e-12) and out["statistic"] == 1.0
    assert out["per_seed"]["seed_0_score"] == 0.0 and out["passed"] is True
    assert out["per_seed"]["seed_1_score"] == pytest.approx(5.0, rel=1e-12)
    low_score = write_craftax_run(tmp_path / "low_score", {0: 0.0, 1: 2.0}, 1.0)
    assert checks.judge_dreamerv3("craftax_classic", str(low_score))["passed"] is False
    low_ret = write_craftax_run(tmp_path / "low_ret", {0: 0.0, 1: 5.0}, 0.75)
    assert checks.judge_dreamerv3("craftax_classic", str(low_ret))["passed"] is False


def test_random_spread_on_a_hand_made_record():
    # every episode the same: each resampled window has return 2 and rates 100 on the one
    # unlocked achievement of two, so the score is exp(ln(101) / 2) - 1 exactly
    record = {"returns": [2.0] * 5, "achievements": ["a", "b"], "unlocked_bits": [1] * 5}
    out = checks.random_spread(record, pooled=4, draws=10)
    assert out["return"] == 2.0
    assert out["score"] == pytest.approx(math.sqrt(101.0) - 1.0, rel=1e-12)


def test_the_frozen_bars_are_the_recorded_random_episodes_spread():
    # results/random_games_2026-12-05 holds the 1,000 random episodes the bars came from;
    # random_spread is deterministic (seed 0), so the frozen numbers must be reproduced
    # to their rounding (4 decimals)
    folder = Path(__file__).parents[2] / "results" / "random_games_2026-12-05"
    for name, bars in checks.RANDOM_BARS.items():
        record = json.loads((folder / f"{name}.json").read_text())
        got = checks.random_spread(record, int(bars["pooled"]))
        assert round(got["return"], 4) == bars["return"]
        assert checks.DREAMERV3_CHECKS[name]["threshold"] == bars["return"]
        if "score" in bars:
            assert round(got["score"], 4) == bars["score"]
            assert checks.DREAMERV3_CHECKS[name]["score_threshold"] == bars["score"]
    assert set(checks.RANDOM_BARS) == {"breakout_minatar", "craftax_classic"}
    # the image check is the vector one's (a random policy's returns ignore the observation)
    assert (
        checks.DREAMERV3_CHECKS["breakout_minatar_image"]
        == checks.DREAMERV3_CHECKS["breakout_minatar"]
    )


def test_the_pixel_checks_bar_is_what_no_blind_policy_clears():
    """tdmpc2_pixel_point's bar (issue 48): the random record's bootstrap to 4 decimals, and
    the still policy's closed form, itself checked against the probe env stepped with zero
    actions (4,096 episodes: the mean within 4 of its standard errors, 4 x 4.03 / 64)."""
    import jax
    import jax.numpy as jnp

    import envs

    bars = checks.BLIND_BARS["tdmpc2_pixel_point"]
    folder = Path(__file__).parents[2] / "results" / "random_probe_2026-12-06"
    record = json.loads((folder / "probe_pixel_point.json").read_text())
    assert round(checks.random_spread(record, int(bars["pooled"]))["return"], 4) == bars["random"]
    mean_p = (math.sqrt(2.0) + math.asinh(1.0)) / 3.0
    mean, sd = (
        20 * (1 - mean_p / math.sqrt(2.0)),
        20 / math.sqrt(2.0) * math.sqrt(2 / 3 - mean_p**2),
    )
    z = 3.090232306167813  # the normal 99.9th percentile
    assert round(mean + z * sd / math.sqrt(bars["pooled"]), 4) == bars["still"]
    spec = checks.DREAMERV3_CHECKS["tdmpc2_pixel_point"]
    assert spec["threshold"] == max(bars["random"], bars["still"]) and spec["strict"]

    env = envs.make("probe_pixel_point")
    n = 4096
    states = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), n))
    step = jax.jit(jax.vmap(env.step))
    total = np.zeros(n)
    for _ in range(20):
        states = step(states, jnp.zeros((n, 2)))
        total += np.asarray(states.reward)
    assert abs(total.mean() - mean) < 4 * sd / math.sqrt(n)
