"""``python -m launcher.report RUN_DIR``: learning curves per seed and mean, as PNG.

Reads the run's local metrics files (``RUN_DIR/metrics/seed_<s>.jsonl``) and writes
``RUN_DIR/plots/learning_curves.png``: training-episode and evaluation returns
against agent env steps (``timestep``), one thin line per seed and their mean.
Exit status 2 with one message if the directory or its metrics are missing.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from launcher.errors import ConfigError
from launcher.rundir import read_metrics

PANELS = (
    ("train", "Train/episodic mean reward", "training episodes"),
    ("eval", "Eval/episodic mean reward", "evaluation (eval-mode policy)"),
)


def load_curves(run_dir: Path) -> dict[str, dict[int, list[tuple[int, float]]]]:
    """kind -> seed -> [(timestep, return)], from the metrics files; ConfigError if none."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: no such run directory")
    files = sorted((run_dir / "metrics").glob("seed_*.jsonl"))
    if not files:
        raise ConfigError(f"{run_dir}: no metrics files (metrics/seed_<s>.jsonl); not a run dir?")
    curves: dict[str, dict[int, list[tuple[int, float]]]] = {k: {} for k, _, _ in PANELS}
    for path in files:
        match = re.fullmatch(r"seed_(\d+)\.jsonl", path.name)
        if match is None:
            continue
        seed = int(match.group(1))
        for row in read_metrics(path):
            for kind, key, _ in PANELS:
                if row.get("kind") == kind and row.get(key) is not None:
                    curves[kind].setdefault(seed, []).append((int(row["timestep"]), row[key]))
    return curves


def mean_curve(per_seed: dict[int, list[tuple[int, float]]]) -> list[tuple[int, float]]:
    """The mean over seeds at the timesteps every seed has."""
    if not per_seed:
        return []
    tables = [dict(points) for points in per_seed.values()]
    common = sorted(set.intersection(*(set(t) for t in tables)))
    return [(x, sum(t[x] for t in tables) / len(tables)) for x in common]


def plot_run(run_dir: Path | str, out: Path | str | None = None) -> Path:
    """Write the learning-curve PNG of a run; returns its path."""
    from matplotlib.figure import Figure

    run_dir = Path(run_dir)
    curves = load_curves(run_dir)
    out = Path(out) if out is not None else run_dir / "plots" / "learning_curves.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(11, 4), layout="constrained")
    axes = fig.subplots(1, len(PANELS))
    for ax, (kind, key, title) in zip(axes, PANELS, strict=True):
        per_seed = curves[kind]
        single = len(per_seed) == 1
        for seed, points in sorted(per_seed.items()):
            xs, ys = zip(*points, strict=True) if points else ((), ())
            style = {"lw": 2.0, "marker": "o", "ms": 3} if single else {"lw": 0.8, "alpha": 0.5}
            ax.plot(xs, ys, label=f"seed {seed}", **style)
        mean = mean_curve(per_seed)
        if len(per_seed) > 1 and mean:
            xs, ys = zip(*mean, strict=True)
            ax.plot(xs, ys, lw=2.2, color="black", label="mean")
        ax.set_title(title)
        ax.set_xlabel("env steps (agent steps)")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        if per_seed:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(run_dir.name)
    fig.savefig(out, dpi=110)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m launcher.report", description=__doc__)
    parser.add_argument("run_dir", type=Path, help="a run directory (runs/<agent>-<env>-<hash>)")
    parser.add_argument("--out", type=Path, default=None, help="PNG path (default: in RUN_DIR)")
    args = parser.parse_args(argv)
    try:
        path = plot_run(args.run_dir, args.out)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
