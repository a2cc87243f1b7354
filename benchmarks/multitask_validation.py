"""The multi-task TD-MPC2 validation (issue 32; docs/VALIDATION.md §4): does the offline
trainer learn from one task's data, and does pooling three tasks keep what each task's data
can teach?

One pipeline, every stage resumable (a launcher run resumes from its checkpoints with the
same command; a stage whose output exists is skipped), driven by a :class:`Plan`::

    python benchmarks/multitask_validation.py sources [--task T]   # single-task source runs
    python benchmarks/multitask_validation.py export                # --data/<task>, source scores
    python benchmarks/multitask_validation.py random                # --data/random_returns.json
    python benchmarks/multitask_validation.py one_task [--task T]   # rule 1's offline models
    python benchmarks/multitask_validation.py pooled                # rule 2's offline model
    python benchmarks/multitask_validation.py evaluate [--task T]   # their scores, in draws
    python benchmarks/multitask_validation.py verdict               # --root/verdict.json
    python benchmarks/multitask_validation.py all                   # every stage (run_all)

``--plan mt3_dmc`` (the default) is the validation; ``--plan toy`` runs the same stages on the
probe task set at smoke sizes in about a minute (tests/launcher/test_multitask_validation.py).

The task set ``mt3_dmc`` (``envs.task_sets``): Playground cartpole_balance, reacher_easy and
finger_spin at action repeat 2 (T 500). All three pay a reward in [0, 1] at every control
step (no terminal-only reward), so their returns share one scale, [0, 1000] per episode (the
repeat sums its two rewards, as the reference's wrapper does);
they are members of the reference's mt30 and cheap to simulate on a CPU. (The earlier
``mt3_cpu`` mixed gymnax Pendulum's -16..0 per step with these 0..1 tasks, and the one Q scale
the reference's policy loss shares across tasks shrank the DMC tasks' terms 6-7x.)

Sources: single-task TD-MPC2 at size 1 (the learning-check preset), seed 0, 15,000 agent steps
each (30 episodes of 500 steps in its own replay, ``agent.buffer_size`` = the run, so the export
is the whole history), one final evaluation of 30 episodes.

The offline models are scored after training, not inside their runs: the ``evaluate`` stage
runs ``launcher.evaluate`` on each one's final checkpoint in draws of ``eval_draw`` episodes
per task (draw d: fresh episodes keyed by ``EVAL_SALT + d``), each draw's returns written to
``--root/evals/<run>/draw_<d>.json`` as it ends. On two CPU cores a size-1 planner takes
about a minute per eval-mode episode (512 samples x 6 iterations x 500 decisions), so the
pooled model's 90 episodes would be one uninterruptible hour or more; in draws, a stopped
pipeline loses at most one draw.

The rules (fixed in :data:`RULES` before any run; R = mean return of 30 eval-mode episodes):

1. one-task offline model (the pool restricted to one task, ``agent.tasks=[task]``, U updates):
   ``(R_one - R_random) / (R_source - R_random) >= 0.5`` on >= 2 of 3 tasks;
2. the pooled 3-task model, trained until every task has had at least U updates' worth of its
   windows (episodes are drawn uniformly, so ``U x episodes / (fewest episodes of a task)``
   updates, rounded up to whole checkpoints):
   ``(R_pooled - R_random) / (R_one - R_random) >= 0.8`` on >= 2 of 3 tasks, and no
   task's ``R_pooled`` below ``R_random``. A task whose one-task model is not above random
   has nothing for pooling to keep: its rule-2 ratio is undefined and it does not count as held.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RULES = {
    "one_task": {"fraction_of_source_above_random": 0.5, "tasks_needed": 2},
    "pooled": {"fraction_of_one_task_above_random": 0.8, "tasks_needed": 2},
}
EVAL_KEY = "Eval/episodic mean reward"
# Next to the exports: each source's final-evaluation returns, so that the verdict needs the
# datasets and the offline runs, not the sources' run dirs.
SOURCE_RETURNS = "source_returns.json"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What each stage launches.

    Attributes:
      task_set: the ``envs.task_sets`` name; its members are the sources' envs.
      source_steps: agent steps of each single-task source run (its whole replay is exported).
      source_checkpoint: checkpoint interval of the sources, in agent steps.
      one_task_updates: U, the updates of each one-task offline model.
      offline_checkpoint: checkpoint interval of the offline runs, in updates.
      episodes: evaluation episodes of every score (random, source, one-task, pooled).
      eval_draw: episodes per task in one draw of the ``evaluate`` stage (divides ``episodes``).
      model_size: the TD-MPC2 preset of every run (None: the protocol's own).
      source_protocol / offline_protocol: the launcher protocols of the two kinds of run.
      extra: overrides every launch gets.
      tag: appended to the offline runs' dir names and the verdict's file name, so plans
        that share the sources (one task set) share one ``--root``.
    """

    task_set: str
    source_steps: int
    source_checkpoint: int
    one_task_updates: int
    offline_checkpoint: int
    episodes: int
    eval_draw: int
    model_size: str | None
    source_protocol: str
    offline_protocol: str
    extra: tuple[str, ...] = ()
    tag: str = ""


