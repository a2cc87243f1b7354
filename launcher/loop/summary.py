"""What a launch did (:class:`RunResult`) and the lines ``python -m launcher`` prints."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from pathlib import Path
from typing import Any

from launcher.config.schema import RunSpec
from launcher.logger import loggers
from launcher.store.rundir import read_metrics

# The labels' column width ("run dir:      "): every value starts in one column.
LABEL = 14
RETURN_KEYS = (("train", "Train/episodic mean reward"), ("eval", "Eval/episodic mean reward"))


@dataclasses.dataclass
class RunResult:
    """What a launch did and where its outputs are.

    ``already_complete``: the run directory held a finished run; nothing was trained,
    logged or written (its final rows come from the metrics files). ``upload_dirs``:
    output name -> the directories it wrote for a later upload (its summary lines).
    """

    run_dir: Path
    spec: RunSpec
    n_chunks: int
    chunks_done: int
    resumed_from: int | None
    stopped_early: bool
    final_train: list[dict[str, Any]]
    final_eval: list[dict[str, Any]]
    metrics_files: list[Path]
    plot: Path | None
    upload_dirs: dict[str, list[str]]
    compiles: dict[str, int]
    n_devices: int
    state: Any = dataclasses.field(repr=False, default=None)
    already_complete: bool = False
    compile_seconds: float = 0.0


def summary(result: RunResult) -> str:
    """The closing lines printed by ``python -m launcher``."""
    spec = result.spec
    if result.already_complete:
        chunks = f"{result.chunks_done}/{result.n_chunks} (already complete; nothing to do)"
    else:
        chunks = (
            f"{result.chunks_done}/{result.n_chunks}"
            + (f" (resumed after chunk {result.resumed_from})" if result.resumed_from else "")
            + (" (stopped early; relaunch to continue)" if result.stopped_early else "")
        )
    lines = [
        f"run dir:      {result.run_dir}",
        f"chunks:       {chunks}",
        f"metrics:      {result.run_dir / 'metrics'} (seed_<s>.jsonl)",
    ]
    if result.compile_seconds:
        lines.append(f"compile:      {result.compile_seconds:.1f} s (not in steps/s)")
    if result.plot is not None:
        lines.append(f"curves:       {result.plot}")
    for label, text in loggers.summary(spec, result.run_dir, result.upload_dirs):
        lines.append(f"{f'{label}:' if label else '':<{LABEL}}{text}")
    if spec.logger.tensorboard and not result.already_complete:
        view = f"tensorboard --logdir {result.run_dir / 'tensorboard'}"
        if not tensorboard_installed():  # the writer is tensorboardX; the viewer is optional
            view = f"pip install tensorboard (not installed here), then {view}"
        lines.append(f"TensorBoard:  {view}")
    for name, key in RETURN_KEYS:
        rows = result.final_train if name == "train" else result.final_eval
        values = [r.get(key) for r in rows]
        if any(v is not None for v in values):
            files = [*result.metrics_files, *[None] * len(values)]
            texts = [_final(v, name, key, f) for v, f in zip(values, files, strict=False)]
            seeds = spec.protocol.seeds
            shown = ", ".join(f"seed {s}: {t}" for s, t in zip(seeds, texts, strict=False))
            lines.append(f"{f'final {name}:':<{LABEL}}{shown}")
    return "\n".join(lines)


def tensorboard_installed() -> bool:
    """Whether the ``tensorboard`` viewer is importable here (it comes with the ``test``
    extra only; the launcher writes event files with tensorboardX)."""
    return importlib.util.find_spec("tensorboard") is not None


def _final(value: Any, kind: str, key: str, metrics_file: Path | None) -> str:
    """A seed's final return; where the last chunk had none (no episode ended in it: NaN),
    the last finite one in its metrics file and its step."""
    if value is not None and math.isfinite(value):
        return f"{value:.1f}"
    last = _last_finite(metrics_file, kind, key) if metrics_file is not None else None
    if last is None:
        return f"n/a (no {kind} episode has ended)"  # an offline run has none
    return f"{last[0]:.1f} at step {last[1]:,} (no episode ended after it)"


def _last_finite(path: Path, kind: str, key: str) -> tuple[float, int] | None:
    if not path.exists():
        return None
    for row in reversed(read_metrics(path)):
        v = row.get(key)
        if row.get("kind") == kind and isinstance(v, int | float) and math.isfinite(v):
            return float(v), int(row.get("timestep", 0))
    return None
