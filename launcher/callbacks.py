"""User hooks at the three supported phases (design §5.7), configured by import path.

    callbacks:
      pretrain: ["my_pkg.hooks:warm_start"]     # (state, spec) -> state | None
      post_update: ["my_pkg.hooks:grad_stats"]  # (metrics, chunk) -> dict | None
      eval_metrics: ["my_pkg.hooks:success"]    # (metrics, chunk) -> dict | None

* ``pretrain`` runs once on the freshly initialised, seed-batched state (not on a
  resume: the checkpoint already holds its effect) and may return a replacement state.
* ``post_update`` runs on the host after every train chunk with that chunk's per-seed
  metrics (numpy arrays with a leading seed axis) and the chunk number.
* ``eval_metrics`` runs after every evaluation, likewise.

Dicts returned by the metric hooks are merged into what is logged. The agents' own
update loops are closed (pure jitted scans): ``post_update`` sees the chunk's metrics
after its updates, not each update. Any other phase is refused when the callbacks are
constructed, naming the supported ones.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from launcher.errors import ConfigError
from launcher.schema import CALLBACK_PHASES, CallbackSpec


def load_callable(path: str, where: str) -> Callable[..., Any]:
    """Import ``package.module:attr`` (or ``package.module.attr``); ConfigError if absent."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"{where}: cannot import {module_name!r} ({err})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"{where}: {module_name!r} has no callable {attr!r}")
    return fn


@dataclasses.dataclass(frozen=True)
class Callbacks:
    """The imported hooks, per phase, in configuration order."""

    pretrain: tuple[Callable[..., Any], ...] = ()
    post_update: tuple[Callable[..., Any], ...] = ()
    eval_metrics: tuple[Callable[..., Any], ...] = ()

    @classmethod
    def build(cls, hooks: CallbackSpec | Mapping[str, Sequence[str]]) -> Callbacks:
        """Import the hooks; refuse unknown phases and unimportable paths (ConfigError)."""
        if isinstance(hooks, CallbackSpec):
            hooks = dataclasses.asdict(hooks)
        loaded: dict[str, tuple[Callable[..., Any], ...]] = {}
        for phase, paths in hooks.items():
            if phase not in CALLBACK_PHASES:
                raise ConfigError(
                    f"callbacks.{phase}: unsupported callback phase; supported phases: "
                    f"{', '.join(CALLBACK_PHASES)}"
                )
            loaded[phase] = tuple(
                load_callable(p, f"callbacks.{phase}[{i}]") for i, p in enumerate(paths)
            )
        return cls(**loaded)

    def run_pretrain(self, state: Any, spec: Any) -> Any:
        for fn in self.pretrain:
            out = fn(state, spec)
            state = state if out is None else out
        return state

    @staticmethod
    def _metrics(fns: Sequence[Callable[..., Any]], metrics: dict, chunk: int) -> dict:
        for fn in fns:
            extra = fn(dict(metrics), chunk)
            if extra:
                metrics = {**metrics, **extra}
        return metrics

    def run_post_update(self, metrics: dict, chunk: int) -> dict:
        return self._metrics(self.post_update, metrics, chunk)

    def run_eval_metrics(self, metrics: dict, chunk: int) -> dict:
        return self._metrics(self.eval_metrics, metrics, chunk)
