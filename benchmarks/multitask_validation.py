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
    python benchmarks/multitask_validation.py verdict               # verdict.json: --root, --data
    python benchmarks/multitask_validation.py all                   # every stage (run_all)

The plans (``_multitask_plan.PLANS``) say what each stage launches; the scores, draws and
rules are in ``_multitask_scores.py``. ``--plan mt3_dmc`` (the default) is the validation;
``--plan toy`` runs the same stages on the probe task set at smoke sizes in about a minute
(tests/launcher/test_multitask_validation.py).

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

The rules (fixed in ``_multitask_scores.RULES`` before any run; R = mean return of 30 eval-mode
episodes):

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
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# benchmarks/ is sys.path[0] when run as a script (tests: launcher_fakes.benchmark_script)
from _multitask_plan import (
    PLANS,
    Plan,
    members,
    offline_overrides,
    one_task_dir,
    pooled_dir,
    pooled_updates,
    source_overrides,
)
from _multitask_scores import (
    RULES,
    SOURCE_RETURNS,
    evaluate_draws,
    judge,
    random_returns,
    recorded_sources,
    source_returns,
    verdict,
)

__all__ = [
    "PLANS",
    "RULES",
    "SOURCE_RETURNS",
    "Plan",
    "judge",
    "pooled_updates",
    "run_all",
    "run_stage",
]

# A launch: (launcher overrides, run dir) -> exit status. The default runs the launcher in a
# subprocess (its own allocator and XLA flags); the toy test passes an in-process one.
Launch = Callable[[list[str], Path], int]


def subprocess_launch(overrides: list[str], run_dir: Path) -> int:
    cmd = [sys.executable, "-m", "launcher", *overrides, f"hydra.run.dir={run_dir}"]
    print(" ".join(cmd), flush=True)
    return subprocess.call(cmd)


def offline_runs(plan: Plan, pool: Any) -> dict[str, tuple[tuple[str, ...], int]]:
    """Each offline run's dir name -> (the tasks it is scored on, its updates)."""
    runs = {one_task_dir(plan, n): ((n,), plan.one_task_updates) for n in members(plan)}
    runs[pooled_dir(plan)] = (members(plan), pooled_updates(plan, pool.episodes_per_task()))
    return runs


def ensure_pool(plan: Plan, root: Path, data: Path) -> Any:
    """``root/pool``: the exports pooled in task-set order (written once). Written beside it
    and renamed into place, so one-task stages started together (one per core) never see a
    half-written pool: the first rename wins and the others use its pool."""
    from agents.tdmpc2.dataset import MultiTaskDataset, pool_tasks

    if not (root / "pool").exists():
        pool = pool_tasks([MultiTaskDataset.load(data / n) for n in members(plan)])
        staging = root / f"pool.partial-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        digest = pool.save(staging)
        try:
            staging.rename(root / "pool")
            print(f"pool: {pool.episodes_per_task()} sha256 {digest}", flush=True)
        except OSError:  # another stage's rename came first: same exports, same pool
            shutil.rmtree(staging)
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
        from launcher.tools.export import export_run

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
        args = [*offline_overrides(plan, root / "pool", updates), *plan.pooled_extra]
        return launch(args, root / pooled_dir(plan))
    elif stage == "evaluate":
        for run, (scored, updates) in offline_runs(plan, ensure_pool(plan, root, data)).items():
            pooled = run == pooled_dir(plan)
            if (every and pooled) or (not pooled and scored[0] in tasks):
                evaluate_draws(plan, root, run, scored, updates)
    elif stage == "verdict":
        result = json.dumps(verdict(plan, root, data), indent=1) + "\n"
        name = f"verdict{plan.tag}{plan.what_if}.json"
        (root / name).write_text(result)
        (data / name).write_text(result)  # beside the scores it judges
        print(result, end="")
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
    from launcher.loop.malloc import reexec_with_fast_malloc

    reexec_with_fast_malloc()  # the evaluate stage runs in this process
    sys.exit(main())
