"""An agent's tables: what is known of it beside how to run it (``AgentEntry.tables``).

The plug-in contract (:class:`agent_api.AgentEntry`) carries what the launcher needs to
run an agent; these figures hang off it as one optional part, :class:`AgentTables`:

* ``paper``: its published curves (:class:`PaperReference`), read by the analysis
  package (``python -m analysis ... --compare paper``, the paper line logged
  beside a run);
* ``cpu_cost`` / ``cpu_seconds_per_step``: its CPU cost (:class:`CpuCost`), the
  launcher's CPU budget and a dry run's CPU figure;
* ``accelerator_seconds_per_step``: known accelerator figures (:class:`AcceleratorCost`),
  a dry run's accelerator-hours estimate.

An agent without tables runs; it has no paper to compare with and no estimate.
Like the rest of ``agent_api``, this module imports neither JAX nor any agent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class CpuCost:
    """What one seed of a run costs on one CPU core, from the agent's own model of its
    resolved config (``AgentTables.cpu_cost``): the CPU budget's estimate
    (``launcher.config.guards``) and a dry run's CPU figure. Seconds are CPU seconds of one core.

    Attributes:
      train_s: training the run's agent steps (its updates and its acting).
      eval_s: one evaluation (its ``eval_episodes`` episodes).
      compile_s: compiling the agent's programs at XLA's default optimisation, once per
        launch (not per seed).
      updates, update_s: the updates the training runs and the seconds of one.
      acts, act_s: the acting calls of the training (a planner decision, a policy step of
        every env) and the seconds of one.
      source: where the model and its rates come from (quoted in messages).
    """

    train_s: float
    eval_s: float
    compile_s: float = 0.0
    updates: int = 0
    update_s: float = 0.0
    acts: int = 0
    act_s: float = 0.0
    source: str = ""


@dataclasses.dataclass(frozen=True)
class AcceleratorCost:
    """What one agent step of one seed costs on an accelerator, and where the figure
    comes from (a dry run's estimate, ``+dry_run=true``, quotes it).

    Attributes:
      seconds_per_step: wall seconds per agent step of one seed (updates and acting
        included).
      device: the accelerator (and software setup) the figure is for.
      source: where the number comes from (a measurement, a reference's figure).
      measured_here: measured with this project's code; False for another
        implementation's figure.
      derived: how the figure was derived from a measured one (e.g. scaled by a FLOP
        ratio); empty: the figure as measured.
    """

    seconds_per_step: float
    device: str
    source: str
    measured_here: bool = False
    derived: str = ""


@dataclasses.dataclass(frozen=True)
class PaperReference:
    """An agent's published curves: where the derived table is, how it is rebuilt from
    the reference's files, and what it measures (``analysis.paper_curves``,
    ``python -m analysis ... --compare paper``).

    Attributes:
      table: ``"package:file.json"``: the committed derived table (in the agent's package).
      source: what the table derives from (repository, commit, path), for the reader.
      reader: the source's format: ``"scores_json_gz"`` (a gzip'd JSON list of
        ``{task, method, seed, xs, ys}``) or ``"csv_per_task"`` (a folder of
        ``<task>.csv`` with columns ``step,reward,seed``).
      files: the source's path under the reference folder (a file or a folder).
      tasks: reference task name -> our env id (the tasks the registry has).
      no_counterpart: the reference's tasks our registry lacks (listed, not read).
      metric: ``"eval"`` (evaluation episodes) or ``"train"`` (training episodes): which
        of the run's returns the curves are compared with.
      budget_env_frames: the paper's budget in env frames; ``budgets``: env id -> budget
        where a task's differs.
      method: for ``scores_json_gz``, the records' ``method``.
      action_repeat: the protocol's action repeat (env frames per agent step).
      obs: the env observation mode the curves were recorded in (``vector``, ``image``):
        a run is compared with the curves of its own ``env.obs``.
      protocol: the protocol of the registered run that reproduces the curves
        (``analysis.compare`` names a run's differences from it).
      bin_frames: for ``scores_json_gz``, > 0: each seed's points averaged per bin of this
        many env frames (a point at x in bin ``ceil(x / bin_frames)``, labelled by its end):
        a source of one point per episode made small; 0: the points as they are.
      decimals: > 0: the scores rounded to this many decimals in the table; 0: as they are.
    """

    table: str
    source: str
    reader: str
    files: str
    tasks: Mapping[str, str]
    metric: str
    budget_env_frames: int
    no_counterpart: tuple[str, ...] = ()
    budgets: Mapping[str, int] = dataclasses.field(default_factory=dict)
    method: str | None = None
    action_repeat: int = 2
    obs: str = "vector"
    protocol: str = "paper"
    bin_frames: int = 0
    decimals: int = 0


@dataclasses.dataclass(frozen=True)
class AgentTables:
    """An agent's published curves and cost figures (module docstring); every part is
    optional.

    Attributes:
      paper: the agent's published curves (:class:`PaperReference`); None: none.
      more_papers: further published curves, each of another observation mode
        (``PaperReference.obs``; e.g. DreamerV3's DMC-vision curves beside its proprio ones).
      cpu_cost: ``(config, env facts, agent steps) -> CpuCost``: what one seed of a run
        costs on a CPU under this config (updates per step, batch, model size, envs,
        evaluation), the CPU budget's estimate; None: ``cpu_seconds_per_step`` is used.
        Pure arithmetic (no JAX, nothing built).
      cpu_seconds_per_step: model-size preset value -> measured CPU seconds per agent
        step of one seed (updates and acting included; docs/PERFORMANCE.md), used to
        estimate a launch's wall time on a machine without an accelerator, when the
        agent has no ``cpu_cost``.
      accelerator_seconds_per_step: model-size preset value -> :class:`AcceleratorCost`
        (a known figure only; a preset without one is left out and estimated as
        unknown), used by a dry run's accelerator-hours estimate.
      accelerator_cost: ``(config, env facts) -> AcceleratorCost | None``: the figure of a
        composed config where it differs from its preset's (e.g. an image env's larger
        networks); None from it, or no function: ``accelerator_seconds_per_step``.
      cpu_sized: the overrides (beside ``agent=<name>``) of a run of this agent that fits
        a CPU and shows learning, e.g. ``("env=pendulum", "protocol=quick")``: what the
        CPU budget's refusal offers first; empty: none known.
    """

    paper: PaperReference | None = None
    more_papers: tuple[PaperReference, ...] = ()
    cpu_cost: Callable[[Any, Any, int], CpuCost] | None = None
    cpu_seconds_per_step: Mapping[Any, float] = dataclasses.field(default_factory=dict)
    accelerator_seconds_per_step: Mapping[Any, AcceleratorCost] = dataclasses.field(
        default_factory=dict
    )
    accelerator_cost: Callable[[Any, Any], AcceleratorCost | None] | None = None
    cpu_sized: tuple[str, ...] = ()
