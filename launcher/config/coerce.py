"""The wording of config errors: did-you-mean, listings, misplaced keys, list fixes.

Keys and types are checked by OmegaConf against the config dataclasses
(:mod:`launcher.config.structured`); these helpers word its errors and the launcher's own.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from launcher.errors import ConfigError


def close_matches(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), list(options), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(close)}? " if close else ""


def listing(items: Iterable[Any]) -> str:
    return ", ".join(str(o) for o in items)


def describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def as_list(key: str, value: Any) -> str:
    """The fix for a scalar given where a list is expected (``protocol.seeds=3``)."""
    if value is None or isinstance(value, Mapping):
        return ""
    text = f"; write a list, e.g. {key}=[{value}]"
    if key.endswith("seeds") and isinstance(value, int) and 1 < value <= 10:
        text += f" for seed {value} alone, or {key}=[{','.join(map(str, range(value)))}]"
        text += f" for {value} seeds"
    return text


# Keys people type for what lives elsewhere -> where it lives.
KEY_HINTS = {
    "seed": "protocol.seeds (a list, e.g. protocol.seeds=[1])",
    "seeds": "protocol.seeds (e.g. protocol.seeds=[1,2,3])",
    "steps": "protocol.n_timesteps",
    "n_timesteps": "protocol.n_timesteps",
    "total_steps": "protocol.n_timesteps",
    "eval_episodes": "protocol.eval_episodes",
    "action_repeat": "env.action_repeat",
    "task": "env=<id> (e.g. env=walker_walk)",
    "run_dir": "hydra.run.dir=PATH",
}


def key_hint(key: str, more: Mapping[str, str] | None = None) -> str:
    """``"; it is protocol.seeds ..."`` for a known misplaced key (top-level or under
    another section: ``agent.eval_episodes``), else ``""``. ``more``: further hints (the
    outputs', :func:`launcher.logger.loggers.key_hints`)."""
    hints = {**KEY_HINTS, **(more or {})}
    hint = hints.get(key) or hints.get(key.rpartition(".")[2])
    return f"; it is {hint}" if hint and hint.split()[0] != key else ""


def section(cfg: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = cfg.get(key)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected a mapping of keys, got {describe(value)}")
    return value


def owner(field: str) -> str:
    """Who sets a config field the user may not set (for the unknown-key message)."""
    return {
        "model_size": "choose it with model_size=<option>",
        "eval_episodes": "protocol.eval_episodes",
    }.get(field, "not configurable")
