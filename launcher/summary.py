"""What a launch did (:class:`RunResult`) and the lines ``python -m launcher`` prints."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from launcher.schema import RunSpec

RETURN_KEYS = (("train", "Train/episodic mean reward"), ("eval", "Eval/episodic mean reward"))


@dataclasses.dataclass
class RunResult:
    """What a launch did and where its outputs are.

    ``already_complete``: the run directory held a finished run; nothing was trained,
    logged or written (its final rows come from the metrics files).
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
    wandb_dirs: list[str]
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
    if result.wandb_dirs:
        lines.append(f"W&B {spec.logger.mode}:  {', '.join(result.wandb_dirs)}")
        if spec.logger.mode == "offline":
            lines.append(
                f"              upload: wandb sync {result.run_dir / 'wandb'}/offline-run-*"
            )
    for name, key in RETURN_KEYS:
        rows = result.final_train if name == "train" else result.final_eval
        values = [r.get(key) for r in rows]
        if any(v is not None for v in values):
            shown = ", ".join(
                f"seed {s}: {v:.1f}" if v is not None else f"seed {s}: n/a"
                for s, v in zip(spec.protocol.seeds, values, strict=False)
            )
            lines.append(f"final {name}:  {shown}")
    return "\n".join(lines)
