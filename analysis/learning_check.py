"""The DreamerV3 CPU learning checks' judge and table, read from a launcher run directory
(issue 10; the checks run through the launcher, ``benchmarks/learning_checks.py`` prints
these):

    .venv/bin/python benchmarks/learning_checks.py --judge cartpole RUN_DIR
    .venv/bin/python benchmarks/learning_checks.py --table RUN_DIR

* ``cartpole`` (CartPole-v1): the mean eval return over [12k, 24k] rows, averaged over the
  seeds, >= 250 (the real reference: 312.7, its 5 seeds in [270, 347]; random: about 22).
* ``pendulum`` (Pendulum-v1): the last eval return at or before 20,000 rows > -400 for
  every seed.

A run whose evaluations have not reached the window's end gets no verdict (``passed``:
None; resume the run).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from launcher.store.rundir import RunDir, read_metrics

DREAMERV3_CHECKS = {
    "cartpole": dict(window=(12_000, 24_000), threshold=250.0, every_seed=False),
    "pendulum": dict(window=(20_000, 20_000), threshold=-400.0, every_seed=True),
}


def seed_rows(run_dir: Path | str) -> dict[int, tuple[dict[int, dict], dict[int, dict]]]:
    """``{seed: (train rows by chunk, eval rows by chunk)}`` from ``metrics/seed_<s>.jsonl``
    (the launcher's reader: a cut last line is skipped)."""
    out = {}
    for seed, path in RunDir(run_dir).metrics_files().items():
        train: dict[int, dict] = {}
        evals: dict[int, dict] = {}
        for row in read_metrics(path):
            {"train": train, "eval": evals}.get(row["kind"], {})[row["chunk"]] = row
        out[seed] = (train, evals)
    return out


def judge_dreamerv3(name: str, run_dir: Path | str) -> dict[str, Any]:
    """A DreamerV3 check's statistic from a launcher run dir's per-seed eval rows:
    ``cartpole`` the window mean averaged over seeds, ``pendulum`` every seed's last eval
    at or before the window's end."""
    spec = DREAMERV3_CHECKS[name]
    lo, hi = spec["window"]
    per_seed: dict[str, Any] = {}
    for seed, (_, eval_rows) in seed_rows(run_dir).items():
        evals = [
            (r["timestep"], r["Eval/episodic mean reward"]) for _, r in sorted(eval_rows.items())
        ]
        if spec["every_seed"]:
            kept = [v for t, v in evals if t <= hi]
            per_seed[f"seed_{seed}"] = kept[-1] if kept else math.nan
        else:
            kept = [v for t, v in evals if lo <= t <= hi]
            per_seed[f"seed_{seed}"] = float(np.mean(kept)) if kept else math.nan
        per_seed[f"seed_{seed}_curve"] = evals
    stats = [v for k, v in per_seed.items() if not k.endswith("_curve")]
    reached = [
        max((t for t, _ in c), default=0) for k, c in per_seed.items() if k.endswith("_curve")
    ]
    complete = bool(reached) and min(reached) >= hi
    if not complete:  # the window is not evaluated yet: no verdict (resume the run)
        passed = None
    elif spec["every_seed"]:
        passed = all(v > spec["threshold"] for v in stats)
    else:
        passed = bool(np.mean(stats) >= spec["threshold"])
    return {
        "check": name,
        "per_seed": per_seed,
        "threshold": spec["threshold"],
        "evaluated_up_to": min(reached, default=0),
        "complete": complete,
        "passed": passed,
    }


def dreamerv3_table(run_dir: Path | str) -> str:
    """A Markdown table of a DreamerV3 launcher run, one column per evaluation: rows, updates
    per seed, each seed's eval return, training-episode return (blank where no training
    episode ended in the chunk) and actor entropy, and the chunk's wall time (seed 0's row:
    the seeds share one chunk). SystemExit naming the problem for a dir without metrics."""
    seeds = seed_rows(run_dir)
    if not seeds:
        raise SystemExit(f"no metrics/seed_*.jsonl under {run_dir}: pass a launcher run dir")
    first_train, first_evals = next(iter(seeds.values()))
    chunks = sorted(first_evals)

    def line(label: str, cells: list[str]) -> str:
        return f"| {label} | " + " | ".join(cells) + " |"

    def num(value: float | None, fmt: str) -> str:
        return "" if value is None or value != value else format(value, fmt)

    lines = [
        line("rows", [f"{first_evals[c]['timestep']:,}" for c in chunks]),
        "|---" * (len(chunks) + 1) + "|",
        line("updates per seed", [f"{first_train[c]['Train/n_updates']:,}" for c in chunks]),
    ]
    for key, label, fmt in (
        ("Eval/episodic mean reward", "eval", ".1f"),
        ("Train/episodic mean reward", "training episodes", ".1f"),
        ("Train/ent/action/mean", "actor entropy", ".3f"),
    ):
        for seed, (train, evals) in seeds.items():
            rows = evals if key.startswith("Eval/") else train
            cells = [num(rows.get(c, {}).get(key), fmt) for c in chunks]
            lines.append(line(f"seed {seed}: {label}", cells))
    walls = [num(first_train.get(c, {}).get("time/chunk_seconds"), ",.0f") for c in chunks]
    lines.append(line("chunk wall (s)", walls))
    return "\n".join(lines)
