"""Composed config (a plain mapping) -> validated, FROZEN dataclasses (:class:`RunSpec`).

Data flow (docs/design.md §2): Hydra composes ``conf/`` with the command line onto the
sections' schemas (the dataclasses themselves, :mod:`launcher.config.structured`); this module
builds each section through the same schema (keys and types: OmegaConf, so a plain
mapping such as a stored ``run.json`` is checked alike), checks the bounds on the fields
and the rules across sections and fields, loads the agent's plug-in entry named by
``agent.entry`` (``conf/agent/<name>.yaml``), folds the ``model_size`` preset into the
agent's config and returns a :class:`RunSpec`. Every error is a :class:`ConfigError`
that names the offending key and its valid values; nothing here builds an env or an
agent (:mod:`launcher.loop.build` holds the checks that need the env's facts).

The launcher knows no agent by name: an agent is whatever ``agent.entry`` points at
(an :class:`agent_api.AgentEntry`).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from agent_api import AgentEntry, load
from launcher.config import coerce
from launcher.config.coerce import close_matches, describe, listing, section
from launcher.config.identity import plain
from launcher.config.schema import (
    CALLBACK_PHASES,
    RESUME_MODES,
    RUN_CONTROL,
    TOP_LEVEL,
    CallbackSpec,
    EnvSpecConfig,
    LoggerSpec,
    ModelSizeChoice,
    Protocol,
    RunControl,
    RunSpec,
)
from launcher.config.structured import build_dataclass
from launcher.errors import ConfigError
from launcher.logger import loggers

__all__ = ["key_hint", "load_entry", "resolve"]


def key_hint(key: str) -> str:
    """:func:`launcher.config.coerce.key_hint` with the outputs' own misplaced keys."""
    return coerce.key_hint(key, loggers.key_hints())


# ------------------------------------------------------------------ the agent
def load_entry(agent: Mapping[str, Any]) -> AgentEntry:
    """The plug-in entry named by an ``agent`` section (``name``, ``entry``)."""
    name, path = agent.get("name"), agent.get("entry")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"agent.name: expected the agent's name, got {describe(name)}")
    if path is None:
        raise ConfigError(
            f"agent={name}: not implemented yet (conf/agent/{name}.yaml names no entry); "
            "see README for the agents that run"
        )
    if not isinstance(path, str):
        raise ConfigError(f"agent.entry: expected 'package.module:ENTRY', got {describe(path)}")
    try:
        entry = load(path)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"agent.entry: cannot load {path!r} ({err})") from None
    if not isinstance(entry, AgentEntry):
        raise ConfigError(f"agent.entry: {path!r} is a {type(entry).__name__}, not an AgentEntry")
    if entry.name != name:
        raise ConfigError(f"agent.entry: {path!r} is agent {entry.name!r}, not {name!r}")
    return entry


def _resolve_agent(cfg: Mapping[str, Any], protocol: Protocol) -> tuple[AgentEntry, Any]:
    agent = dict(section(cfg, "agent"))
    entry = load_entry(agent)
    name = agent.pop("name")
    agent.pop("entry")
    choice = build_dataclass(ModelSizeChoice, section(cfg, "model_size"), "model_size")
    size_owner, size = choice.agent, choice.size
    valid = list(entry.model_sizes)
    if size_owner != (entry.model_size_owner or name):
        raise ConfigError(
            f"model_size: the chosen preset (size {size!r}) belongs to agent={size_owner}, "
            f"not agent={name}; choose model_size= one of: {listing(valid)}"
        )
    if size not in entry.model_sizes.values():
        raise ConfigError(
            f"model_size.size: {size!r} is not a {name} preset; "
            f"choose model_size= one of: {listing(valid)}"
        )
    extra = {"model_size": size}
    if "eval_episodes" in typing.get_type_hints(entry.config_cls):
        extra["eval_episodes"] = protocol.eval_episodes
    config = build_dataclass(
        entry.config_cls, agent, "agent", skip=entry.launcher_fields, extra=extra
    )
    # Bounds (field metadata) and cross-field rules (__post_init__) ran in build_dataclass;
    # the rules that need the run's length are the config's optional check_run (agent_api).
    check_run = getattr(config, "check_run", None)
    if check_run is not None:
        try:
            check_run(protocol.n_timesteps)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    return entry, config


