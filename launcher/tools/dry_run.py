"""``+dry_run=true``: the plan of a launch or a sweep, with its estimated accelerator hours.

``python -m launcher [-m] OVERRIDES +dry_run=true`` validates every job like any launch
(:func:`launcher.config.precheck.check_overrides`; the CPU budget does not refuse a dry run),
prints :func:`plan` and exits 0: Hydra never runs and nothing is created.

A job's estimate is agent steps x seeds x the agent's seconds per agent step of one seed
on an accelerator (:attr:`agent_api.AgentTables.accelerator_seconds_per_step`, or the
agent's ``accelerator_cost`` of the composed config and env facts), quoted with the figure's
device and source (and how it was derived, for a figure not measured as such). The seeds
of a job are vmapped on one device, so counting them one after another is an upper bound.
A preset without a figure is ``unknown``; no figure is made up (a derived one names the
measured figure it scales): the CPU estimate (:func:`launcher.config.cpu_budget.estimate`,
the agent's CPU model of the config) is shown instead, labelled CPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from agent_api import AcceleratorCost, AgentTables
from launcher.config import cpu_budget, guards
from launcher.config.schema import RunSpec
from launcher.loop.build import env_facts

NOTE = (
    "note: accelerator h/job = agent steps x seeds x seconds per agent step of one seed, "
    "the seeds counted one after another; a job's seeds are vmapped on one device, so "
    "this is an upper bound."
)


@dataclasses.dataclass(frozen=True)
class JobEstimate:
    """One job of the plan and what it is estimated to cost.

    Attributes:
      index: the job's number in the sweep (Hydra's order, from 0).
      env, agent, model_size: the env id, the agent's name, the preset's option name.
      seeds: the seeds run side by side inside the job.
      agent_steps: ``protocol.n_timesteps``.
      env_frames: agent steps x action repeat; None for a task-set agent (it trains from
        a dataset: its steps are updates).
      cost: the agent's accelerator figure for this preset; None = unknown.
      cpu_seconds: the job's estimated wall seconds on this machine's CPU (0: no CPU
        figure either); cpu_per_step: the CPU seconds per agent step of one seed it
        uses; cpu_exact: modelled or measured at this preset (else a lower bound);
        cpu_source: where the CPU figure comes from.
    """

    index: int
    env: str
    agent: str
    model_size: str
    seeds: int
    agent_steps: int
    env_frames: int | None
    cost: AcceleratorCost | None
    cpu_seconds: float = 0.0
    cpu_per_step: float = 0.0
    cpu_exact: bool = False
    cpu_source: str = ""

    @property
    def accelerator_hours(self) -> float | None:
        """agent steps x seeds x seconds per step, in hours; None without a figure."""
        if self.cost is None:
            return None
        return self.agent_steps * self.seeds * self.cost.seconds_per_step / 3600

    @property
    def unknown(self) -> str:
        """``unknown (no accelerator figure for agent=X model_size=Y)``."""
        return (
            f"unknown (no accelerator figure for agent={self.agent} model_size={self.model_size})"
        )


def preset_name(spec: RunSpec) -> str:
    """The ``model_size=`` option name of the spec's preset (e.g. ``fake_1``)."""
    size = getattr(spec.agent, "model_size", None)
    names = [name for name, value in spec.entry.model_sizes.items() if value == size]
    return names[0] if names else str(size)


def estimate(spec: RunSpec, index: int = 0, cores: int | None = None) -> JobEstimate:
    """The :class:`JobEstimate` of one validated job (``cores``: for the CPU estimate;
    default this machine's usable cores)."""
    size = getattr(spec.agent, "model_size", None)
    steps = spec.protocol.n_timesteps
    task_set = spec.entry.requirements.task_set
    cpu = cpu_budget.estimate(spec, cores)
    tables = spec.entry.tables or AgentTables()
    cost = tables.accelerator_seconds_per_step.get(size)
    if tables.accelerator_cost is not None and not task_set:
        cost = tables.accelerator_cost(spec.agent, env_facts(spec.env)) or cost
    return JobEstimate(
        index=index,
        env=spec.env.id,
        agent=spec.agent_name,
        model_size=preset_name(spec),
        seeds=len(spec.protocol.seeds),
        agent_steps=steps,
        env_frames=None if task_set else steps * spec.env.action_repeat,
        cost=cost,
        cpu_seconds=cpu.wall_s,
        cpu_per_step=cpu.per_step_s,
        cpu_exact=cpu.exact,
        cpu_source=cpu.source,
    )


