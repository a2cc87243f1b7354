"""The config dataclasses as Hydra structured configs: schemas in Hydra's ConfigStore.

Defaults live once, in the dataclasses (:mod:`launcher.config.schema`, each agent's
``AgentEntry.config_cls``); ``conf/`` holds presets and overrides only. ``conf/config.yaml``
puts one schema node under each section before its YAML (``schema/protocol@protocol``,
..., ``optional schema/agent@agent: ${agent}``), so Hydra types every value, refuses
unknown keys and fills the defaults (``--cfg job`` prints them all).

A schema node is an *unfrozen* copy of its dataclass (:func:`schema_of`): a node made
from a frozen dataclass is read-only and no override could set it. The launcher still
builds the frozen dataclasses at the end (:func:`launcher.config.validate.resolve`).

The agent's node (``schema/agent/<option>``) is made from the entry its YAML names
(``entry: package.module:ENTRY``), so the launcher names no agent: it is the entry's
``config_cls`` without ``AgentEntry.launcher_fields`` (set by the launcher: the model-size
preset, ``eval_episodes``), after the YAML-only keys ``name`` and ``entry``.

OmegaConf types every hint the configs use (``int``, ``float``, ``bool``, ``str``,
``X | None``, ``tuple[X, ...]``, ``tuple[X, X]``; tuples become lists in the node);
``Any`` is left untyped (``model_size.size``: an int or a string, as the agent's presets
define). Its int fields refuse floats, so an integral float on the command line (``1e6``)
is given to Hydra as the int it equals (:func:`launcher.config.compose.normalize`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import math
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from launcher.config.coerce import as_list, close_matches, describe, key_hint, listing, owner
from launcher.config.env_listing import env_options
from launcher.errors import ConfigError

GROUP = "schema"
# Keys of the agent's node that its YAML sets and no field holds.
AGENT_KEYS = ("name", "entry")


def schema_of(cls: type, drop: Iterable[str] = (), head: Iterable[str] = ()) -> type:
    """An unfrozen dataclass with ``cls``'s init fields (less ``drop``), types and
    defaults, after required ``str`` fields named ``head``; one class per arguments."""
    return _schema(cls, tuple(drop), tuple(head))


@functools.cache
def _schema(cls: type, drop: tuple[str, ...], head: tuple[str, ...]) -> type:
    from omegaconf import MISSING

    hints = typing.get_type_hints(cls)
    specs: list[tuple[str, Any, Any]] = [(n, str, dataclasses.field(default=MISSING)) for n in head]
    for f in dataclasses.fields(cls):
        if not f.init or f.name in drop:
            continue
        if f.default is not dataclasses.MISSING:
            default = dataclasses.field(default=f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = dataclasses.field(default_factory=f.default_factory)
        else:
            default = dataclasses.field(default=MISSING)
        specs.append((f.name, hints[f.name], default))
    # Named by what builds it and kept on this module, so that a composed config pickles
    # (Hydra's submitit launcher sends the ConfigStore and the config to its jobs) and a
    # fresh process unpickles it by rebuilding the class (:func:`__getattr__`).
    key = json.dumps([cls.__module__, cls.__qualname__, list(drop), list(head)])
    name = f"{_PICKLED}{key.encode().hex()}"
    schema = dataclasses.make_dataclass(name, specs)
    schema.__module__ = __name__
    globals()[name] = schema
    return schema


_PICKLED = "Schema_"


def __getattr__(name: str) -> type:
    """A schema class named by :func:`schema_of`, rebuilt (unpickling in a new process)."""
    if not name.startswith(_PICKLED):
        raise AttributeError(name)
    module, qualname, drop, head = json.loads(bytes.fromhex(name.removeprefix(_PICKLED)))
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    return schema_of(cls, tuple(drop), tuple(head))


def agent_schema(entry: Any) -> type:
    """The schema of an agent's section: ``name``, ``entry``, then the config's fields
    that the user may set."""
    return schema_of(entry.config_cls, tuple(entry.launcher_fields), AGENT_KEYS)


def store_sections() -> None:
    """Store the launcher's own section schemas and the ``env`` group's options
    (idempotent)."""
    from hydra.core.config_store import ConfigStore

    from launcher.config.schema import SECTIONS

    store = ConfigStore.instance()
    for name, cls in SECTIONS.items():
        store.store(group=GROUP, name=name, node=schema_of(cls))
    store_envs()


def store_envs() -> None:
    """Store :func:`launcher.config.env_listing.env_options` (no jax where the registry is not
    loaded) as Hydra's ``env`` group, once per process (the
    ``env/default/<protocol>.yaml`` files of ``conf/`` name them like YAML options)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    try:
        stored = {n.removesuffix(".yaml") for n in store.list("env")}
    except OSError:  # nothing stored yet
        stored = set()
    for name, node in env_options().items():
        if name not in stored:
            store.store(group="env", name=name, node=node)


