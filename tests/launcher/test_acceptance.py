"""The acceptance rule (analysis.acceptance) on synthetic curves: pass, fail at the bar's
edge, off-protocol, missing seeds, no reference, and the rule over tasks (80%, median and
mean within 50)."""

from __future__ import annotations

import pytest

from analysis import acceptance as acc

BUDGET = 4_000_000
X = list(range(0, BUDGET + 1, 100_000))  # TD-MPC2's evaluation grid
SEEDS = (1, 2, 3)


def flat(value: float, xs=X) -> list[tuple[float, float]]:
    return [(x, value) for x in xs]


def ramp(start: float, end: float) -> list[tuple[float, float]]:
    """start at x=0 to end at the budget, linearly."""
    return [(x, start + (end - start) * x / BUDGET) for x in X]


REF = {1: flat(980.0), 2: flat(990.0), 3: flat(1000.0)}  # lowest seed 980: bar 930


def judge(ours, reference=REF, **kw):
    kw.setdefault("seeds", SEEDS)
    return acc.judge_task("walker_walk", "tdmpc2", ours, reference, BUDGET, **kw)


def test_window_is_the_last_tenth_of_the_budget():
    assert acc.window(BUDGET) == (3_600_000, 4_000_000)
    assert acc.window(500_000) == (450_000, 500_000)


def test_window_means_average_only_the_points_inside():
    curves = {0: ramp(0.0, 1000.0), 1: [(10.0, 5.0)]}
    means = acc.window_means(curves, 3_600_000, 4_000_000)
    # the 5 points 3.6M..4.0M of the ramp: 900, 925, ..., 1000
    assert means == {0: pytest.approx(950.0)}


def test_pass_and_fail_at_the_bar():
    at_bar = judge({s: flat(930.0) for s in SEEDS})
    assert at_bar.status == acc.PASS and at_bar.bar == 930.0
    assert at_bar.reference == pytest.approx(990.0) and at_bar.judged
    below = judge({1: flat(929.0), 2: flat(930.0), 3: flat(931.0)})  # mean 930 -> pass
    assert below.status == acc.PASS
    assert judge({s: flat(929.9) for s in SEEDS}).status == acc.FAIL


def test_only_the_window_counts():
    # far below the bar before the window, at 950 inside it
    ours = {s: [(x, 0.0 if x < 3_600_000 else 950.0) for x in X] for s in SEEDS}
    assert judge(ours).status == acc.PASS
    late_drop = {s: [(x, 1000.0 if x < 3_600_000 else 900.0) for x in X] for s in SEEDS}
    assert judge(late_drop).status == acc.FAIL


def test_off_protocol_is_reported_never_judged():
    ours = {s: flat(1000.0) for s in SEEDS}
    v = judge(ours, deviations=["protocol.n_timesteps: 100 (registered: 2000000)"])
    assert v.status == acc.OFF_PROTOCOL and not v.judged
    assert v.reasons == ("protocol.n_timesteps: 100 (registered: 2000000)",)


def test_off_protocol_short_run_is_scored_on_its_own_last_tenth():
    ours = {s: flat(500.0, xs=range(0, 1_000_001, 100_000)) for s in SEEDS}
    ref = {1: ramp(0.0, 1000.0)}
    v = judge(ours, ref, deviations=["protocol.n_timesteps"])
    assert v.window == (900_000, 1_000_000)
    assert v.ours == 500.0 and v.reference == pytest.approx(237.5)  # mean of 225, 250


def test_missing_seed_or_window_is_incomplete():
    two = judge({1: flat(1000.0), 2: flat(1000.0)})
    assert two.status == acc.INCOMPLETE and "[3]" in two.reasons[0]
    short = {s: flat(1000.0, xs=range(0, 3_000_001, 100_000)) for s in SEEDS}
    assert judge(short).status == acc.INCOMPLETE and not judge(short).judged


def test_no_reference():
    v = judge({s: flat(1.0) for s in SEEDS}, reference=None)
    assert v.status == acc.NO_REFERENCE and v.bar is None and v.reference is None


@pytest.mark.parametrize("budget", [0, BUDGET])
def test_a_run_without_a_reference_is_scored_on_its_own_last_tenth(budget):
    """The untrained first evaluation (x = 0) never stands for the run (a quick run: 6,000
    steps, evaluated every 1,000 from step 0)."""
    xs = range(0, 6_001, 1_000)
    ours = {0: [(x, -1400.0 + 0.2 * x) for x in xs]}  # -1400 at 0 ... -200 at 6000
    v = acc.judge_task("pendulum", "tdmpc2", ours, None, budget, seeds=(0,))
    assert v.window == (5_400, 6_000) and v.ours == -200.0


def _verdicts(scores: list[float], ref=REF):
    return [
        acc.judge_task(f"t{i}", "tdmpc2", {s: flat(v) for s in SEEDS}, ref, BUDGET, seeds=SEEDS)
        for i, v in enumerate(scores)
    ]


def test_sweep_needs_80_percent_of_the_judged_tasks():
    four_of_five = acc.judge_sweep(_verdicts([990, 990, 990, 990, 0]))
    assert four_of_five.judged == 5 and four_of_five.passed_tasks == 4
    # 4/5 pass, but the mean (792) is 198 below the reference's 990: fails on the mean
    assert not four_of_five.passed and four_of_five.median_ours == 990
    good = acc.judge_sweep(_verdicts([990, 990, 990, 990, 800]))
    assert good.passed_tasks == 4 and good.mean_ours == pytest.approx(952.0) and good.passed
    three = acc.judge_sweep(_verdicts([990, 990, 990, 800, 800]))
    assert three.passed_tasks == 3 and not three.passed


def test_sweep_fails_on_median_and_mean_even_when_every_task_passes():
    wide = {1: flat(500.0), 2: flat(1000.0)}  # bar 450, reference mean 750
    s = acc.judge_sweep(_verdicts([460.0] * 5, ref=wide))
    assert s.passed_tasks == 5 and s.median_reference == 750.0 and not s.passed


def test_sweep_counts_judged_rows_only():
    rows = [
        *_verdicts([990.0, 990.0]),
        judge({s: flat(0.0) for s in SEEDS}, deviations=["agent.lr"]),
        judge({1: flat(0.0)}),  # incomplete
        judge({s: flat(0.0) for s in SEEDS}, reference=None),
    ]
    s = acc.judge_sweep(rows)
    assert s.judged == 2 and s.passed and len(s.tasks) == 5
    assert not acc.judge_sweep(rows[2:]).passed and acc.judge_sweep(rows[2:]).judged == 0


def test_off_protocol_run_shorter_than_the_reference_grid_gets_it_interpolated():
    ours = {1: [(0.0, 0.0), (12_000.0, 300.0)]}
    ref = {1: [(0.0, 0.0), (100_000.0, 1000.0)], 2: [(0.0, 100.0), (100_000.0, 100.0)]}
    v = judge(ours, ref, deviations=["protocol.name"])
    assert v.window == (10_800, 12_000) and v.ours == 300.0
    assert v.reference_per_seed == {1: pytest.approx(120.0), 2: 100.0}
    assert "interpolated at 12,000" in v.reasons[-1] and v.status == acc.OFF_PROTOCOL
    # on protocol, a reference without points in the window is never interpolated
    assert acc.interpolated(ref, 200_000.0) == {}
