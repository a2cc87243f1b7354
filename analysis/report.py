"""A run's learning curves per seed, mean and spread, as PNG (``python -m analysis
RUN_DIR``, :mod:`analysis.cli`; ``--compare paper``: against the published curves, judged,
:mod:`analysis.compare`; several run directories, or a sweep's: the runs overlaid,
:mod:`analysis.overlay`).

Reads the run's local metrics files (``RUN_DIR/metrics/seed_<s>.jsonl``) and writes
``RUN_DIR/plots/learning_curves.png``: training-episode and evaluation returns, one thin
line per seed, their mean and (two seeds or more) a band from the seeds' min to max;
the random policy's, a solved and the paper's final level as horizontal lines, in a
y-range of at least a quarter of the env's return range (:mod:`analysis.plotting`,
:mod:`analysis.levels`); a panel without a reference says so.

X axis: env frames (agent steps x action repeat, the papers' axis) by default, or agent
steps (``--x agent_steps``). A row's frames are its ``env_frames``, else its ``timestep``
times ``run.json``'s action repeat; a panel where neither is known is drawn in agent steps
and its axis label says so. ``--reference PATH`` adds a published curve (a CSV, see
:func:`load_reference`) to the evaluation panel.
A run that logged a Crafter score (an env with achievements, issue 46) also gets its score's
figure and its achievements' table in ``RUN_DIR/plots/`` (:mod:`analysis.achievements`).
Exit status 2 with one message if the directory, its metrics or the reference are missing.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path
from typing import Any

from analysis import achievements
from analysis.levels import run_levels
from analysis.plotting import (
    BAND_LABEL,  # noqa: F401 - the report's names, re-exported
    PanelSeries,
    Reference,
    build_figure,
)
from launcher.errors import ConfigError
from launcher.store.rundir import RunDir, peek_run, read_metrics

PANELS = (
    ("train", "Train/episodic mean reward", "training episodes"),
    ("eval", "Eval/episodic mean reward", "evaluation episodes (the agent's evaluation policy)"),
)
X_AXES = ("env_frames", "agent_steps")
REF_X_COLUMNS = ("env_frames", "frames", "step")
REF_Y_COLUMNS = ("return", "episode_reward", "mean")
REF_EXPECTED = (
    f"expected a CSV with a header, an x column ({' / '.join(REF_X_COLUMNS)}, in env frames) "
    f"and a return column ({' / '.join(REF_Y_COLUMNS)}); several seeds as rows with the same x"
)

Points = list[tuple[float, float]]


def action_repeat(run_dir: Path | str) -> int | None:
    """The run's action repeat from ``run.json`` (``identity.env`` first, then
    ``env_spec``); None when the file, the key or a positive integer is missing."""
    data = peek_run(run_dir)
    for section in (data.get("identity", {}).get("env", {}), data.get("env_spec", {})):
        value = section.get("action_repeat") if isinstance(section, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 1:
            if float(value).is_integer():
                return int(value)
    return None


def _seed_rows(run_dir: Path) -> dict[int, list[dict[str, Any]]]:
    """seed -> metric rows; ConfigError for a missing directory or no metrics files."""
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: no such run directory")
    files = RunDir(run_dir).metrics_files()
    if not files:
        raise ConfigError(f"{run_dir}: no metrics files (metrics/seed_<s>.jsonl); not a run dir?")
    return {seed: read_metrics(path) for seed, path in files.items()}


def _curves(
    run_dir: Path, x: str
) -> tuple[dict[str, dict[int, Points]], dict[str, bool], int | None]:
    """(kind -> seed -> [(x, return)], kind -> fell back to agent steps, action repeat)."""
    if x not in X_AXES:
        raise ConfigError(f"x={x!r}: expected one of {', '.join(X_AXES)}")
    rows = _seed_rows(run_dir)
    repeat = action_repeat(run_dir) if x == "env_frames" else None
    curves: dict[str, dict[int, Points]] = {}
    fallback: dict[str, bool] = {}
    for kind, key, _ in PANELS:
        steps: dict[int, Points] = {}
        frames: dict[int, Points] = {}
        missing = False
        for seed, seed_rows in sorted(rows.items()):
            for row in seed_rows:
                if row.get("kind") != kind or row.get(key) is None or "timestep" not in row:
                    continue
                y, t = row[key], row["timestep"]
                steps.setdefault(seed, []).append((t, y))
                if row.get("env_frames") is not None:
                    frames.setdefault(seed, []).append((row["env_frames"], y))
                elif repeat is not None:
                    frames.setdefault(seed, []).append((t * repeat, y))
                else:
                    missing = True
        use_frames = x == "env_frames" and not missing
        curves[kind] = frames if use_frames else steps
        fallback[kind] = x == "env_frames" and missing
    return curves, fallback, repeat


def load_curves(
    run_dir: Path | str, x: str = "agent_steps"
) -> dict[str, dict[int, list[tuple[float, float]]]]:
    """kind ("train"/"eval") -> seed -> [(x, return)] from the metrics files, x in agent
    steps (``timestep``, the default) or env frames (``x="env_frames"``; a kind whose
    frames are unknown stays in agent steps). ConfigError if the dir or metrics are missing."""
    return _curves(Path(run_dir), x)[0]


def _tables(per_seed: dict[int, Points]) -> tuple[list[dict[float, float]], list[float]]:
    tables = [dict(points) for points in per_seed.values()]
    common = sorted(set.intersection(*(set(t) for t in tables))) if tables else []
    return tables, common


def mean_curve(per_seed: dict[int, list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """The mean over seeds at the x values every seed has: [(x, mean)]."""
    tables, common = _tables(per_seed)
    return [(x, sum(t[x] for t in tables) / len(tables)) for x in common]


def spread_band(per_seed: dict[int, Points]) -> list[tuple[float, float, float]]:
    """[(x, min, max)] over seeds at the x values every seed has; [] below two seeds."""
    if len(per_seed) < 2:
        return []
    tables, common = _tables(per_seed)
    return [(x, min(t[x] for t in tables), max(t[x] for t in tables)) for x in common]


def load_reference(path: Path | str, label: str | None = None) -> Reference:
    """The reference curve in the CSV at ``path`` (header; x column ``env_frames``,
    ``frames`` or ``step``; return column ``return``, ``episode_reward`` or ``mean``; rows
    sharing an x are seeds, averaged), labelled ``label`` or the file stem.

    Raises:
      ConfigError: a missing or unreadable file, or one without those columns or rows.
    """
    path = Path(path)

    def fail(why: str) -> ConfigError:
        return ConfigError(f"reference {path}: {why}; {REF_EXPECTED}")

    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = [h.strip().lower() for h in next(reader, [])]
            body = list(reader)
    except OSError as err:
        raise fail(f"cannot read it ({err.strerror or err})") from None
    except (UnicodeDecodeError, csv.Error) as err:
        raise fail(f"not a CSV text file ({err})") from None
    xcol = next((header.index(c) for c in REF_X_COLUMNS if c in header), None)
    ycol = next((header.index(c) for c in REF_Y_COLUMNS if c in header), None)
    if xcol is None or ycol is None:
        raise fail(f"columns {header or 'none'}")
    groups: dict[float, list[float]] = {}
    for line, cells in enumerate(body, start=2):
        if not any(c.strip() for c in cells):
            continue
        try:
            xv, yv = float(cells[xcol]), float(cells[ycol])
        except (IndexError, ValueError):
            raise fail(f"line {line} has no numeric x and return: {cells}") from None
        groups.setdefault(xv, []).append(yv)
    if not groups:
        raise fail("no data rows")
    xs = sorted(groups)
    return Reference(
        label=label if label is not None else path.stem,
        x=xs,
        mean=[sum(groups[v]) / len(groups[v]) for v in xs],
        lo=[min(groups[v]) for v in xs],
        hi=[max(groups[v]) for v in xs],
        n_max=max(len(v) for v in groups.values()),
    )


def _xlabel(x: str, fallback: bool, repeat: int | None) -> str:
    if x == "agent_steps":
        return "agent steps (timestep)"
    if fallback:
        return "agent steps (env frames unknown: no env_frames, no action_repeat in run.json)"
    if repeat is not None:
        return f"env frames (agent steps x action repeat {repeat})"
    return "env frames (agent steps x action repeat)"


def panel_series(
    run_dir: Path | str,
    x: str = "env_frames",
    reference: Path | str | Reference | None = None,
    label: str | None = None,
    reference_kind: str = "eval",
) -> list[PanelSeries]:
    """The series each panel plots (train, then eval), with x in ``x`` ("env_frames" or
    "agent_steps"); the reference (a path or a :class:`Reference`) goes on the
    ``reference_kind`` panel (default eval; a paper whose curves are training
    episodes), in agent steps divided by the action repeat (unchanged if unknown, noted
    in its label). Each panel gets its levels, return bounds and notes from
    :func:`analysis.levels.run_levels` (a panel without a reference curve, solved or
    paper level says so).

    Raises:
      ConfigError: missing run dir or metrics, an unknown ``x``, a bad reference file.
    """
    run_dir = Path(run_dir)
    curves, fallback, repeat = _curves(run_dir, x)
    ref = reference
    if ref is not None and not isinstance(ref, Reference):
        ref = load_reference(ref, label)
    if ref is not None and x == "agent_steps":
        ar = action_repeat(run_dir)
        if ar is None:
            ref = replace(ref, label=f"{ref.label} (env frames: action repeat unknown)")
        else:
            ref = replace(ref, x=[v / ar for v in ref.x])
    levels = run_levels(run_dir)
    panels = []
    for kind, key, title in PANELS:
        per_seed = curves[kind]
        lv = levels[kind]
        on_panel = ref if kind == reference_kind else None
        missing = [lv.no_reference] if lv.no_reference and on_panel is None else []
        panels.append(
            PanelSeries(
                kind=kind,
                title=title,
                ylabel=key,
                xlabel=_xlabel(x, fallback[kind], repeat),
                seeds=dict(sorted(per_seed.items())),
                mean=mean_curve(per_seed) if len(per_seed) > 1 else [],
                band=spread_band(per_seed),
                reference=on_panel,
                frames_fallback=fallback[kind],
                levels=list(lv.levels),
                bounds=lv.bounds,
                notes=[*missing, *lv.notes],
            )
        )
    return panels


def plot_run(
    run_dir: Path | str,
    out: Path | str | None = None,
    *,
    x: str = "env_frames",
    reference: Path | str | Reference | None = None,
    label: str | None = None,
    reference_kind: str = "eval",
) -> Path:
    """Write the learning-curve PNG of a run (default ``RUN_DIR/plots/learning_curves.png``)
    with x in ``x`` and an optional reference on the eval panel, and, for a run that logged
    a Crafter score, :func:`analysis.achievements.write_report`'s files; returns the PNG path.

    Raises:
      ConfigError: see :func:`panel_series`.
    """
    run_dir = Path(run_dir)
    panels = panel_series(
        run_dir, x=x, reference=reference, label=label, reference_kind=reference_kind
    )
    out = Path(out) if out is not None else run_dir / "plots" / "learning_curves.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    build_figure(panels, run_dir.name).savefig(out, dpi=110)
    achievements.write_report(run_dir)  # a run with a Crafter score: its figure and table
    return out
