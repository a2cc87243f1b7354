"""The acceptance rule against the published curves, fixed in code before any paper run.

docs/design.md §12. Everything here is plain data in, verdicts out; the report
(:mod:`analysis.compare`) reads the run directories and the reference table.

* **Window mean.** A seed's score on a task is the mean of its curve's points with
  ``x`` (env frames) in the last :attr:`Rule.window_fraction` of the paper budget,
  ``[B - 0.1 B, B]`` (a 4M budget evaluated every 100K: the 5 evaluations 3.6M..4M; a
  500K budget in 10K bins: the bins 450K..500K). Our task score is the mean over our
  seeds; the reference's is the mean over its seeds of the same window.
* **Per task:** pass when our score >= the reference's *lowest* seed's window mean minus
  :attr:`Rule.margin` (50).
* **Over the tasks:** the median and the mean of our task scores each >= the reference's
  median and mean over the same tasks minus 50 (one-sided: scoring above the paper is not a
  failure; the signed differences are reported), and >= :attr:`Rule.pass_fraction` (80%)
  of the judged tasks pass.
* **Judged only on the registered protocol:** a run whose identity differs from the
  registered paper composition of its agent and env (any key: model size, steps, seeds,
  an ``agent.*`` override) is reported with its numbers and the differing keys, never
  judged; so is a task without a reference curve, and an on-protocol run that lacks a
  registered seed or a point in the window (``incomplete``: still running, or cut short).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

Points = Sequence[tuple[float, float]]  # [(env frames, return)]
Curves = Mapping[int, Points]  # seed -> points

PASS, FAIL = "pass", "fail"
OFF_PROTOCOL, INCOMPLETE, NO_REFERENCE = "off-protocol", "incomplete", "no-reference"
JUDGED = (PASS, FAIL)


@dataclasses.dataclass(frozen=True)
class Rule:
    """The acceptance constants (module docstring)."""

    window_fraction: float = 0.1
    margin: float = 50.0
    pass_fraction: float = 0.8


RULE = Rule()


@dataclasses.dataclass(frozen=True)
class TaskVerdict:
    """One task's row. ``ours`` / ``reference``: mean over seeds of the window means (None
    when no seed has a point in the window); ``bar``: the reference's lowest seed's window
    mean minus the margin; ``window``: (lo, hi) env frames; ``reasons``: why it is not
    judged (differing identity keys, missing seeds); ``provenance``: the run's."""

    task: str
    agent: str
    status: str
    window: tuple[float, float]
    ours: float | None
    ours_per_seed: Mapping[int, float]
    reference: float | None
    reference_per_seed: Mapping[int, float]
    bar: float | None
    reasons: tuple[str, ...] = ()
    provenance: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    run_dir: str = ""

    @property
    def judged(self) -> bool:
        return self.status in JUDGED


@dataclasses.dataclass(frozen=True)
class SweepVerdict:
    """The verdict over tasks: counts, medians and means over the judged tasks."""

    tasks: tuple[TaskVerdict, ...]
    judged: int
    passed_tasks: int
    median_ours: float | None
    median_reference: float | None
    mean_ours: float | None
    mean_reference: float | None
    passed: bool
    rule: Rule = RULE


def window(budget: float, rule: Rule = RULE) -> tuple[float, float]:
    """The judged window ``(lo, hi)`` of a budget of ``budget`` env frames."""
    return budget * (1.0 - rule.window_fraction), float(budget)


def window_means(curves: Curves, lo: float, hi: float) -> dict[int, float]:
    """seed -> mean of its points with lo <= x <= hi (seeds without one left out)."""
    out = {}
    for seed, points in curves.items():
        ys = [y for x, y in points if lo <= x <= hi]
        if ys:
            out[int(seed)] = sum(ys) / len(ys)
    return out


def interpolated(curves: Curves, x: float) -> dict[int, float]:
    """seed -> its curve linearly interpolated at ``x`` (seeds whose x range misses it
    left out)."""
    out = {}
    for seed, points in curves.items():
        pts = sorted(points)
        for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
            if x0 <= x <= x1:
                out[int(seed)] = y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
                break
    return out


def _mean(values: Mapping[int, float]) -> float | None:
    return sum(values.values()) / len(values) if values else None


def judge_task(
    task: str,
    agent: str,
    ours: Curves,
    reference: Curves | None,
    budget: float,
    *,
    seeds: Sequence[int],
    deviations: Sequence[str] = (),
    provenance: Mapping[str, Any] | None = None,
    run_dir: str = "",
    rule: Rule = RULE,
) -> TaskVerdict:
    """One task's verdict: ``ours`` / ``reference`` per-seed curves in env frames, the
    paper ``budget`` (env frames), the registered ``seeds``, the keys where the run's
    identity differs from the registered protocol (``deviations``; non-empty: off
    protocol). An off-protocol run shorter than the budget is scored on the window of its
    own last x, against the reference on that same window, for information; a run with no
    reference (or no budget) on the last tenth of its own x, never its first point."""
    final = max((x for points in ours.values() for x, _ in points), default=0.0)
    if reference is None or budget <= 0:
        span = final
    elif deviations:
        span = min(budget, final) if final > 0 else budget
    else:
        span = budget
    lo, hi = window(span, rule)
    mine = window_means(ours, lo, hi)
    theirs = window_means(reference, lo, hi) if reference is not None else {}
    reasons = tuple(deviations)
    if deviations and reference is not None and not theirs:
        # a short off-protocol run (a CPU check) between the reference's points: its
        # seeds interpolated at the run's last x, for information only
        theirs = interpolated(reference, hi)
        if theirs:
            reasons = (*reasons, f"reference: no point in the window, interpolated at {hi:,.0f}")
    bar = min(theirs.values()) - rule.margin if theirs else None
    if reference is None:
        status = NO_REFERENCE
    elif deviations:
        status = OFF_PROTOCOL
    else:
        missing = sorted(set(seeds) - set(mine))
        if missing or not theirs:
            status = INCOMPLETE
            reasons = (f"no point in the window {lo:,.0f}..{hi:,.0f} for seeds {missing}",)
        else:
            status = PASS if _mean(mine) >= bar else FAIL
    return TaskVerdict(
        task=task,
        agent=agent,
        status=status,
        window=(lo, hi),
        ours=_mean(mine),
        ours_per_seed=mine,
        reference=_mean(theirs),
        reference_per_seed=theirs,
        bar=bar,
        reasons=reasons,
        provenance=dict(provenance or {}),
        run_dir=run_dir,
    )


def judge_sweep(tasks: Sequence[TaskVerdict], rule: Rule = RULE) -> SweepVerdict:
    """The verdict over the judged tasks of ``tasks`` (no judged task: not passed)."""
    judged = [t for t in tasks if t.judged]
    ours = [t.ours for t in judged]
    refs = [t.reference for t in judged]
    passed_tasks = sum(t.status == PASS for t in judged)
    if not judged:
        return SweepVerdict(tuple(tasks), 0, 0, None, None, None, None, False, rule)
    med_o, med_r = statistics.median(ours), statistics.median(refs)
    mean_o, mean_r = statistics.fmean(ours), statistics.fmean(refs)
    passed = (
        passed_tasks >= rule.pass_fraction * len(judged)
        and med_o >= med_r - rule.margin
        and mean_o >= mean_r - rule.margin
    )
    return SweepVerdict(
        tuple(tasks), len(judged), passed_tasks, med_o, med_r, mean_o, mean_r, passed, rule
    )
