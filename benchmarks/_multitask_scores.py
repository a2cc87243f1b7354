"""The multi-task validation's scores and rules (``multitask_validation.py``, issue 32): the
random and source returns, the offline models' evaluation draws, and the verdict of both
rules (fixed in :data:`RULES` before any run)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _multitask_plan import Plan, members, one_task_dir, pooled_dir, pooled_updates

RULES = {
    "one_task": {"fraction_of_source_above_random": 0.5, "tasks_needed": 2},
    "pooled": {"fraction_of_one_task_above_random": 0.8, "tasks_needed": 2},
}
EVAL_KEY = "Eval/episodic mean reward"
# Next to the exports: each source's final-evaluation returns, so that the verdict needs the
# datasets and the offline runs, not the sources' run dirs.
SOURCE_RETURNS = "source_returns.json"


def random_returns(task_set: str, episodes: int, seed: int = 0) -> dict[str, float]:
    """Each member's mean return under uniform random actions (``episodes`` fresh episodes,
    ``benchmarks/_random_policy.py``)."""
    import jax
    import numpy as np
    from _random_policy import random_returns as policy_returns

    import envs

    ts = envs.make(task_set)
    key = jax.random.key(seed)
    return {
        name: float(np.mean(policy_returns(ts.member_env(i), episodes, key)))
        for i, name in enumerate(ts.names)
    }


def source_returns(run_dir: Path, episodes: int) -> list[float]:
    """A source run's final in-run evaluation (seed 0): its ``episodes`` returns."""
    from launcher.store.rundir import read_metrics

    path = run_dir / "metrics" / "seed_0.jsonl"
    evals = [r for r in read_metrics(path) if EVAL_KEY in r] if path.is_file() else []
    if not evals:
        raise SystemExit(f"{run_dir}: no evaluation yet; run the sources stage first")
    returns = [float(x) for x in evals[-1].get("Eval/episode returns", [])]
    if len(returns) != episodes:
        raise SystemExit(
            f"{run_dir}: its last evaluation has {len(returns)} episodes, not {episodes}"
        )
    return returns


def recorded_sources(data: Path) -> dict[str, list[float]]:
    """``data/source_returns.json`` (each exported source's final returns), or ``{}``."""
    path = data / SOURCE_RETURNS
    return json.loads(path.read_text()) if path.exists() else {}