def one_task_dir(plan: Plan, task: str) -> str:
    return f"one_task{plan.tag}_{task}"


def pooled_dir(plan: Plan) -> str:
    return f"pooled{plan.tag}"


MT3_DMC = Plan(
    task_set="mt3_dmc",
    source_steps=15_000,
    source_checkpoint=2_500,
    one_task_updates=2_000,
    offline_checkpoint=1_000,
    episodes=30,
    eval_draw=5,
    model_size=None,  # learning_check: the size-1 preset with the reference's planner
    source_protocol="learning_check",
    offline_protocol="offline",
    extra=("+allow_long_cpu_run=true",),  # hours on a CPU: the pipeline's purpose
)

PLANS = {
    "mt3_dmc": MT3_DMC,
    # Added after the first plan's one-task cartpole_balance model scored near random with its
    # Q at 0.16 of the data's discounted returns (docs/VALIDATION.md §4.1), before any run of
    # its own. U from the arithmetic, not from a score: the TD target follows a Polyak target
    # network (tau = 0.01), so U updates make about U x tau Bellman backups, and the values
    # reach 1 - gamma^(U tau) of their fixed point; 95% at gamma = 0.99 needs U tau >= 298.
    "mt3_dmc_u30k": dataclasses.replace(MT3_DMC, one_task_updates=30_000, tag="_u30k"),
    "toy": Plan(
        task_set="probe_tasks",
        source_steps=40,
        source_checkpoint=20,
        one_task_updates=10,
        offline_checkpoint=10,
        episodes=2,
        eval_draw=1,
        model_size=None,
        source_protocol="smoke",
        offline_protocol="smoke",
        extra=("logger=disabled", "env.episode_length=null"),
    ),
}
OFFLINE_SIZE = "tdmpc2_1"  # the offline runs of the mt3_dmc plan: the sources' size

# A launch: (launcher overrides, run dir) -> exit status. The default runs the launcher in a
# subprocess (its own allocator and XLA flags); the toy test passes an in-process one.
Launch = Callable[[list[str], Path], int]


def subprocess_launch(overrides: list[str], run_dir: Path) -> int:
    cmd = [sys.executable, "-m", "launcher", *overrides, f"hydra.run.dir={run_dir}"]
    print(" ".join(cmd), flush=True)
    return subprocess.call(cmd)


def members(plan: Plan) -> tuple[str, ...]:
    from envs.task_sets import TASK_SETS

    return tuple(name for name, _ in TASK_SETS[plan.task_set])


def source_overrides(plan: Plan, task: str) -> list[str]:
    s = plan.source_steps
    size = [f"model_size={plan.model_size}"] if plan.model_size else []
    return [
        "agent=tdmpc2",
        f"env={task}",
        f"protocol={plan.source_protocol}",
        *size,
        "protocol.seeds=[0]",
        f"protocol.n_timesteps={s}",
        f"protocol.log_frequency={plan.source_checkpoint}",
        f"protocol.eval_frequency={s}",
        f"protocol.checkpoint_frequency={plan.source_checkpoint}",
        f"protocol.eval_episodes={plan.episodes}",
        "protocol.eval_at_start=false",
        f"agent.buffer_size={s}",
        *plan.extra,
    ]


