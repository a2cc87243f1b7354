"""Hooks at the supported phases (docs/design.md §11.2), configured by import path.

    callbacks:
      pretrain: ["my_pkg.hooks:warm_start"]     # (state, spec) -> state | None
      post_update: ["my_pkg.hooks:grad_stats"]  # (metrics, chunk) -> dict | None
      eval_metrics: ["my_pkg.hooks:success"]    # (metrics, chunk) -> dict | None
      reference_rows: ["analysis.paper_line:paper_rows"]  # (spec) -> [row, ...] | None
      run_end: ["analysis.report:plot_run"]     # (run_dir) -> Path | None

* ``pretrain`` runs once on the freshly initialised, seed-batched state (not on a
  resume: the checkpoint already holds its effect) and may return a replacement state.
* ``post_update`` runs on the host after every train chunk with that chunk's per-seed
  metrics (numpy arrays with a leading seed axis) and the chunk number.
* ``eval_metrics`` runs after every evaluation, likewise.
* ``reference_rows`` runs once per launch, before the first chunk: the rows it returns (a
  reference curve, each row a ``timestep`` and numbers) are logged to every seed's W&B
  run and to TensorBoard's ``paper/`` run, never to the metrics files. Default: the
  agent's published curve up to the run's end (``analysis.paper_line``).
* ``run_end`` runs after a launch that trained, with the run directory; a returned path
  is the run's figure (printed at the end; the first one wins). A hook that raises is
  logged as a warning: the run is complete anyway. Default: the learning-curve PNG
  (``analysis.report.plot_run``).

``reference_rows`` and ``run_end`` change nothing the run computes: they are not part of
the run's identity (``launcher.config.identity.OUTPUT_PHASES``). They are how the launcher
reaches the analysis package without importing it.

Dicts returned by the metric hooks are merged into what is logged. The agents' own
update loops are closed (pure jitted scans): ``post_update`` sees the chunk's metrics
after its updates, not each update. Any other phase is refused when the callbacks are
constructed, naming the supported ones.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from launcher.config.schema import CALLBACK_PHASES, CallbackSpec
from launcher.errors import ConfigError

log = logging.getLogger(__name__)


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
    reference_rows: tuple[Callable[..., Any], ...] = ()
    run_end: tuple[Callable[..., Any], ...] = ()

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

    def run_reference_rows(self, spec: Any) -> list[dict[str, Any]]:
        """The rows of every ``reference_rows`` hook, in configuration order."""
        rows: list[dict[str, Any]] = []
        for fn in self.reference_rows:
            rows.extend(dict(r) for r in fn(spec) or ())
        return rows

    def run_run_end(self, run_dir: Path) -> Path | None:
        """Run the ``run_end`` hooks; the first path one returns (a hook that raises is
        logged as a warning and skipped)."""
        first = None
        for fn in self.run_end:
            try:
                out = fn(run_dir)
            except Exception as err:  # noqa: BLE001 - output beside a complete run
                log.warning("callbacks.run_end %s failed: %s", getattr(fn, "__name__", fn), err)
                continue
            if first is None and out is not None:
                first = Path(out)
        return first
