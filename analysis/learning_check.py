"""The CPU learning checks' judge and table, read from a launcher run directory (DreamerV3's,
issue 10, and TD-MPC2's pixel check, issue 48; the checks run through the launcher,
``benchmarks/learning_checks.py`` prints these):

    .venv/bin/python benchmarks/learning_checks.py --judge cartpole RUN_DIR
    .venv/bin/python benchmarks/learning_checks.py --table RUN_DIR

* ``cartpole`` (CartPole-v1): the mean eval return over [12k, 24k] rows, averaged over the
  seeds, >= 250 (the real reference: 312.7, its 5 seeds in [270, 347]; random: about 22).
* ``pendulum`` (Pendulum-v1): the last eval return at or before 20,000 rows > -400 for
  every seed.
* ``tdmpc2_pixel_point`` (issue 48): TD-MPC2 from 64 x 64 x 3 pixels on the point probe, the
  window's pooled eval return > a bar that no policy blind to the image clears (below).
* ``breakout_minatar`` and ``craftax_classic`` (issue 46; ``protocol=quick``'s agent
  settings, 2 seeds, 10 eval episodes per evaluation): the window's eval returns pooled
  over its evaluations and the seeds (the window mean averaged over seeds) > a bar above
  the uniform-random policy; on ``craftax_classic`` also the Crafter score of the
  achievement rates pooled the same way > its bar. Both bars are the 99.9th percentile of
  the random policy's statistic over as many episodes as the window pools
  (:func:`random_spread`, resampling the random episodes of
  ``results/random_games_2026-12-05/``); the numbers are at ``RANDOM_BARS``.

A run whose evaluations have not reached the window's end gets no verdict (``passed``:
None; resume the run).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from launcher.store.rundir import RunDir, read_metrics

DREAMERV3_CHECKS: dict[str, dict[str, Any]] = {
    "cartpole": dict(window=(12_000, 24_000), threshold=250.0, every_seed=False),
    "pendulum": dict(window=(20_000, 20_000), threshold=-400.0, every_seed=True),
}

SCORE_KEY = "Eval/crafter_score"  # agents/common/achievements.py's names
RATE_PREFIX = "Eval/achievements/"
RANDOM_QUANTILE = 0.999  # the bars: the random policy's window statistic's 99.9th percentile
RANDOM_DRAWS = 100_000  # resampled windows of random episodes (numpy, seed 0)

# Issue 46's checks, fixed before their runs. The uniform-random policy
# (benchmarks/random_returns.py --episodes 1000 --out results/random_games_2026-12-05, seed 0,
# each env's default time limit) and the window's pooled episodes (evaluations in the window x
# 2 seeds x 10 episodes) give the bars: random_spread(record, pooled) resamples that many of
# the 1,000 random episodes with replacement RANDOM_DRAWS times; a bar is the 99.9th
# percentile of the resampled statistic, so a random policy clears it with probability
# about 0.1% (the bootstrap's estimate; the strict ">" makes ties at a discrete bar fail).
# Measured 2026-12-05 (CPU), mean +- sample SD of the 1,000 random episodes:
# * breakout_minatar: return 0.439 +- 0.692 (0..6). Window [25k, 30k] rows of a 30,000-row
#   run evaluated every 1,000: 6 evaluations x 2 seeds x 10 = 120 episodes; the bar 0.65 (the
#   normal approximation agrees: 0.439 + 3.09 x 0.692 / sqrt(120) = 0.634).
# * craftax_classic: return 1.465 +- 1.287 (-0.9..6.1: +1 per achievement, +-0.1 per unit of
#   health); the Crafter score of all 1,000 episodes 1.82 (collect_wood 48%, collect_sapling
#   35%, place_plant 28%, place_table 13%, collect_drink 13%, wake_up 97%, 5 more under 2%,
#   11 never). Window [35k, 50k] rows of a 50,000-row run evaluated every 5,000: 4 x 2 x 10 =
#   80 episodes; the bars: return 1.9125 (normal: 1.465 + 3.09 x 1.287 / sqrt(80) = 1.910),
#   Crafter score 2.5296 (its median over the resampled windows: 1.72).
# tests/launcher/test_learning_checks_judge.py recomputes the bars from the committed JSON.
RANDOM_BARS: dict[str, dict[str, float]] = {
    "breakout_minatar": {"pooled": 120, "return": 0.65},
    "craftax_classic": {"pooled": 80, "return": 1.9125, "score": 2.5296},
}
DREAMERV3_CHECKS["breakout_minatar"] = dict(
    window=(25_000, 30_000), threshold=0.65, every_seed=False, strict=True
)
# Issue 47's image check, fixed before its run: Breakout-MinAtar seen as a 10x10x4 uint8 image
# (env.obs=image) under the vector check's protocol, window and bar. The bar stays: the
# random policy never reads its observation, so its returns are the vector record's.
DREAMERV3_CHECKS["breakout_minatar_image"] = dict(DREAMERV3_CHECKS["breakout_minatar"])

# Issue 48's pixel check, fixed before its run. TD-MPC2 (protocol=quick's agent: size 1, batch
# 64) on probe_pixel_point seen as 64 x 64 x 3 images (envs/probes.py): 5,000 rows evaluated
# every 500, window [4k, 5k] = 3 evaluations x 2 seeds x 10 episodes = 60 pooled. The bar is
# the larger of two policies' 99.9th-percentile window means, neither of which reads the image:
# * uniform random (benchmarks/random_returns.py --envs probe_pixel_point --episodes 1000 --out
#   results/random_probe_2026-12-06, seed 0; 9.006 +- 3.460): 10.3993 (random_spread);
# * standing still, the best blind policy we know (the return is 20 (1 - |p0| / sqrt 2); a
#   shift c of the start point raises E|p0 + c|, convex and symmetric in c, clipping aside):
#   E|p0| = (sqrt 2 + asinh 1) / 3 and E|p0|^2 = 2/3 on the square give the mean 9.1785 and
#   SD 4.0285 exactly, and 9.1785 + 3.0902 x 4.0285 / sqrt(60) = 10.7856 (normal approximation).
# Reading the point off the pixels and moving straight to the centre scores about 19.3.
BLIND_BARS: dict[str, dict[str, float]] = {
    "tdmpc2_pixel_point": {"pooled": 60, "random": 10.3993, "still": 10.7856},
}
DREAMERV3_CHECKS["tdmpc2_pixel_point"] = dict(
    window=(4_000, 5_000), threshold=10.7856, every_seed=False, strict=True
)
DREAMERV3_CHECKS["craftax_classic"] = dict(
    window=(35_000, 50_000),
    threshold=1.9125,
    score_threshold=2.5296,
    every_seed=False,
    strict=True,
)


def crafter_score(rates: np.ndarray) -> np.ndarray:
    """The Crafter score of success rates in percent ``[..., K]`` -> ``[...]``:
    ``exp(mean_k ln(1 + s_k)) - 1`` (numpy twin of agents/common/achievements.py's)."""
    return np.expm1(np.mean(np.log1p(np.asarray(rates, np.float64)), axis=-1))


def random_spread(
    record: dict[str, Any],
    pooled: int,
    quantile: float = RANDOM_QUANTILE,
    draws: int = RANDOM_DRAWS,
    seed: int = 0,
) -> dict[str, float]:
    """The ``quantile`` of the random policy's window statistics over ``pooled`` episodes:
    ``return`` (their mean return) and, for a record with achievements, ``score`` (the
    Crafter score of their pooled success rates). ``record``: a
    ``benchmarks/random_returns.py --out`` JSON (``returns`` [E]; ``unlocked_bits`` [E], bit
    k = achievement k). ``draws`` windows of ``pooled`` episodes drawn from the E with
    replacement (``numpy.random.default_rng(seed)``), in blocks of 5,000 to bound memory."""
    returns = np.asarray(record["returns"], np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(returns), size=(draws, pooled))
    out = {"return": float(np.quantile(returns[idx].mean(axis=1), quantile))}
    if "unlocked_bits" in record:
        k = len(record["achievements"])
        bits = np.asarray(record["unlocked_bits"], np.int64)
        unlocked = (bits[:, None] >> np.arange(k)) & 1  # [E, K] 0/1
        scores = [
            crafter_score(100.0 * unlocked[block].mean(axis=1))
            for block in np.array_split(idx, max(1, draws // 5_000))
        ]
        out["score"] = float(np.quantile(np.concatenate(scores), quantile))
    return out


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
    at or before the window's end; with ``score_threshold`` (``craftax_classic``) also the
    Crafter score of the window's achievement rates averaged over its evaluations and seeds
    (``score``; each seed's own as ``seed_<s>_score``), which must clear its bar too.
    ``strict``: the statistics must exceed their bars (else reach them)."""
    spec = DREAMERV3_CHECKS[name]
    lo, hi = spec["window"]
    per_seed: dict[str, Any] = {}
    window_rates: list[np.ndarray] = []
    for seed, (_, eval_rows) in seed_rows(run_dir).items():
        evals = [
            (r["timestep"], r["Eval/episodic mean reward"]) for _, r in sorted(eval_rows.items())
        ]
        if "score_threshold" in spec:
            # the rates (percent of each evaluation's episodes) in the window; every
            # evaluation has the same episode count, so their mean is the pooled rate
            rows = [r for _, r in sorted(eval_rows.items()) if lo <= r["timestep"] <= hi]
            names = sorted(k for k in (rows[0] if rows else {}) if k.startswith(RATE_PREFIX))
            rates = np.asarray([[r[k] for k in names] for r in rows], np.float64)
            window_rates += list(rates)
            seed_score = crafter_score(rates.mean(axis=0)) if len(rows) else math.nan
            per_seed[f"seed_{seed}_score"] = float(seed_score)
        if spec["every_seed"]:
            kept = [v for t, v in evals if t <= hi]
            per_seed[f"seed_{seed}"] = kept[-1] if kept else math.nan
        else:
            kept = [v for t, v in evals if lo <= t <= hi]
            per_seed[f"seed_{seed}"] = float(np.mean(kept)) if kept else math.nan
        per_seed[f"seed_{seed}_curve"] = evals
    stats = [v for k, v in per_seed.items() if not k.endswith(("_curve", "_score"))]
    reached = [
        max((t for t, _ in c), default=0) for k, c in per_seed.items() if k.endswith("_curve")
    ]
    complete = bool(reached) and min(reached) >= hi
    if not complete:  # the window is not evaluated yet: no verdict (resume the run)
        passed = None
    elif spec["every_seed"]:
        passed = all(v > spec["threshold"] for v in stats)
    elif spec.get("strict"):
        passed = bool(np.mean(stats) > spec["threshold"])
    else:
        passed = bool(np.mean(stats) >= spec["threshold"])
    extra: dict[str, Any] = {}
    if not spec["every_seed"]:
        extra["statistic"] = float(np.mean(stats)) if stats else math.nan
    if "score_threshold" in spec:
        score = float(crafter_score(np.mean(window_rates, axis=0))) if window_rates else math.nan
        extra |= {"score": score, "score_threshold": spec["score_threshold"]}
        if passed is not None:
            passed = passed and score > spec["score_threshold"]
    return {
        "check": name,
        "per_seed": per_seed,
        "threshold": spec["threshold"],
        **extra,
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
        # an evaluation before any training (eval at start: timestep 0) has no train row
        line(
            "updates per seed",
            [num(first_train.get(c, {}).get("Train/n_updates"), ",") for c in chunks],
        ),
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
