"""The plans of the multi-task validation (``multitask_validation.py``, issue 32): what each
stage launches, fixed in code before any run of the plan, and the launcher overrides of its
source and offline runs."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path


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
      pooled_extra: overrides of the pooled run alone (a what-if of the pooled model).
      what_if: appended to the pooled run's dir name and the verdict's file name after
        ``tag``: a plan that changes only the pooled run shares the one-task models (and
        their scores) of the plan it varies.
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
    pooled_extra: tuple[str, ...] = ()
    what_if: str = ""


def one_task_dir(plan: Plan, task: str) -> str:
    return f"one_task{plan.tag}_{task}"


def pooled_dir(plan: Plan) -> str:
    return f"pooled{plan.tag}{plan.what_if}"


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
    # Issue 32's bisection of rule 2, a measured what-if only (deviation T49): the mt3_dmc
    # pooled model again with one RunningScale per task in its policy loss; one-task models
    # (one task: one scale either way) and their scores are mt3_dmc's.
    "mt3_dmc_qscale_per_task": dataclasses.replace(
        MT3_DMC,
        # every checkpoint kept: the per-task losses over the run (multitask_q_scale --losses)
        pooled_extra=("agent.q_scale_per_task=true", "protocol.keep_checkpoints=6"),
        what_if="_qscale_per_task",
    ),
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