def offline_overrides(plan: Plan, pool: Path, updates: int, tasks: Sequence[str] = ()) -> list[str]:
    size = plan.model_size or (OFFLINE_SIZE if plan.offline_protocol == "offline" else None)
    chosen = [f"agent.tasks=[{','.join(tasks)}]"] if tasks else []
    return [
        "agent=tdmpc2_multitask",
        f"env={plan.task_set}",
        f"protocol={plan.offline_protocol}",
        *([f"model_size={size}"] if size else []),
        "protocol.seeds=[0]",
        f"protocol.n_timesteps={updates}",
        f"protocol.log_frequency={min(500, plan.offline_checkpoint)}",
        "protocol.eval_frequency=0",  # scored by the evaluate stage (module docstring)
        f"protocol.checkpoint_frequency={plan.offline_checkpoint}",
        f"protocol.eval_episodes={plan.eval_draw}",
        "protocol.eval_at_start=false",
        f"agent.dataset={pool.resolve()}",
        *chosen,
        *plan.extra,
    ]


def pooled_updates(plan: Plan, episodes_per_task: dict[str, int]) -> int:
    """Updates after which every task has had >= U updates' worth of windows (module doc)."""
    total = sum(episodes_per_task.values())
    need = plan.one_task_updates * total / min(episodes_per_task.values())
    return math.ceil(need / plan.offline_checkpoint) * plan.offline_checkpoint  # whole chunks


def random_returns(task_set: str, episodes: int, seed: int = 0) -> dict[str, float]:
    """Each member's mean return under uniform random actions (``episodes`` fresh episodes,
    ``envs/random_policy.py``)."""
    import jax
    import numpy as np

    import envs
    from envs.random_policy import random_returns as policy_returns

    ts = envs.make(task_set)
    key = jax.random.key(seed)
    return {
        name: float(np.mean(policy_returns(ts.member_env(i), episodes, key)))
        for i, name in enumerate(ts.names)
    }


def source_returns(run_dir: Path, episodes: int) -> list[float]:
    """A source run's final in-run evaluation (seed 0): its ``episodes`` returns."""
    from launcher.rundir import read_metrics

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


def offline_runs(plan: Plan, pool: Any) -> dict[str, tuple[tuple[str, ...], int]]:
    """Each offline run's dir name -> (the tasks it is scored on, its updates)."""
    runs = {one_task_dir(plan, n): ((n,), plan.one_task_updates) for n in members(plan)}
    runs[pooled_dir(plan)] = (members(plan), pooled_updates(plan, pool.episodes_per_task()))
    return runs


