"""The launcher's frozen config dataclasses: what a validated run is made of.

:func:`launcher.config.validate.resolve` builds them from the composed Hydra config; everything
downstream (the run loop, the run directory, W&B) reads only these.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from agent_api.rules import added_later, bounded
from launcher.config.identity import composed_hash, run_name

CALLBACK_PHASES = ("pretrain", "post_update", "eval_metrics", "reference_rows", "run_end")
# Their defaults: the analysis package's paper line and learning-curve figure, loaded by
# import path like any hook (the run loop imports no analysis module).
DEFAULT_REFERENCE_ROWS = ("analysis.paper_line:paper_rows",)
DEFAULT_RUN_END = ("analysis.report:plot_run",)
RESUME_MODES = ("auto", "force")
# Keys a `+resume=force` relaunch may change (design: extending a run's length).
FORCE_CHANGEABLE = ("protocol.n_timesteps",)
RUN_CONTROL = (
    "resume",
    "stop_after_chunks",
    "allow_long_cpu_run",
    "max_abs_loss",
    "dry_run",
    "from_artifact",
)
TOP_LEVEL = ("agent", "model_size", "env", "protocol", "logger", "callbacks", *RUN_CONTROL)


# env=custom: a user's own env, built by env.factory (docs/design.md §5.5).
CUSTOM_ENV = "custom"
# A custom env's id names its run directory: a plain name.
_ENV_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclasses.dataclass(frozen=True)
class EnvSpecConfig:
    """Which env to build: ``envs.make(id, action_repeat, episode_length)``, or a user's own
    env: ``factory(action_repeat=..., episode_length=...)`` (:mod:`envs.custom`).

    Attributes:
      id: a registered env id (``envs.list_envs()``); with ``factory``, the name of the
        user's env in run names (``custom`` by default, not a registered id).
      action_repeat: backend steps per agent step (DMC protocol of both papers: 2).
      episode_length: the time limit in *backend* steps; None = the backend's own.
      factory: ``package.module:function`` returning the user's env (an
        ``envs.core.Env``); None = the registered env ``id``.
      obs: the observation mode, ``envs.make``'s ``obs``: ``vector`` or, where the backend
        offers it, ``image`` (MinAtar, Craftax-Classic; issue 47): ``env=craftax_classic
        env.obs=image``. A user's own env declares its observation in its spec.
    """

    id: str
    action_repeat: int = bounded(1, low=1)
    episode_length: int | None = bounded(None, low=1)
    factory: str | None = added_later(None, since="issue 45")
    obs: str = added_later("vector", since="issue 47")

    def __post_init__(self) -> None:
        if self.factory is not None and self.obs != "vector":
            raise ValueError(
                f"obs={self.obs!r}: your own env (env.factory) declares its observation in "
                "its spec; leave env.obs out"
            )
        if self.factory is None and self.id == CUSTOM_ENV:
            raise ValueError(
                "env=custom is your own env: set env.factory=package.module:function "
                "(a function returning an envs.Env; docs/design.md §5.5)"
            )
        if self.factory is not None and not _ENV_NAME.fullmatch(self.id):
            raise ValueError(
                f"id={self.id!r} names your env's run directory: use letters, digits, "
                "'_', '.' and '-'"
            )


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How long and how a run trains, logs, evaluates and checkpoints.

    All frequencies count agent env steps (``timestep``, docs/design.md §3). The run is cut
    into chunks of ``log_frequency`` env steps, each one call of the jitted train
    function; evaluations and checkpoints happen between chunks, so their frequencies
    are multiples of it. The last chunk is always evaluated (when evaluating at all)
    and checkpointed.

    Attributes:
      name: the protocol's name (``quick``, ``smoke``, ``learning_check``, ``paper``).
      seeds: the seeds run side by side (vmapped, sharded over local devices).
      n_timesteps: the run's length in agent env steps; also sizes the replay (docs/design.md §9.4).
      log_frequency: env steps per chunk.
      eval_frequency: env steps between evaluations; 0 = no evaluation.
      eval_episodes: episodes per evaluation (sets the agent's ``eval_episodes``).
      eval_at_start: evaluate the untrained agent at step 0 (the paper protocol).
      checkpoint_frequency: env steps between checkpoints.
      keep_checkpoints: how many of the latest checkpoints to keep.
      shard_seeds: shard the seed axis over the local devices when there are several.
      fast_compile: compile the programs with LLVM at -O0 (``xla_backend_optimization_level
        = 0``): about half the compile time, slower steps; for runs that compile far longer
        than they train (``smoke``). Part of the run's identity: the numbers may differ in
        the last bits from an optimised build.
    """

    name: str
    seeds: tuple[int, ...]
    n_timesteps: int = bounded(dataclasses.MISSING, low=1)
    log_frequency: int = bounded(dataclasses.MISSING, low=1)
    eval_frequency: int = bounded(0, low=0, why="0 never evaluates")
    eval_episodes: int = bounded(10, low=1)
    eval_at_start: bool = False
    checkpoint_frequency: int = bounded(0, low=0)
    keep_checkpoints: int = bounded(2, low=1)
    shard_seeds: bool = True
    fast_compile: bool = False