def estimates(specs: Sequence[RunSpec], cores: int | None = None) -> list[JobEstimate]:
    """:func:`estimate` of every job, numbered in order."""
    return [estimate(spec, i, cores) for i, spec in enumerate(specs)]


# ------------------------------------------------------------------- the text
def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _hours(hours: float) -> str:
    return f"{hours:,.1f}"


def _figure(job: JobEstimate, cores: int) -> str:
    """The legend line of a job's figure (or of its missing one)."""
    if job.cost is not None:
        cost = job.cost
        whose = (
            "measured with this project"
            if cost.measured_here
            else "the reference's figure, not measured with this project"
        )
        if cost.derived:
            whose = f"not measured: {cost.derived}"
        return (
            f"agent={job.agent} model_size={job.model_size}: {cost.seconds_per_step:g} s per "
            f"agent step of one seed on {cost.device}; source: {cost.source}; {whose}"
        )
    if job.cpu_seconds <= 0:
        return f"{job.unknown}; no CPU figure either"
    return (
        f"{job.unknown}; the CPU hours beside it are for comparison only: "
        f"{job.cpu_per_step:.3g} s per agent step of one seed ({job.cpu_source}), the seeds "
        f"spread over this machine's {_count(cores, 'core')}; not an accelerator"
    )


def _hours_cell(job: JobEstimate) -> str:
    hours = job.accelerator_hours
    if hours is not None:
        return _hours(hours)
    if job.cpu_seconds <= 0:
        return "unknown"
    bound = "" if job.cpu_exact else ">="
    return f"unknown; CPU {bound}{_hours(job.cpu_seconds / 3600)} h"


def _table(rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell; text columns left-, numbers right-aligned."""
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    left = {1, 2, 3, len(widths) - 1}
    out = []
    for row in rows:
        cells = [
            cell.ljust(w) if c in left else cell.rjust(w)
            for c, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
    return out


def total_line(jobs: Sequence[JobEstimate], cores: int) -> str:
    """``total: N jobs, S seed-runs, H accelerator hours`` (and the unknown part)."""
    known = [j for j in jobs if j.cost is not None]
    missing = [j for j in jobs if j.cost is None]
    hours = sum(j.accelerator_hours or 0.0 for j in known)
    head = f"total: {_count(len(jobs), 'job')}, {_count(sum(j.seeds for j in jobs), 'seed-run')}"
    if not missing:
        return f"{head}, {_hours(hours)} accelerator hours"
    reasons = "; ".join(dict.fromkeys(j.unknown for j in missing))
    if known:
        text = (
            f"{head}, {_hours(hours)} accelerator hours for the {_count(len(known), 'job')} "
            f"with a figure; the other {len(missing):,}: accelerator hours {reasons}"
        )
    else:
        text = f"{head}, accelerator hours {reasons}"
    cpu = sum(j.cpu_seconds for j in missing)
    if cpu > 0:
        bound = "" if all(j.cpu_exact for j in missing) else "at least "
        text += (
            f"; CPU for comparison: {bound}{_hours(cpu / 3600)} CPU hours on this machine's "
            f"{_count(cores, 'core')} (not an accelerator)"
        )
    return text


def format_plan(jobs: Sequence[JobEstimate], cores: int) -> str:
    """The dry run's text: a header, one row per job, the total, the figures, a note."""
    legend: dict[str, int] = {}
    rows = [
        [
            "job",
            "env",
            "agent",
            "model_size",
            "seeds",
            "agent steps",
            "env frames",
            "accelerator h/job",
            "figure",
        ]
    ]
    for job in jobs:
        key = legend.setdefault(_figure(job, cores), len(legend) + 1)
        rows.append(
            [
                str(job.index),
                job.env,
                job.agent,
                job.model_size,
                str(job.seeds),
                f"{job.agent_steps:,}",
                "-" if job.env_frames is None else f"{job.env_frames:,}",
                _hours_cell(job),
                f"[{key}]",
            ]
        )
    lines = [f"dry run: {_count(len(jobs), 'job')} validated; nothing is run or created"]
    lines += _table(rows)
    lines.append(total_line(jobs, cores))
    lines += [f"[{key}] {text}" for text, key in legend.items()]
    if any(job.env_frames is None for job in jobs):
        lines.append("env frames -: a task-set agent trains from a dataset (its steps are updates)")
    lines.append(NOTE)
    return "\n".join(lines)


def plan(specs: Sequence[RunSpec], cores: int | None = None) -> str:
    """The dry-run text of validated jobs (``cores``: for the CPU comparison; default
    this machine's usable cores)."""
    cores = cores or guards._usable_cores()
    return format_plan(estimates(specs, cores), cores)
