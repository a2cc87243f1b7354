"""Composed config (a plain mapping) -> validated, FROZEN dataclasses (:class:`RunSpec`).

Data flow (ARCHITECTURE.md): Hydra composes ``conf/`` with the command line; this
module checks every key, type and value, folds the ``model_size`` preset into the
agent's config and returns a :class:`RunSpec`. Every error is a :class:`ConfigError`
that names the offending key and its valid values; nothing here builds an env or an
agent (see :mod:`launcher.build` for the checks that need the env's facts).

The *identity* of a run (:func:`identity`) is everything that determines its results:
agent, env, protocol and callbacks. The logger and the run-control keys (``resume``,
``stop_after_chunks``) are not part of it. The identity's hash names the run directory
(``runs/<agent>-<env>-<hash>``) and guards resumes against a changed config.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from launcher.agents import AGENTS, AgentEntry
from launcher.errors import ConfigError

CALLBACK_PHASES = ("pretrain", "post_update", "eval_metrics")
LOGGER_MODES = ("offline", "online", "disabled")
RESUME_MODES = ("auto", "force")
# Keys a `+resume=force` relaunch may change (design: extending a run's length).
FORCE_CHANGEABLE = ("protocol.n_timesteps",)
TOP_LEVEL = (
    "agent",
    "model_size",
    "env",
    "protocol",
    "logger",
    "callbacks",
    "resume",
    "stop_after_chunks",
)


@dataclasses.dataclass(frozen=True)
class EnvSpecConfig:
    """Which env to build: ``envs.make(id, action_repeat, episode_length)``.

    Attributes:
      id: a registered env id (``envs.list_envs()``).
      action_repeat: backend steps per agent step (DMC protocol of both papers: 2).
      episode_length: the time limit in *backend* steps; None = the backend's own.
    """

    id: str
    action_repeat: int = 1
    episode_length: int | None = None


@dataclasses.dataclass(frozen=True)
class Protocol:
    """How long and how a run trains, logs, evaluates and checkpoints.

    All frequencies count agent env steps (``timestep``, design §2). The run is cut
    into chunks of ``log_frequency`` env steps, each one call of the jitted train
    function; evaluations and checkpoints happen between chunks, so their frequencies
    are multiples of it. The last chunk is always evaluated (when evaluating at all)
    and checkpointed.

    Attributes:
      name: the protocol's name (``quick``, ``smoke``, ``learning_check``, ``paper``).
      seeds: the seeds run side by side (vmapped, sharded over local devices).
      n_timesteps: the run's length in agent env steps; also sizes the replay (§5.6).
      log_frequency: env steps per chunk.
      eval_frequency: env steps between evaluations; 0 = no evaluation.
      eval_episodes: episodes per evaluation (sets the agent's ``eval_episodes``).
      eval_at_start: evaluate the untrained agent at step 0 (the TD-MPC2 protocol).
      checkpoint_frequency: env steps between checkpoints.
      keep_checkpoints: how many of the latest checkpoints to keep.
      shard_seeds: shard the seed axis over the local devices when there are several.
    """

    name: str
    seeds: tuple[int, ...]
    n_timesteps: int
    log_frequency: int
    eval_frequency: int = 0
    eval_episodes: int = 10
    eval_at_start: bool = False
    checkpoint_frequency: int = 0
    keep_checkpoints: int = 2
    shard_seeds: bool = True


@dataclasses.dataclass(frozen=True)
class LoggerSpec:
    """Where metrics go besides the local per-seed JSONL files (always written).

    Attributes:
      mode: W&B mode: ``offline`` (default; no account or network), ``online``,
        ``disabled``.
      project, entity: the W&B project and entity (None = the account's default).
      group: the W&B group of the per-seed runs; None = the experiment name.
      tags: W&B tags.
      progress: show the progress bar.
    """

    mode: str = "offline"
    project: str = "wmrl"
    entity: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = ()
    progress: bool = True


@dataclasses.dataclass(frozen=True)
class CallbackSpec:
    """Import paths (``package.module:function``) of the user hooks per phase (§5.7)."""

    pretrain: tuple[str, ...] = ()
    post_update: tuple[str, ...] = ()
    eval_metrics: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class RunControl:
    """Per-launch switches, not part of the run's identity.

    Attributes:
      resume: ``auto`` (continue the run dir's own run) or ``force`` (also accept a
        changed ``protocol.n_timesteps``).
      stop_after_chunks: stop this launch after this many chunks (checkpointed), e.g.
        for a job with a time limit; a relaunch resumes. None = run to the end.
    """

    resume: str = "auto"
    stop_after_chunks: int | None = None


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """A validated run: the agent's frozen config plus env, protocol, logger, callbacks.

    ``agent`` is the agent's own config dataclass (e.g. ``TDMPC2Config``) with the
    model-size preset and ``eval_episodes`` already set; ``config`` keeps the composed
    mapping it was resolved from (stored in the run directory, re-resolvable).
    """

    agent_name: str
    agent: Any
    env: EnvSpecConfig
    protocol: Protocol
    logger: LoggerSpec = LoggerSpec()
    callbacks: CallbackSpec = CallbackSpec()
    control: RunControl = RunControl()
    config: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def config_hash(self) -> str:
        """10 hex digits of the SHA-256 of the canonical identity."""
        return config_hash(identity(self))

    @property
    def run_name(self) -> str:
        """``<agent>-<env>-<hash>``: the default run directory's name and W&B group."""
        return f"{self.agent_name}-{self.env.id}-{self.config_hash}"


# ------------------------------------------------------------------------ messages
def _close(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), list(options), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(close)}? " if close else ""


def _options(options: Iterable[Any]) -> str:
    return ", ".join(str(o) for o in options)


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


# --------------------------------------------------------------------- type checks
def _type_name(hint: Any) -> str:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return " or ".join("null" if a is type(None) else _type_name(a) for a in args)
    if typing.get_origin(hint) is tuple:
        return f"a list of {_type_name(args[0])}"
    return getattr(hint, "__name__", str(hint))


def coerce(key: str, value: Any, hint: Any) -> Any:
    """``value`` checked against the type ``hint`` (int, float, bool, str, ``X | None``,
    ``tuple[X, ...]``). Ints are accepted for floats, integral floats (``1e6``) for ints;
    bools are never numbers. Raises ConfigError naming ``key`` and the expected type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(key, value, arg)
            except ConfigError:
                continue
        raise ConfigError(f"{key}: expected {_type_name(hint)}, got {_describe(value)}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key}: expected {_type_name(hint)}, got {_describe(value)}")
        return tuple(coerce(f"{key}[{i}]", v, args[0]) for i, v in enumerate(value))
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise ConfigError(f"{key}: expected a finite float, got {value!r}")
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif hint is Any:
        return value
    raise ConfigError(f"{key}: expected {_type_name(hint)}, got {_describe(value)}")


def _section(cfg: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = cfg.get(key)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected a mapping of keys, got {_describe(value)}")
    return value


def build_dataclass(
    cls: type,
    section: Mapping[str, Any],
    prefix: str,
    *,
    skip: Iterable[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> Any:
    """``cls(**section)`` with unknown keys refused and every value type-checked.

    Args:
      cls: a dataclass.
      section: the config mapping for it.
      prefix: the section's dotted key, for messages (``agent``).
      skip: fields that may not be set from ``section`` (set by ``extra`` instead).
      extra: values for fields that do not come from ``section``.
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    allowed = [name for name in fields if name not in set(skip)]
    kwargs: dict[str, Any] = {}
    for key, value in section.items():
        if key not in allowed:
            hint = _close(key, allowed)
            where = f" (set by the launcher: {_owner(key)})" if key in fields else ""
            raise ConfigError(
                f"{prefix}.{key}: unknown key{where}; {hint}valid keys: {_options(allowed)}"
            )
        kwargs[key] = coerce(f"{prefix}.{key}", value, hints[key])
    missing = [
        name
        for name, f in fields.items()
        if name in allowed
        and name not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{prefix}: missing key(s) {_options(missing)}")
    kwargs.update(extra or {})
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{prefix}: {err}") from None


def _owner(field: str) -> str:
    return {
        "model_size": "choose it with model_size=<option>",
        "eval_episodes": "protocol.eval_episodes",
    }.get(field, "not configurable")


# ------------------------------------------------------------------- the sections
def _resolve_agent(cfg: Mapping[str, Any], protocol: Protocol, agents: Mapping[str, AgentEntry]):
    section = dict(_section(cfg, "agent"))
    name = section.pop("name", None)
    if name not in agents:
        raise ConfigError(
            f"agent: unknown agent {name!r}; {_close(str(name), agents)}"
            f"choose one of: {_options(agents)}"
        )
    entry = agents[name]
    size_cfg = _section(cfg, "model_size")
    size_owner, size = size_cfg.get("agent"), size_cfg.get("size")
    unknown = sorted(set(size_cfg) - {"agent", "size"})
    if unknown:
        raise ConfigError(f"model_size.{unknown[0]}: unknown key; valid keys: agent, size")
    valid = list(entry.model_sizes)
    if size_owner != name:
        later = "" if size_owner in agents else " (not implemented yet)"
        raise ConfigError(
            f"model_size: the chosen preset (size {size!r}) belongs to agent={size_owner}"
            f"{later}, not agent={name}; choose model_size= one of: {_options(valid)}"
        )
    values = list(entry.model_sizes.values())
    if size not in values:
        raise ConfigError(
            f"model_size.size: {size!r} is not a {name} preset; "
            f"choose model_size= one of: {_options(valid)}"
        )
    extra = {"model_size": size}
    hints = typing.get_type_hints(entry.config_cls)
    if "eval_episodes" in hints:
        extra["eval_episodes"] = protocol.eval_episodes
    config = build_dataclass(
        entry.config_cls, section, "agent", skip=entry.launcher_fields, extra=extra
    )
    _check_bounds(config, entry)
    return name, config


def _check_bounds(config: Any, entry: AgentEntry) -> None:
    """The agent's declared value ranges (inclusive); None values are derived later."""
    for name, (low, high) in entry.bounds.items():
        value = getattr(config, name, None)
        if value is None:
            continue
        if (low is not None and value < low) or (high is not None and value > high):
            lo = "-inf" if low is None else low
            hi = "inf" if high is None else high
            raise ConfigError(f"agent.{name}: {value!r} is outside the valid range [{lo}, {hi}]")


def _resolve_protocol(cfg: Mapping[str, Any]) -> Protocol:
    p = build_dataclass(Protocol, _section(cfg, "protocol"), "protocol")
    if not p.seeds:
        raise ConfigError("protocol.seeds: expected a non-empty list of ints, e.g. [0, 1, 2]")
    if len(set(p.seeds)) != len(p.seeds):
        raise ConfigError(f"protocol.seeds: seeds must be distinct, got {list(p.seeds)}")
    for s in p.seeds:
        if not 0 <= s < 2**31:
            raise ConfigError(f"protocol.seeds: seeds must be in [0, 2**31), got {s}")
    for key in ("n_timesteps", "log_frequency", "eval_episodes", "keep_checkpoints"):
        if getattr(p, key) < 1:
            raise ConfigError(f"protocol.{key}: must be an int >= 1, got {getattr(p, key)}")
    if p.log_frequency > p.n_timesteps:
        raise ConfigError(
            f"protocol.log_frequency: {p.log_frequency} exceeds protocol.n_timesteps="
            f"{p.n_timesteps}; use a value <= n_timesteps"
        )
    for key in ("eval_frequency", "checkpoint_frequency"):
        value = getattr(p, key)
        if value < 0:
            raise ConfigError(f"protocol.{key}: must be an int >= 0, got {value}")
        if value % p.log_frequency:
            raise ConfigError(
                f"protocol.{key}: {value} is not a multiple of protocol.log_frequency="
                f"{p.log_frequency} (evaluations and checkpoints happen between chunks)"
            )
    return p


def _resolve_env(cfg: Mapping[str, Any]) -> EnvSpecConfig:
    env = build_dataclass(EnvSpecConfig, _section(cfg, "env"), "env")
    if env.action_repeat < 1:
        raise ConfigError(f"env.action_repeat: must be an int >= 1, got {env.action_repeat}")
    if env.episode_length is not None and env.episode_length < 1:
        raise ConfigError(
            f"env.episode_length: must be an int >= 1 or null, got {env.episode_length}"
        )
    return env


def _resolve_logger(cfg: Mapping[str, Any]) -> LoggerSpec:
    logger = build_dataclass(LoggerSpec, _section(cfg, "logger"), "logger")
    if logger.mode not in LOGGER_MODES:
        raise ConfigError(
            f"logger.mode: {logger.mode!r} is not a W&B mode; "
            f"{_close(logger.mode, LOGGER_MODES)}choose one of: {_options(LOGGER_MODES)}"
        )
    if not logger.project:
        raise ConfigError("logger.project: must be a non-empty string")
    return logger


def _resolve_callbacks(cfg: Mapping[str, Any]) -> CallbackSpec:
    section = cfg.get("callbacks") or {}
    if not isinstance(section, Mapping):
        raise ConfigError(f"callbacks: expected a mapping phase -> list, got {_describe(section)}")
    for phase in section:
        if phase not in CALLBACK_PHASES:
            raise ConfigError(
                f"callbacks.{phase}: unsupported callback phase; {_close(phase, CALLBACK_PHASES)}"
                f"supported phases: {_options(CALLBACK_PHASES)}"
            )
    spec = build_dataclass(CallbackSpec, section, "callbacks")
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
    section = {k: cfg[k] for k in ("resume", "stop_after_chunks") if k in cfg}
    control = build_dataclass(RunControl, section, "run control")
    if control.resume not in RESUME_MODES:
        raise ConfigError(
            f"resume: {control.resume!r} is not a resume mode; choose one of: "
            f"{_options(RESUME_MODES)} (e.g. +resume=force)"
        )
    if control.stop_after_chunks is not None and control.stop_after_chunks < 1:
        raise ConfigError(
            f"stop_after_chunks: must be an int >= 1, got {control.stop_after_chunks}"
        )
    return control


def resolve(cfg: Mapping[str, Any], agents: Mapping[str, AgentEntry] = AGENTS) -> RunSpec:
    """Validate a composed config (a plain mapping, interpolations resolved) into a RunSpec.

    Args:
      cfg: ``OmegaConf.to_container(composed, resolve=True)`` of the job config.
      agents: the agent registry (tests pass their own).

    Raises:
      ConfigError: naming the key and its valid values.
    """
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"config: expected a mapping, got {_describe(cfg)}")
    for key in cfg:
        if key not in TOP_LEVEL:
            raise ConfigError(
                f"{key}: unknown top-level key; {_close(key, TOP_LEVEL)}"
                f"valid keys: {_options(TOP_LEVEL)}"
            )
    protocol = _resolve_protocol(cfg)
    name, agent = _resolve_agent(cfg, protocol, agents)
    return RunSpec(
        agent_name=name,
        agent=agent,
        env=_resolve_env(cfg),
        protocol=protocol,
        logger=_resolve_logger(cfg),
        callbacks=_resolve_callbacks(cfg),
        control=_resolve_control(cfg),
        config=_plain(cfg),
    )


# ------------------------------------------------------------- identity and hashes
def _plain(value: Any) -> Any:
    """JSON-ready copy: tuples -> lists, mappings -> dicts with str keys."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def identity(spec: RunSpec) -> dict[str, Any]:
    """Everything that determines a run's results, as plain JSON data."""
    return _plain(
        {
            "agent": {"name": spec.agent_name, **dataclasses.asdict(spec.agent)},
            "env": dataclasses.asdict(spec.env),
            "protocol": dataclasses.asdict(spec.protocol),
            "callbacks": dataclasses.asdict(spec.callbacks),
        }
    )


def canonical_json(data: Any) -> str:
    """Deterministic JSON (sorted keys, no whitespace) of plain data."""
    return json.dumps(_plain(data), sort_keys=True, separators=(",", ":"))


def config_hash(ident: Mapping[str, Any]) -> str:
    """10 hex digits of the SHA-256 of :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(ident).encode()).hexdigest()[:10]


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> ``{"a.b.c": leaf}``."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{path}."))
        else:
            out[path] = value
    return out


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """The dotted keys whose values differ: ``[(key, old, new)]``, sorted by key."""
    a, b = flatten(_plain(old)), flatten(_plain(new))
    missing = object()
    keys = sorted(set(a) | set(b))
    out = []
    for key in keys:
        va, vb = a.get(key, missing), b.get(key, missing)
        if va != vb:
            out.append((key, None if va is missing else va, None if vb is missing else vb))
    return out