# --------------------------------------------------------------- the sections
def _resolve_protocol(cfg: Mapping[str, Any]) -> Protocol:
    p = build_dataclass(Protocol, section(cfg, "protocol"), "protocol")
    if not p.seeds:
        raise ConfigError("protocol.seeds: expected a non-empty list of ints, e.g. [0, 1, 2]")
    if len(set(p.seeds)) != len(p.seeds):
        raise ConfigError(f"protocol.seeds: seeds must be distinct, got {list(p.seeds)}")
    for s in p.seeds:
        if not 0 <= s < 2**31:
            raise ConfigError(f"protocol.seeds: seeds must be in [0, 2**31), got {s}")
    if p.log_frequency > p.n_timesteps:
        raise ConfigError(
            f"protocol.log_frequency: {p.log_frequency} exceeds protocol.n_timesteps="
            f"{p.n_timesteps}; use a value <= n_timesteps"
        )
    for key in ("eval_frequency", "checkpoint_frequency"):
        value = getattr(p, key)  # >= 0: its bound (launcher.config.schema.Protocol)
        if value % p.log_frequency:
            raise ConfigError(
                f"protocol.{key}: {value} is not a multiple of protocol.log_frequency="
                f"{p.log_frequency} (evaluations and checkpoints happen between chunks)"
            )
    return p


def _resolve_env(cfg: Mapping[str, Any]) -> EnvSpecConfig:
    return build_dataclass(EnvSpecConfig, section(cfg, "env"), "env")  # bounds: its fields


def _resolve_logger(cfg: Mapping[str, Any], control: RunControl) -> LoggerSpec:
    """The output list and each output's settings, checked by the outputs themselves
    (:func:`launcher.logger.loggers.resolve`)."""
    logger = build_dataclass(LoggerSpec, section(cfg, "logger"), "logger")
    return loggers.resolve(logger, control)


def _resolve_callbacks(cfg: Mapping[str, Any]) -> CallbackSpec:
    hooks = cfg.get("callbacks") or {}
    if not isinstance(hooks, Mapping):
        raise ConfigError(f"callbacks: expected a mapping phase -> list, got {describe(hooks)}")
    for phase in hooks:
        if phase not in CALLBACK_PHASES:
            raise ConfigError(
                f"callbacks.{phase}: unsupported callback phase; "
                f"{close_matches(phase, CALLBACK_PHASES)}"
                f"supported phases: {listing(CALLBACK_PHASES)}"
            )
    spec = build_dataclass(CallbackSpec, hooks, "callbacks")
    for phase in CALLBACK_PHASES:
        for i, path in enumerate(getattr(spec, phase)):
            module, _, attr = path.rpartition(":") if ":" in path else path.rpartition(".")
            if not module or not attr:
                raise ConfigError(
                    f"callbacks.{phase}[{i}]: {path!r} is not an import path; "
                    "write 'package.module:function'"
                )
    return spec


def _resolve_control(cfg: Mapping[str, Any]) -> RunControl:
    # Named as typed (`+stop_after_chunks=x` -> "stop_after_chunks: expected int ..."):
    # run-control keys are top-level, so no section prefix.
    control = build_dataclass(RunControl, {k: cfg[k] for k in RUN_CONTROL if k in cfg}, "")
    if control.resume not in RESUME_MODES:
        raise ConfigError(
            f"resume: {control.resume!r} is not a resume mode; choose one of: "
            f"{listing(RESUME_MODES)} (e.g. +resume=force)"
        )
    return control  # from_artifact: checked by the output that fetches it


def resolve(cfg: Mapping[str, Any]) -> RunSpec:
    """Validate a composed config (a plain mapping, interpolations resolved) into a RunSpec.

    Args:
      cfg: ``OmegaConf.to_container(composed, resolve=True)`` of the job config.

    Raises:
      ConfigError: naming the key and its valid values.
    """
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"config: expected a mapping, got {describe(cfg)}")
    for key in cfg:
        if key not in TOP_LEVEL:
            raise ConfigError(
                f"{key}: unknown top-level key{key_hint(key)}; {close_matches(key, TOP_LEVEL)}"
                f"valid keys: {listing(TOP_LEVEL)}"
            )
    protocol = _resolve_protocol(cfg)
    entry, agent = _resolve_agent(cfg, protocol)
    control = _resolve_control(cfg)
    return RunSpec(
        agent_name=entry.name,
        agent=agent,
        entry=entry,
        env=_resolve_env(cfg),
        protocol=protocol,
        logger=_resolve_logger(cfg, control),
        callbacks=_resolve_callbacks(cfg),
        control=control,
        config=plain(cfg),
    )