def store_agent(option: str, entry: Any) -> None:
    """Store ``schema/agent/<option>``: the schema of ``conf/agent/<option>.yaml``."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(group=f"{GROUP}/agent", name=option, node=agent_schema(entry))


def stored_agents() -> set[str]:
    """The agent options whose schema is stored."""
    from hydra.core.config_store import ConfigStore

    try:
        return {n.removesuffix(".yaml") for n in ConfigStore.instance().list(f"{GROUP}/agent")}
    except OSError:  # nothing stored yet
        return set()


def build_dataclass(
    cls: type,
    data: Mapping[str, Any],
    prefix: str,
    *,
    skip: Iterable[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> Any:
    """``cls(**data)``, checked first the way Hydra checks a composed config: ``data``
    merged onto the schema of ``cls`` (less ``skip``) by OmegaConf (unknown keys, types,
    missing values; :func:`message`), then every value against its field's bound
    (:func:`agent_api.rules.bounded`), then ``cls``'s own cross-field rules (a ValueError
    of ``__post_init__``: ``"<prefix>: <message>"``). Run-control keys have no section:
    ``prefix=""``.

    Args:
      cls: a dataclass.
      data: the config mapping for it (plain or a DictConfig).
      prefix: the section's dotted key, for messages (``agent``).
      skip: fields that may not be set from ``data`` (set by ``extra`` instead).
      extra: values for fields that do not come from ``data``.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from agent_api.rules import field_bounds

    skip = tuple(skip)
    schema = schema_of(cls, skip)
    for key in data:  # a launcher-set field is named as such (not just "unknown")
        if key in skip:
            raise ConfigError(
                f"{_dotted(prefix, key)}: unknown key (set by the launcher: {owner(key)})"
            )
    try:
        node = OmegaConf.merge(OmegaConf.structured(schema), data)
        values = OmegaConf.to_container(node, throw_on_missing=True)
    except OmegaConfBaseException as err:
        raise ConfigError(message(err, prefix)) from None
    hints = typing.get_type_hints(schema)
    kwargs = {k: _tuples(v, hints[k]) for k, v in values.items()}
    for key, value in kwargs.items():  # OmegaConf takes nan / inf for a float field
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{_dotted(prefix, key)}: expected a finite float, got {value!r}")
    kwargs.update(extra or {})
    bounds = field_bounds(cls)  # declared on the fields (agent_api.rules.bounded)
    for key, value in kwargs.items():
        problem = bounds[key].problem(value) if key in bounds else None
        if problem:
            raise ConfigError(f"{_dotted(prefix, key)}: {problem}")
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{prefix or cls.__name__}: {err}") from None


def _dotted(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _tuples(value: Any, hint: Any) -> Any:
    """A list for a tuple field (OmegaConf's lists) as the tuple the frozen config holds."""
    if isinstance(value, list) and (
        typing.get_origin(hint) is tuple
        or any(typing.get_origin(a) is tuple for a in typing.get_args(hint))
    ):
        return tuple(value)
    return value


# ---------------------------------------------------------------- error messages
def type_name(hint: Any) -> str:
    """``int``, ``int or null``, ``a list of int`` of a type hint."""
    args = typing.get_args(hint)
    if type(None) in args:
        return " or ".join("null" if a is type(None) else type_name(a) for a in args)
    if typing.get_origin(hint) is tuple:
        return f"a list of {type_name(args[0])}"
    return getattr(hint, "__name__", str(hint))


def message(err: BaseException, prefix: str = "") -> str:
    """One line for an OmegaConf error (or a Hydra one whose cause is one): an unknown key
    with the valid keys and a did-you-mean; a wrong type with the expected one."""
    from omegaconf import Node, OmegaConf
    from omegaconf.errors import (
        ConfigAttributeError,
        ConfigKeyError,
        MissingMandatoryValue,
        ValidationError,
    )

    known = ConfigKeyError | ConfigAttributeError | ValidationError | MissingMandatoryValue
    cause = err
    while not isinstance(cause, known):
        if cause.__cause__ is None:
            return hydra_message(err)
        cause = cause.__cause__
    key = str(getattr(cause, "full_key", "") or getattr(cause, "key", "") or "")
    key = _dotted(prefix, key) if key else prefix
    parent = getattr(cause, "object_type", None)
    fields = (
        [f.name for f in dataclasses.fields(parent) if f.name not in AGENT_KEYS]
        if dataclasses.is_dataclass(parent)
        else []
    )
    if isinstance(cause, MissingMandatoryValue):
        return f"{key}: missing (the config names no value); set {key}=..."
    leaf = key.rpartition(".")[2]
    if isinstance(cause, ConfigKeyError | ConfigAttributeError) and leaf not in fields:
        return (
            f"{key}: unknown key{_key_hint(key)}; {close_matches(leaf, fields)}"
            f"valid keys: {listing(fields)}"
        )
    if isinstance(getattr(cause, "key", None), int):  # a list element: the list's item type
        items = [a for a in typing.get_args(getattr(cause, "ref_type", None)) if a is not ...]
        hint = items[0] if items else None
    elif dataclasses.is_dataclass(parent):
        hint = typing.get_type_hints(parent).get(leaf)
    else:
        hint = None
    value = getattr(cause, "value", None)  # ValidationError: the value it refused
    if isinstance(value, Node):  # a merge refuses a node: its plain value (public API)
        value = OmegaConf.to_container(OmegaConf.create({"v": value}))["v"]
    if hint is None:
        return hydra_message(err)
    fix = ""
    if typing.get_origin(hint) is tuple and not isinstance(value, list | tuple | dict):
        fix = as_list(key, value)
    return f"{key}: expected {type_name(hint)}, got {describe(value)}{fix}"


def _key_hint(key: str) -> str:
    """:func:`key_hint` with the outputs' own misplaced keys (imported on an error only)."""
    from launcher.logger import loggers

    return key_hint(key, loggers.key_hints())


def hydra_message(err: BaseException) -> str:
    """The first meaningful line of a Hydra / OmegaConf error (and of its cause)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    text = lines[0] if lines else type(err).__name__
    cause = err.__cause__
    if cause is not None and str(cause).strip():
        first = str(cause).strip().splitlines()[0]
        if first not in text:
            text = f"{text}: {first}"
    return text
