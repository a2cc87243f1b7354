"""A run's identity, its hash and its name; diffs between two configs.

The *identity* of a run is everything that determines its results: agent, model size,
env, protocol and callbacks (but the output-only phases, :data:`OUTPUT_PHASES`, and the
fields declared added later while at their default, :func:`added_at_default`). The
logger and the run-control keys are not part of it.
Two forms exist, each for one job:

* :func:`composed_hash` / :func:`run_name` read the *composed* mapping (Hydra's output,
  before validation). The run directory is named from it inside Hydra's interpolation
  (``${launcher_run_name:}``), which must be cheap and never fail, so nothing is
  validated there; the job resolves its config once, afterwards.
* :func:`identity` reads a validated :class:`launcher.config.schema.RunSpec` (presets folded in,
  defaults filled); ``run.json`` stores it and a relaunch is diffed against it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from agent_api import load
from agent_api.rules import added_defaults

IDENTITY_SECTIONS = ("agent", "model_size", "env", "protocol", "callbacks")
# Callback phases that only add what is logged or written beside a run (the paper's
# curve, the learning-curve figure; launcher.loop.callbacks): left out of the identity.
OUTPUT_PHASES = ("reference_rows", "run_end")


def added_at_default(classes: Mapping[str, Any]) -> dict[tuple[str, str], Any]:
    """``(section, key) -> default`` of the fields that ``classes`` (section -> its config
    dataclass) declare added after runs were launched without them
    (:func:`agent_api.rules.added_later`): at that value a key is left out of the identity,
    so an older run keeps its name and hash and resumes without a config diff; any other
    value is part of it. (Hydra has no notion of a schema version: ours.)"""
    out = {}
    for section, cls in classes.items():
        if isinstance(cls, type) and dataclasses.is_dataclass(cls):
            for key, default in added_defaults(cls).items():
                out[(section, key)] = plain(default)
    return out


def without_added_defaults(ident: Mapping[str, Any], classes: Mapping[str, Any]) -> dict[str, Any]:
    """``ident`` without the keys :func:`added_at_default` names that hold their default."""
    out = dict(ident)
    for (section, key), default in added_at_default(classes).items():
        fields = out.get(section)
        if isinstance(fields, Mapping) and key in fields and plain(fields[key]) == default:
            out[section] = {k: v for k, v in fields.items() if k != key}
    return out


def agent_class(cfg: Mapping[str, Any]) -> type | None:
    """The config dataclass of the agent a composed config names (its entry's), or None
    when its entry does not load (the job refuses it; a run name must never fail)."""
    agent = cfg.get("agent")
    path = agent.get("entry") if isinstance(agent, Mapping) else None
    if not isinstance(path, str):
        return None
    try:
        return getattr(load(path), "config_cls", None)
    except Exception:  # noqa: BLE001 - any failure: the launch is refused later, by resolve
        return None


def plain(value: Any) -> Any:
    """JSON-ready copy: tuples -> lists, mappings -> dicts with str keys."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def identity(spec: Any) -> dict[str, Any]:
    """Everything that determines a run's results, as plain JSON data."""
    ident = {
        "agent": {"name": spec.agent_name, **dataclasses.asdict(spec.agent)},
        "env": dataclasses.asdict(spec.env),
        "protocol": dataclasses.asdict(spec.protocol),
        "callbacks": training_hooks(dataclasses.asdict(spec.callbacks)),
    }
    classes = {section: type(getattr(spec, section)) for section in ident}
    return plain(without_added_defaults(ident, classes))


def training_hooks(callbacks: Any) -> Any:
    """A ``callbacks`` section without its :data:`OUTPUT_PHASES` (anything else unchanged)."""
    if not isinstance(callbacks, Mapping):
        return callbacks
    return {k: v for k, v in callbacks.items() if k not in OUTPUT_PHASES}


def canonical_json(data: Any) -> str:
    """Deterministic JSON (sorted keys, no whitespace) of plain data."""
    return json.dumps(plain(data), sort_keys=True, separators=(",", ":"))


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
    a, b = flatten(plain(old)), flatten(plain(new))
    missing = object()
    keys = sorted(set(a) | set(b))
    out = []
    for key in keys:
        va, vb = a.get(key, missing), b.get(key, missing)
        if va != vb:
            out.append((key, None if va is missing else va, None if vb is missing else vb))
    return out


def composed_identity(cfg: Mapping[str, Any], classes: Mapping[str, type]) -> dict[str, Any]:
    """The identity sections of a composed config mapping (missing ones left out).
    ``classes``: the launcher's section dataclasses (``launcher.config.schema.SECTIONS``), whose
    fields may be declared added later, as the agent's may (its class: :func:`agent_class`)."""
    out = {k: plain(cfg[k]) for k in IDENTITY_SECTIONS if k in cfg}
    if "callbacks" in out:
        out["callbacks"] = training_hooks(out["callbacks"])
    return without_added_defaults(out, {**classes, "agent": agent_class(cfg)})


def composed_hash(cfg: Mapping[str, Any], classes: Mapping[str, type]) -> str:
    """10 hex digits naming a run from its composed config (no validation); ``classes``:
    :func:`composed_identity`'s."""
    return config_hash(composed_identity(cfg, classes))


def run_name(cfg: Mapping[str, Any], classes: Mapping[str, type]) -> str:
    """``<agent>-<env>-<protocol>-<hash>`` of a composed config (no validation; a
    missing part reads ``unknown``); ``classes``: :func:`composed_identity`'s."""

    def part(section: str, key: str) -> str:
        value = cfg.get(section)
        value = value.get(key) if isinstance(value, Mapping) else None
        return str(value) if value not in (None, "") else "unknown"

    return "-".join(
        [
            part("agent", "name"),
            part("env", "id"),
            part("protocol", "name"),
            composed_hash(cfg, classes),
        ]
    )
