"""Value ranges that live on the config fields, and the rule shared by lockstep-env agents.

A bounded hyperparameter is one edit, in its config dataclass::

    batch_size: int = bounded(16, low=1)
    gamma: float | None = bounded(None, low=0, high=1, high_open=True, why="...")

:func:`bounded` stores a :class:`Bound` in the field's metadata; the launcher reads it
(:func:`field_bounds`) for every section it builds and refuses a value outside it with
one line naming the key. A config's ``__post_init__`` calls :func:`check_bounds` first,
so a config built directly (not through the launcher) is checked as well, and its
cross-field rules may rely on the bounds. A value of None (a default derived later) is
never checked.

A field added after runs were launched without it says so where it is declared::

    q_scale_per_task: bool = added_later(False, since="issue 32, deviation T49")

At its default (the value those runs had implicitly) the launcher leaves it out of a
run's identity (:func:`added_defaults`, read by ``launcher.config.identity``), so older runs keep
their names and hashes and resume; any other value is part of the identity. No JAX here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

BOUNDS_KEY = "bounds"
ADDED_KEY = "added_later"


@dataclasses.dataclass(frozen=True)
class Bound:
    """An interval, inclusive unless ``*_open``; None = unbounded on that side.

    Attributes:
      why: a short reason shown after the range (``"0 never updates"``).
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""

    def contains(self, value: Any) -> bool:
        """Whether ``value`` (a number) lies in the interval."""
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            return False
        return True

    def interval(self) -> str:
        """``[0, 1]``, ``(0, inf]``, ``[0, 1)``."""
        lo = "-inf" if self.low is None else self.low
        hi = "inf" if self.high is None else self.high
        return f"{'(' if self.low_open else '['}{lo}, {hi}{')' if self.high_open else ']'}"

    def problem(self, value: Any) -> str | None:
        """``"2.0 is outside the valid range [0, 1]"`` (plus the reason), or None when
        ``value`` is None or inside."""
        if value is None or self.contains(value):
            return None
        why = f" ({self.why})" if self.why else ""
        return f"{value!r} is outside the valid range {self.interval()}{why}"


def bounded(
    default: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    why: str = "",
) -> Any:
    """A dataclass field with ``default`` and a :class:`Bound` in its metadata."""
    bound = Bound(low, high, low_open, high_open, why)
    return dataclasses.field(default=default, metadata={BOUNDS_KEY: bound})


def field_bounds(cls: type) -> dict[str, Bound]:
    """Field name -> :class:`Bound` of a dataclass (inherited fields included)."""
    return {
        f.name: f.metadata[BOUNDS_KEY] for f in dataclasses.fields(cls) if BOUNDS_KEY in f.metadata
    }


def added_later(default: Any, *, since: str, **bound: Any) -> Any:
    """A dataclass field with ``default``, added to its config after runs were launched
    without it (``since``: the issue or deviation that added it; module docstring).
    ``bound``: the keywords of :func:`bounded`, for a bounded one."""
    metadata: dict[str, Any] = {ADDED_KEY: since}
    if bound:
        metadata[BOUNDS_KEY] = Bound(**bound)
    return dataclasses.field(default=default, metadata=metadata)


def added_defaults(cls: type) -> dict[str, Any]:
    """Field name -> default of the fields of the dataclass ``cls`` declared
    :func:`added_later` (inherited fields included)."""
    return {f.name: f.default for f in dataclasses.fields(cls) if ADDED_KEY in f.metadata}


def check_bounds(config: Any) -> None:
    """Raise ValueError (``"dropout=2.0 is outside ..."``) for the first field of the
    dataclass instance ``config`` outside its bound."""
    for name, bound in field_bounds(type(config)).items():
        problem = bound.problem(getattr(config, name))
        if problem:
            raise ValueError(f"{name}={problem}")


def check_lockstep_envs(n_envs: int, n_timesteps: int) -> None:
    """The run-length rule of an agent that steps ``n_envs`` envs in lockstep (one row
    per env per tick): the run's agent steps must be a multiple of ``n_envs``, else the
    run would take more steps than asked (ValueError naming the launcher keys and the
    fix). A chunk (``protocol.log_frequency``) is rounded up to whole ticks and the last
    one takes the rest, so the frequencies need no such rule."""
    if n_timesteps % n_envs:
        lower = n_timesteps - n_timesteps % n_envs
        upper = lower + n_envs
        fix = f"{lower} or {upper}" if lower else str(upper)
        raise ValueError(
            f"agent.n_envs: protocol.n_timesteps={n_timesteps} is not a multiple of "
            f"agent.n_envs={n_envs} (each tick takes one step of every env: the run would "
            f"take {upper} steps); use protocol.n_timesteps={fix}, or an agent.n_envs that "
            f"divides {n_timesteps}"
        )
