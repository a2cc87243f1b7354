"""The ``wandb`` output (:mod:`launcher.logger.loggers`): the per-seed W&B runs of
:mod:`launcher.logger.wandb_logger` driven by the output protocol.

Its run ids are kept in ``wandb_ids.json`` and in each checkpoint's metadata
(``wandb_ids``), so every launch of a run continues the same W&B runs. ``write`` stages a
chunk's rows and ``flush`` (its checkpoint saved) logs them, so W&B never holds a row that
a resume rolls back; ``open`` logs the kept rows W&B's logs lack (a kill between the
checkpoint and W&B's write), and ``top_up`` does so for a finished run's relaunch. With
``logger.checkpoint_artifact`` each flush also logs the checkpoint (:mod:`launcher.logger.carry`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from launcher.logger.carry import carried_files
from launcher.logger.loggers import OutputContext, Start
from launcher.logger.wandb_logger import WandbRuns, top_up
from launcher.store.rundir import RunDir


class WandbOutput:
    """The ``wandb`` output (:mod:`launcher.logger.loggers`): :class:`WandbRuns` with the run ids
    kept in ``wandb_ids.json`` and each checkpoint's metadata (``wandb_ids``)."""

    def __init__(self, ctx: OutputContext) -> None:
        """Start the runs (ConfigError if W&B cannot start: nothing written)."""
        self.ctx, spec, rd = ctx, ctx.spec, RunDir(ctx.run_dir)
        meta = ctx.resumed_meta or {}
        if "wandb_ids" in meta:  # the restored checkpoint's
            self.ids = {int(k): v for k, v in meta["wandb_ids"].items()}
        else:  # a fresh run (a launch killed before its first checkpoint kept the file)
            self.ids = rd.read_wandb_ids() or WandbRuns.new_ids(ctx.seeds, spec.logger.mode)
        self.runs = WandbRuns(spec.logger, spec.run_name, ctx.seeds, self.ids, spec.config, rd.path)

    def open(self, start: Start) -> None:
        """Keep the ids; log the reference rows and the kept rows W&B's logs lack."""
        RunDir(self.ctx.run_dir).write_wandb_ids(self.ids)
        self.runs.log_reference(start.reference)
        self.runs.catch_up(start.kept)

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.runs.stage(rows)  # logged at the flush: rows a resume rolls back never reach W&B

    def flush(self, step: int) -> None:
        """Log the staged rows, then (``logger.checkpoint_artifact``) the checkpoint."""
        self.runs.commit()
        spec = self.ctx.spec
        if spec.logger.checkpoint_artifact:
            files = carried_files(RunDir(self.ctx.run_dir), step)
            self.runs.log_checkpoint(spec.run_name, step, files)

    def finish(self) -> None:
        self.runs.finish()

    def meta(self) -> dict[str, Any]:
        return {"wandb_ids": {str(k): v for k, v in self.ids.items()}}

    def upload_dirs(self) -> list[str]:
        return self.runs.offline_dirs()

    @classmethod
    def top_up(cls, ctx: OutputContext, start: Start) -> list[str]:
        spec, rd = ctx.spec, RunDir(ctx.run_dir)
        ids, reference = rd.read_wandb_ids(), [dict(r) for r in start.reference]
        args = (spec.logger, spec.run_name, list(ctx.seeds), ids, spec.config, rd.path)
        return top_up(*args, reference, start.kept)