def evaluate_draws(plan: Plan, root: Path, run: str, tasks: Sequence[str], updates: int) -> None:
    """Every missing draw of ``run``'s final checkpoint (module docstring): per task
    ``eval_draw`` returns, written to ``root/evals/<run>/draw_<d>.json`` as each draw ends."""
    from launcher.cache import enable_compile_cache
    from launcher.evaluate import evaluate_run

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
    recorded_sources = json.loads((data / SOURCE_RETURNS).read_text())
    returns = {
        name: {
            "source": recorded_sources[name],
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


def ensure_pool(plan: Plan, root: Path, data: Path) -> Any:
    """``root/pool``: the exports pooled in task-set order (written once)."""
    from agents.tdmpc2.dataset import MultiTaskDataset, pool_tasks

    if not (root / "pool").exists():
        pool = pool_tasks([MultiTaskDataset.load(data / n) for n in members(plan)])
        digest = pool.save(root / "pool")
        print(f"pool: {pool.episodes_per_task()} sha256 {digest}", flush=True)
    return MultiTaskDataset.load(root / "pool", verify=False)


STAGES = ("sources", "export", "random", "one_task", "pooled", "evaluate", "verdict")


def run_stage(
    stage: str,
    plan: Plan,
    root: Path,
    data: Path,
    tasks: Sequence[str] | None = None,
    launch: Launch = subprocess_launch,
) -> int:
    """One stage (module docstring); 0 on success, else the failed launch's exit status.
    ``tasks`` (default: every member) narrows sources, export, one_task and evaluate (which
    then scores only those one-task models, not the pooled one)."""
    every = not tasks
    tasks = list(tasks or members(plan))
    if stage == "sources":
        recorded = recorded_sources(data)
        for name in tasks:
            if (data / name).exists() and name in recorded:
                continue  # exported and scored: nothing of its run dir is needed any more
            if rc := launch(source_overrides(plan, name), root / "sources" / name):
                return rc
    elif stage == "export":
        from launcher.export import export_run

        recorded = recorded_sources(data)
        for name in tasks:
            if not (data / name).exists():
                print(json.dumps(export_run(root / "sources" / name, data / name)), flush=True)
            if name not in recorded:
                recorded[name] = source_returns(root / "sources" / name, plan.episodes)
        (data / SOURCE_RETURNS).write_text(json.dumps(recorded, indent=1) + "\n")
    elif stage == "random":
        if not (data / "random_returns.json").exists():
            out = random_returns(plan.task_set, plan.episodes)
            data.mkdir(parents=True, exist_ok=True)
            (data / "random_returns.json").write_text(json.dumps(out, indent=1) + "\n")
    elif stage == "one_task":
        ensure_pool(plan, root, data)
        for name in tasks:
            args = offline_overrides(plan, root / "pool", plan.one_task_updates, [name])
            if rc := launch(args, root / one_task_dir(plan, name)):
                return rc
    elif stage == "pooled":
        pool = ensure_pool(plan, root, data)
        updates = pooled_updates(plan, pool.episodes_per_task())
        return launch(offline_overrides(plan, root / "pool", updates), root / pooled_dir(plan))
    elif stage == "evaluate":
        for run, (scored, updates) in offline_runs(plan, ensure_pool(plan, root, data)).items():
            pooled = run == pooled_dir(plan)
            if (every and pooled) or (not pooled and scored[0] in tasks):
                evaluate_draws(plan, root, run, scored, updates)
    elif stage == "verdict":
        result = verdict(plan, root, data)
        (root / f"verdict{plan.tag}.json").write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result, indent=1))
    else:
        raise ValueError(f"unknown stage {stage!r}; one of {STAGES}")
    return 0


def run_all(plan: Plan, root: Path, data: Path, launch: Launch = subprocess_launch) -> int:
    """Every stage in order, except that each one-task model is scored as soon as it is
    trained: rule 1's numbers come before the pooled model's long training and evaluation."""
    steps: list[tuple[str, list[str] | None]] = [("sources", None), ("export", None)]
    steps += [("random", None)]
    steps += [(stage, [t]) for t in members(plan) for stage in ("one_task", "evaluate")]
    steps += [("pooled", None), ("evaluate", None), ("verdict", None)]
    for stage, tasks in steps:
        if rc := run_stage(stage, plan, root, data, tasks, launch):
            return rc
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("stage", choices=[*STAGES, "all"])
    parser.add_argument("--plan", choices=sorted(PLANS), default="mt3_dmc")
    parser.add_argument(
        "--task",
        action="append",
        help="only this member (sources, export, one_task, evaluate: its one-task model)",
    )
    parser.add_argument("--root", type=Path, help="run dirs (default runs/mt_val_<task set>)")
    parser.add_argument("--data", type=Path, help="datasets (default results/data/<task set>)")
    args = parser.parse_args(argv)
    plan = PLANS[args.plan]
    root = args.root or Path(f"runs/mt_val_{plan.task_set}")  # the plans of a task set share it
    data = args.data or Path("results/data") / plan.task_set
    if args.stage == "all":
        return run_all(plan, root, data)
    return run_stage(args.stage, plan, root, data, args.task)


if __name__ == "__main__":
    from launcher.malloc import reexec_with_fast_malloc

    reexec_with_fast_malloc()  # the evaluate stage runs in this process
    sys.exit(main())
