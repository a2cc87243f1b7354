"""Plain config mappings -> typed dataclass fields, with messages that name the key.

Every failure is a :class:`launcher.errors.ConfigError` naming the dotted key, what was
expected and (for unknown keys) the closest valid ones.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from agent_api.rules import field_bounds
from launcher.errors import ConfigError


def close_matches(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), list(options), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(close)}? " if close else ""


def listing(items: Iterable[Any]) -> str:
    return ", ".join(str(o) for o in items)


def describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _type_name(hint: Any) -> str:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return " or ".join("null" if a is type(None) else _type_name(a) for a in args)
    if typing.get_origin(hint) is tuple:
        return f"a list of {_type_name(args[0])}"
    return getattr(hint, "__name__", str(hint))


def _as_list(key: str, value: Any) -> str:
    """The fix for a scalar given where a list is expected (``protocol.seeds=3``)."""
    if value is None or isinstance(value, Mapping):
        return ""
    text = f"; write a list, e.g. {key}=[{value}]"
    if key.endswith("seeds") and isinstance(value, int) and 1 < value <= 10:
        text += f" for seed {value} alone, or {key}=[{','.join(map(str, range(value)))}]"
        text += f" for {value} seeds"
    return text


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
        raise ConfigError(f"{key}: expected {_type_name(hint)}, got {describe(value)}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(
                f"{key}: expected {_type_name(hint)}, got {describe(value)}{_as_list(key, value)}"
            )
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
    raise ConfigError(f"{key}: expected {_type_name(hint)}, got {describe(value)}")


def section(cfg: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = cfg.get(key)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected a mapping of keys, got {describe(value)}")
    return value


def build_dataclass(
    cls: type,
    section: Mapping[str, Any],
    prefix: str,
    *,
    skip: Iterable[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> Any:
    """``cls(**section)`` with unknown keys refused, every value type-checked and checked
    against its field's bound (:func:`agent_api.rules.bounded`), before ``cls`` runs its
    own cross-field rules (a ValueError of ``__post_init__``: ``"<prefix>: <message>"``).

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
            hint = close_matches(key, allowed)
            where = f" (set by the launcher: {owner(key)})" if key in fields else ""
            raise ConfigError(
                f"{prefix}.{key}: unknown key{where}; {hint}valid keys: {listing(allowed)}"
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
        raise ConfigError(f"{prefix}: missing key(s) {listing(missing)}")
    kwargs.update(extra or {})
    bounds = field_bounds(cls)  # declared on the fields (agent_api.rules.bounded)
    for key, value in kwargs.items():
        problem = bounds[key].problem(value) if key in bounds else None
        if problem:
            raise ConfigError(f"{prefix}.{key}: {problem}")
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{prefix}: {err}") from None


def owner(field: str) -> str:
    """Who sets a config field the user may not set (for the unknown-key message)."""
    return {
        "model_size": "choose it with model_size=<option>",
        "eval_episodes": "protocol.eval_episodes",
    }.get(field, "not configurable")
