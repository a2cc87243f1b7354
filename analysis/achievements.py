"""A run's Crafter score and achievements (issue 46): the score's curve with the published
points, and the per-achievement success rates of its last evaluation.

A run on an env with achievements logs, at every evaluation, ``Eval/achievements/<name>``
(the share of the evaluation episodes, in percent, that unlocked ``<name>``) and
``Eval/crafter_score`` (``exp(mean ln(1 + s)) - 1`` of those rates; Hafner 2021,
arXiv 2109.06780): ``agents/common/achievements.py``, deviation D37. From them
:func:`write_report` writes, beside the learning curves (``RUN_DIR/plots/``):

* ``crafter_score.png``: the score over env frames (agent steps x action repeat, as the
  learning curves), one line per seed, their mean and spread, and the published points as
  horizontal lines (:data:`PUBLISHED_SCORES`), labelled as pixel results;
* ``achievements.md``: each achievement's success rate at each seed's last evaluation and
  their mean over seeds, the score, the mean rate, and on Craftax-Classic the mean return
  as a share of the maximum (22: one reward per achievement) beside the published share
  (:data:`PUBLISHED_RETURN_SHARES`).

A run without ``Eval/crafter_score`` gets neither (:func:`write_report` returns None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.plotting import Level, PanelSeries, build_figure
from launcher.store.rundir import RunDir, peek_run, read_metrics

SCORE_KEY = "Eval/crafter_score"  # the names agents/common/achievements.py logs
RATE_PREFIX = "Eval/achievements/"
RETURN_KEY = "Eval/episodic mean reward"
SCORE_BOUNDS = (0.0, 100.0)
MAX_RETURN = {"craftax_classic": 22.0}  # +1 per achievement unlocked, 22 achievements


@dataclass(frozen=True)
class Published:
    """A published result: ``value`` (a score, or a return in % of the maximum) of
    ``method`` after ``steps`` env steps, from ``source``, on pixel observations."""

    method: str
    value: float
    steps: int
    source: str

    @property
    def label(self) -> str:
        return f"{self.method} at {self.steps / 1e6:g}M steps, pixels ({self.source}): {self.value}"


# The DreamerV3 paper's Crafter score (arXiv 2301.04104): Crafter, 64 x 64 images.
PUBLISHED_SCORES = (Published("DreamerV3", 14.5, 1_000_000, "Hafner et al., arXiv 2301.04104"),)
# DreamerV3 on Craftax-Classic, images, in % of the maximum return (Dedieu et al. 2025).
PUBLISHED_RETURN_SHARES = {
    "craftax_classic": (Published("DreamerV3", 53.2, 1_000_000, "Dedieu et al., arXiv 2502.01591"),)
}

Points = list[tuple[float, float]]


def _env(run_dir: Path) -> dict[str, Any]:
    """``run.json``'s ``identity.env`` ({} if missing)."""
    env = peek_run(run_dir).get("identity", {}).get("env", {})
    return env if isinstance(env, dict) else {}


def _env_id(run_dir: Path) -> str | None:
    return _env(run_dir).get("id")


def _rows(run_dir: Path) -> dict[int, list[dict[str, Any]]]:
    """seed -> its metrics rows ({} for a directory without metrics files)."""
    return {seed: read_metrics(path) for seed, path in RunDir(run_dir).metrics_files().items()}


def score_curves(run_dir: Path | str) -> tuple[dict[int, Points], bool]:
    """seed -> [(env frames, score)] of the evaluations that logged a score, and whether
    the x values are env frames (False: agent steps, the action repeat being unknown)."""
    run_dir = Path(run_dir)
    repeat = _env(run_dir).get("action_repeat")
    repeat = repeat if isinstance(repeat, int) and not isinstance(repeat, bool) else None
    curves: dict[int, Points] = {}
    for seed, rows in sorted(_rows(run_dir).items()):
        for row in rows:
            if row.get("kind") == "eval" and row.get(SCORE_KEY) is not None:
                t = row["timestep"]
                x = row.get("env_frames", t * repeat if repeat is not None else t)
                curves.setdefault(seed, []).append((x, row[SCORE_KEY]))
    return curves, repeat is not None