def evaluate_draws(plan: Plan, root: Path, run: str, tasks: Sequence[str], updates: int) -> None:
    """Every missing draw of ``run``'s final checkpoint (module docstring): per task
    ``eval_draw`` returns, written to ``root/evals/<run>/draw_<d>.json`` as each draw ends."""
    from launcher.loop.cache import enable_compile_cache
    from launcher.tools.evaluate import evaluate_run

    enable_compile_cache()  # every draw after the first loads the compiled evaluation
    n = plan.eval_draw
    for d in range(plan.episodes // n):
        path = root / "evals" / run / f"draw_{d}.json"
        if path.exists():
            continue
        out = evaluate_run(root / run, n, draw=d)
        if out["timestep"] != updates:
            raise SystemExit(
                f"{root / run}: checkpoint at {out['timestep']} updates, not {updates}"
            )
        flat, row = out["returns"][0], out["metrics"][0]
        returns = {t: [float(x) for x in flat[i * n : (i + 1) * n]] for i, t in enumerate(tasks)}
        for t, rs in returns.items():  # the agent's per-task means agree with the split
            assert len(rs) == n and math.isclose(
                sum(rs) / n, row[f"Eval/{t}/episodic mean reward"], rel_tol=1e-5, abs_tol=1e-3
            ), (run, t)
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_suffix(".part")
        part.write_text(json.dumps({"draw": d, "updates": updates, "returns": returns}) + "\n")
        part.replace(path)  # a draw is on disk whole or not at all
        means = {t: round(sum(r) / n, 1) for t, r in returns.items()}
        print(f"{run} draw {d}: {json.dumps(means)}", flush=True)


def drawn_returns(plan: Plan, root: Path, run: str, tasks: Sequence[str]) -> dict[str, list[float]]:
    """Per task the ``episodes`` returns of ``run``'s draws, in draw order."""
    draws = range(plan.episodes // plan.eval_draw)
    paths = [root / "evals" / run / f"draw_{d}.json" for d in draws]
    if missing := [p.name for p in paths if not p.exists()]:
        raise SystemExit(f"{run}: draws {missing} not evaluated yet; run the evaluate stage")
    loaded = [json.loads(p.read_text())["returns"] for p in paths]
    return {t: [x for part in loaded for x in part[t]] for t in tasks}


def _ratio(x: float, base: float, top: float) -> float | None:
    return (x - base) / (top - base) if top > base else None


def judge(scores: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Both rules of :data:`RULES` on ``{task: {"random", "source", "one_task", "pooled"}}``
    (mean returns): per task the two ratios and whether each rule holds, and the verdicts."""
    tasks: dict[str, dict[str, Any]] = {}
    for name, sc in scores.items():
        r1 = _ratio(sc["one_task"], sc["random"], sc["source"])
        r2 = _ratio(sc["pooled"], sc["random"], sc["one_task"])
        tasks[name] = {
            **sc,
            "rule1_fraction": r1,
            "rule1_held": r1 is not None
            and r1 >= RULES["one_task"]["fraction_of_source_above_random"],
            "rule2_fraction": r2,
            "rule2_held": r2 is not None
            and r2 >= RULES["pooled"]["fraction_of_one_task_above_random"],
            "pooled_above_random": sc["pooled"] >= sc["random"],
        }
    held1 = sum(t["rule1_held"] for t in tasks.values())
    held2 = sum(t["rule2_held"] for t in tasks.values())
    none_below = all(t["pooled_above_random"] for t in tasks.values())
    return {
        "rules": RULES,
        "tasks": tasks,
        "rule1": {"tasks_held": held1, "passed": held1 >= RULES["one_task"]["tasks_needed"]},
        "rule2": {
            "tasks_held": held2,
            "none_below_random": none_below,
            "passed": held2 >= RULES["pooled"]["tasks_needed"] and none_below,
        },
    }


def verdict(plan: Plan, root: Path, data: Path) -> dict[str, Any]:
    """:func:`judge` on the runs under ``root`` and the datasets under ``data``, with the
    plan, the datasets' and the pool's sha256, each task's episodes, and every score's
    returns and standard error."""
    import numpy as np

    from agents.tdmpc2.dataset import MultiTaskDataset

    rand = json.loads((data / "random_returns.json").read_text())
    pool = MultiTaskDataset.load(root / "pool", verify=False)
    pooled = drawn_returns(plan, root, pooled_dir(plan), members(plan))
    sources = recorded_sources(data)
    returns = {
        name: {
            "source": sources[name],
            "one_task": drawn_returns(plan, root, one_task_dir(plan, name), [name])[name],
            "pooled": pooled[name],
        }
        for name in members(plan)
    }
    scores = {
        name: {"random": rand[name], **{k: float(np.mean(v)) for k, v in rs.items()}}
        for name, rs in returns.items()
    }
    out = judge(scores)
    for name, task in out["tasks"].items():
        task["standard_error"] = {  # of each mean over its episodes
            k: float(np.std(v, ddof=1) / math.sqrt(len(v))) for k, v in returns[name].items()
        }
        task["returns"] = returns[name]
        task["episodes_in_dataset"] = pool.episodes_per_task()[name]
        task["dataset_sha256"] = json.loads((data / name / "dataset.json").read_text())["sha256"]
    return {
        "plan": dataclasses.asdict(plan),
        "pool_sha256": json.loads((root / "pool" / "dataset.json").read_text())["sha256"],
        "pooled_updates": pooled_updates(plan, pool.episodes_per_task()),
        **out,
    }