@dataclasses.dataclass(frozen=True)
class LoggerSpec:
    """Where metrics go: the outputs (:mod:`launcher.logger.loggers`) and their settings.

    Attributes:
      outputs: the outputs, by name (``jsonl``, ``wandb``, ``tensorboard``) or import
        path (``package.module:Class``), ``jsonl`` (the per-seed metrics files) always
        among them; None: ``jsonl``, then ``wandb`` unless ``mode=disabled``, then
        ``tensorboard`` if ``tensorboard`` (what the presets set). Resolved into the list,
        with ``mode`` and ``tensorboard`` made to agree (:func:`launcher.logger.loggers.resolve`).
        The settings below belong to one output each, which checks them itself
        (its ``configure``): ``mode`` ... ``tags`` and ``checkpoint_artifact`` to
        :mod:`launcher.logger.wandb_output`, ``tensorboard`` to
        :mod:`launcher.logger.tensorboard_logger`.
      mode: W&B mode: ``offline`` (default; no account or network), ``online``,
        ``disabled``.
      project, entity: the W&B project and entity (None = the account's default).
      group: the W&B group of the per-seed runs; None = the experiment name.
      tags: W&B tags.
      tensorboard: also write TensorBoard event files, one directory per seed
        (``RUN_DIR/tensorboard/seed_<s>/``, :mod:`launcher.logger.tensorboard_logger`); the
        ``logger=tensorboard`` preset sets it with W&B disabled.
      progress: show the progress bar.
      checkpoint_artifact: at each checkpoint save, log the newest checkpoint and what a
        resume needs as a W&B artifact of type ``checkpoint`` named for the run, aliases
        ``latest`` and ``step_<t>``, from the first seed's W&B run
        (:mod:`launcher.logger.wandb_carry`); needs W&B (``mode`` offline or online).
    """

    outputs: tuple[str, ...] | None = None
    mode: str = "offline"
    project: str = "wmrl"
    entity: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = ()
    tensorboard: bool = False
    progress: bool = True
    checkpoint_artifact: bool = False


@dataclasses.dataclass(frozen=True)
class CallbackSpec:
    """Import paths (``package.module:function``) of the hooks per phase (docs/design.md §11.2;
    :mod:`launcher.loop.callbacks`). ``reference_rows`` and ``run_end`` default to the analysis
    package's paper line and learning-curve figure and are not part of the run's
    identity (``launcher.config.identity.OUTPUT_PHASES``)."""

    pretrain: tuple[str, ...] = ()
    post_update: tuple[str, ...] = ()
    eval_metrics: tuple[str, ...] = ()
    reference_rows: tuple[str, ...] = DEFAULT_REFERENCE_ROWS
    run_end: tuple[str, ...] = DEFAULT_RUN_END


@dataclasses.dataclass(frozen=True)
class RunControl:
    """Per-launch switches, not part of the run's identity.

    Attributes:
      resume: ``auto`` (continue the run dir's own run) or ``force`` (also accept a
        changed ``protocol.n_timesteps``).
      stop_after_chunks: stop this launch after this many chunks (checkpointed), e.g.
        for a job with a time limit; a relaunch resumes. None = run to the end.
      allow_long_cpu_run: start a launch whose estimated wall time on a machine without
        an accelerator exceeds :data:`launcher.config.guards.CPU_HOURS_LIMIT` hours.
      max_abs_loss: stop the run when a metric named like a loss (``*loss*``)
        exceeds this in absolute value (divergence); non-finite losses always stop it.
      dry_run: validate every job, print the plan and its estimated accelerator hours
        (:mod:`launcher.tools.dry_run`) and exit 0: nothing is run or created.
      from_artifact: a W&B artifact reference (``ENTITY/PROJECT/NAME:ALIAS``) of a
        checkpoint logged with ``logger.checkpoint_artifact``: a run directory without
        checkpoints gets it (its config identity checked) and the launch resumes from
        it (:mod:`launcher.logger.wandb_carry`).
    """

    resume: str = "auto"
    stop_after_chunks: int | None = bounded(None, low=1)
    allow_long_cpu_run: bool = False
    max_abs_loss: float | None = bounded(None, low=0, low_open=True)
    dry_run: bool = False
    from_artifact: str | None = None


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """A validated run: the agent's frozen config plus env, protocol, logger, callbacks.

    ``agent`` is the agent's own config dataclass with the model-size preset and
    ``eval_episodes`` already set; ``entry`` is the agent's plug-in entry (named by
    ``conf/agent/<name>.yaml``); ``config`` keeps the composed mapping it was resolved
    from (stored in the run directory, re-resolvable, and what the run name hashes).
    """

    agent_name: str
    agent: Any
    env: EnvSpecConfig
    protocol: Protocol
    entry: Any = dataclasses.field(default=None, compare=False, repr=False)
    logger: LoggerSpec = LoggerSpec()
    callbacks: CallbackSpec = CallbackSpec()
    control: RunControl = RunControl()
    config: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def config_hash(self) -> str:
        """10 hex digits of the SHA-256 of the composed identity sections."""
        return composed_hash(self.config, SECTIONS)

    @property
    def run_name(self) -> str:
        """``<agent>-<env>-<protocol>-<hash>``: the default run directory and W&B group."""
        return run_name(self.config, SECTIONS)


@dataclasses.dataclass(frozen=True)
class ModelSizeChoice:
    """The ``model_size`` section, set by a ``conf/model_size/<option>.yaml`` preset.

    Attributes:
      agent: the agent the preset belongs to (its ``AgentEntry.model_size_owner`` or name).
      size: the agent's own size key (an int or a string, as its presets define), folded
        into the agent's config as ``model_size`` (:func:`launcher.config.validate.resolve`).
    """

    agent: str
    size: Any


# The sections whose schema conf/config.yaml puts first (launcher.config.structured).
SECTIONS = {
    "protocol": Protocol,
    "env": EnvSpecConfig,
    "logger": LoggerSpec,
    "callbacks": CallbackSpec,
    "model_size": ModelSizeChoice,
}
