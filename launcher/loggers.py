"""The run's external loggers behind one face: W&B (:mod:`launcher.wandb_logger`) and
TensorBoard (:mod:`launcher.tensorboard_logger`), one run of each per seed.

The run loop hands every chunk's rows to :meth:`RunLoggers.record`: TensorBoard writes them
at once (a resumed launch purges what its checkpoint rolled back), W&B holds them until
:meth:`RunLoggers.commit`, called once the checkpoint covering them is saved, so W&B never
gets a row that a resume rolls back. The reference rows (the ``reference_rows`` hooks'
rows, :mod:`launcher.callbacks`: by default the agent's paper curve, cut at the run's own
end) go to both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from launcher.carry import carried_files
from launcher.rundir import RunDir, read_metrics
from launcher.schema import RunSpec
from launcher.tensorboard_logger import TensorBoardRuns
from launcher.wandb_logger import WandbRuns, top_up


def kept_rows(rd: RunDir, seeds: Sequence[int]) -> list[list[dict[str, Any]]]:
    """Each seed's metric rows on disk (empty where a seed has none yet)."""
    return [read_metrics(f) if f.exists() else [] for f in map(rd.metrics_file, seeds)]


class RunLoggers:
    """W&B and TensorBoard for one launch (module docstring)."""

    def __init__(
        self,
        spec: RunSpec,
        seeds: Sequence[int],
        wandb_ids: Mapping[int, str],
        rd: RunDir,
        reference: Sequence[Mapping[str, Any]] = (),
    ):
        """Start (or resume) the W&B runs; raises ConfigError when W&B cannot start, before
        anything is written to the run directory. ``reference``: the rows of the
        ``reference_rows`` hooks (logged once per run, beside the seeds' rows)."""
        self.spec, self.seeds, self.rd = spec, list(seeds), rd
        self.reference = [dict(r) for r in reference]
        self.wb = WandbRuns(spec.logger, spec.run_name, seeds, wandb_ids, spec.config, rd.path)
        self.tb: TensorBoardRuns | None = None

    def open(self, resumed_at: int | None) -> None:
        """Open the TensorBoard files (``resumed_at``: the restored checkpoint's timestep, or
        None for a fresh run) and give each logger the rows it lacks: the reference rows,
        and on W&B the rows of earlier launches that its logs do not hold."""
        files = [self.rd.metrics_file(s) for s in self.seeds]
        self.tb = TensorBoardRuns(self.spec.logger, self.seeds, self.rd.path, resumed_at, files)
        reference = self.reference
        self.wb.log_reference(reference)
        self.wb.catch_up(kept_rows(self.rd, self.seeds))
        if resumed_at is None:  # TensorBoard's reference run is written once
            self.tb.log_reference(reference)

    def record(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """One row per seed: TensorBoard now, W&B at the next :meth:`commit`."""
        self.wb.stage(rows)
        if self.tb is not None:
            self.tb.log(rows)

    def commit(self, step: int) -> None:
        """Checkpoint ``step`` was saved: W&B gets the rows it covers, then (with
        ``logger.checkpoint_artifact``) the checkpoint as an artifact (:mod:`launcher.carry`)."""
        self.wb.commit()
        if self.spec.logger.checkpoint_artifact:
            files = carried_files(self.rd, step)
            self.wb.log_checkpoint(self.spec.run_name, step, files)

    def offline_dirs(self) -> list[str]:
        return self.wb.offline_dirs()

    def finish(self) -> None:
        self.wb.finish()
        if self.tb is not None:
            self.tb.finish()


def finish_complete(
    spec: RunSpec,
    rd: RunDir,
    kept: Sequence[Sequence[Mapping[str, Any]]],
    reference: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """A finished run's relaunch: W&B gets only the rows its logs lack (a kill after the
    final checkpoint; ``reference``: the reference rows, as for :class:`RunLoggers`);
    returns the offline directories written."""
    seeds, ids = list(spec.protocol.seeds), rd.read_wandb_ids()
    ref = [dict(r) for r in reference]
    return top_up(spec.logger, spec.run_name, seeds, ids, spec.config, rd.path, ref, kept)