def last_evaluations(run_dir: Path | str) -> dict[int, dict[str, Any]]:
    """seed -> the last evaluation row that logged a score (seeds without one left out)."""
    out = {}
    for seed, rows in sorted(_rows(Path(run_dir)).items()):
        scored = [r for r in rows if r.get("kind") == "eval" and r.get(SCORE_KEY) is not None]
        if scored:
            out[seed] = scored[-1]
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _mean_and_band(curves: dict[int, Points]) -> tuple[Points, list[tuple[float, float, float]]]:
    """The seeds' mean and min..max at the x values every seed has ([] below two seeds),
    as the learning curves draw them (analysis.report)."""
    if len(curves) < 2:
        return [], []
    tables = [dict(points) for points in curves.values()]
    common = sorted(set.intersection(*(set(t) for t in tables)))
    mean = [(x, _mean([t[x] for t in tables])) for x in common]
    band = [(x, min(t[x] for t in tables), max(t[x] for t in tables)) for x in common]
    return mean, band


def _cells(values: list[float]) -> str:
    return " | ".join(f"{v:.1f}" for v in values)


def achievement_table(run_dir: Path | str) -> str | None:
    """The Markdown table of the rates at each seed's last evaluation (module docstring);
    None when no evaluation logged a score."""
    run_dir = Path(run_dir)
    last = last_evaluations(run_dir)
    if not last:
        return None
    seeds = list(last)
    names = [k[len(RATE_PREFIX) :] for k in last[seeds[0]] if k.startswith(RATE_PREFIX)]
    steps = sorted({int(r["timestep"]) for r in last.values()})
    at = ", ".join(f"{s:,}" for s in steps)
    lines = [
        f"Achievements at the last evaluation (agent step {at}): success rate in % of the "
        f"evaluation episodes, mean over {len(seeds)} seed{'s' * (len(seeds) > 1)}",
        "",
        "| achievement | mean | " + " | ".join(f"seed {s}" for s in seeds) + " |",
        "|---|---:|" + "---:|" * len(seeds),
    ]
    for name in names:
        values = [float(last[s].get(RATE_PREFIX + name, math.nan)) for s in seeds]
        lines.append(f"| {name} | {_mean(values):.1f} | {_cells(values)} |")
    scores = [float(last[s][SCORE_KEY]) for s in seeds]
    rates = (
        [_mean([float(last[s][RATE_PREFIX + n]) for n in names]) for s in seeds] if names else []
    )
    lines.append(f"| **Crafter score** | **{_mean(scores):.1f}** | {_cells(scores)} |")
    if rates:
        lines.append(f"| mean success rate | {_mean(rates):.1f} | {_cells(rates)} |")
    env_id = _env_id(run_dir)
    returns = [last[s].get(RETURN_KEY) for s in seeds]
    if env_id in MAX_RETURN and all(isinstance(r, int | float) for r in returns):
        shares = [100.0 * r / MAX_RETURN[env_id] for r in returns]
        lines.append(
            f"| return, % of the maximum {MAX_RETURN[env_id]:g} | {_mean(shares):.1f} "
            f"| {_cells(shares)} |"
        )
    lines += ["", "Published (pixel observations; this table's runs may not be):"]
    lines += [f"- Crafter score: {p.label}" for p in PUBLISHED_SCORES]
    for p in PUBLISHED_RETURN_SHARES.get(env_id or "", ()):
        lines.append(f"- return on {env_id}, % of the maximum: {p.label}")
    return "\n".join(lines) + "\n"


def score_panel(run_dir: Path | str) -> PanelSeries | None:
    """The Crafter-score panel of a run; None when no evaluation logged a score."""
    curves, frames = score_curves(run_dir)
    if not curves:
        return None
    levels = [Level("reference", p.value, f"Crafter score, {p.label}") for p in PUBLISHED_SCORES]
    mean, band = _mean_and_band(curves)
    return PanelSeries(
        kind="eval",
        title="Crafter score of the evaluation episodes",
        ylabel=SCORE_KEY,
        xlabel="env frames" if frames else "agent steps (action repeat unknown)",
        seeds=curves,
        mean=mean,
        band=band,
        levels=levels,
        bounds=SCORE_BOUNDS,
        notes=["published points: pixel observations"],
    )


def paths(run_dir: Path | str) -> tuple[Path, Path]:
    """Where :func:`write_report` writes: ``plots/crafter_score.png``, ``plots/achievements.md``."""
    plots = Path(run_dir) / "plots"
    return plots / "crafter_score.png", plots / "achievements.md"


def write_report(run_dir: Path | str) -> tuple[Path, Path] | None:
    """Write ``plots/crafter_score.png`` and ``plots/achievements.md`` of a run that logged
    a Crafter score; returns their paths, or None (nothing written) for a run without."""
    run_dir = Path(run_dir)
    panel = score_panel(run_dir)
    if panel is None:
        return None
    png, table = paths(run_dir)
    png.parent.mkdir(parents=True, exist_ok=True)
    build_figure([panel], run_dir.name).savefig(png, dpi=110)
    table.write_text(achievement_table(run_dir) or "")
    return png, table
