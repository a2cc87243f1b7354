"""TensorBoard, the ``tensorboard`` output (:class:`TensorBoardOutput`,
:mod:`launcher.logger.loggers`): one event-file directory (a TensorBoard run) per seed, the W&B
scalars.

``logger.tensorboard=true`` (or ``tensorboard`` in ``logger.outputs``) writes
``RUN_DIR/tensorboard/seed_<s>/`` with tensorboardX;
the ``logger=tensorboard`` preset turns it on with W&B disabled, and
``logger=offline logger.tensorboard=true`` (or ``online``) gives both. View the runs with
``tensorboard --logdir RUN_DIR/tensorboard`` (the ``tensorboard`` package).

Scalars and step: every number of the rows W&B gets (the metrics files' rows less
``chunk`` and ``kind``), tagged by its metric name, at step = the row's ``timestep``
(agent env steps, W&B's x-axis). ``timestep`` itself is the step, not a scalar; list
values (``Eval/episode returns``) stay in the metrics files. The paper's curve, which
W&B draws in each seed's run, is a TensorBoard run of its own, ``tensorboard/paper/``,
written once, so it overlays the seeds on the charts of the same tags.

Resume: every launch adds one event file to each seed's directory, opened with a purge
step (a ``SessionLog.START`` event, what tensorboardX's ``purge_step`` writes): one past
the timestep of the checkpoint it resumes from. TensorBoard hides the events of the
earlier files at or after that step, so the rows of a chunk rolled back by the resume
(logged before its checkpoint was saved) are not shown beside the rows that replace
them. Both of TensorBoard's loaders agree: the Python one acts on the ``SessionLog``
event; the Rust data server drops a tag's points at or after a step that is logged
again, which the resumed launch does for every rolled-back row (it replays the same
chunks). Rows are on disk (flushed, fsynced) before the run loop goes on to the chunk's
checkpoint, so a kill at any point leaves every row of the saved checkpoints. A seed
directory without an event file (a fresh run, or TensorBoard turned on for a run under
way) starts with purge step 0 and the rows its metrics file kept: it holds the whole run.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from launcher.config.schema import LoggerSpec
from launcher.errors import ConfigError
from launcher.logger.loggers import Given, OutputContext, Start
from launcher.store.rundir import read_metrics

DIRECTORY = "tensorboard"
REFERENCE_RUN = "paper"
NOT_SCALARS = ("chunk", "kind", "timestep")


def seed_dir(run_dir: Path, seed: int) -> Path:
    """The TensorBoard run of one seed: ``RUN_DIR/tensorboard/seed_<s>``."""
    return Path(run_dir) / DIRECTORY / f"seed_{seed}"


def event_files(directory: Path) -> list[Path]:
    """The event files of one TensorBoard run directory, in the order TensorBoard reads
    them (by name)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if "tfevents" in p.name)


def scalars(row: Mapping[str, Any]) -> tuple[int, dict[str, float]] | None:
    """``(step, {tag: value})`` of one metrics row: its numbers (non-finite ones kept; a
    null read back from a metrics file is the NaN it was written for) at its
    ``timestep``; None for a row without a finite timestep."""
    step = row.get("timestep")
    if not isinstance(step, int | float) or isinstance(step, bool) or not math.isfinite(step):
        return None
    values = {}
    for key, value in row.items():
        if key in NOT_SCALARS:
            continue
        if value is None:
            values[str(key)] = math.nan
        elif isinstance(value, int | float):
            values[str(key)] = float(value)
    return int(round(step)), values


class TensorBoardRuns:
    """The per-seed TensorBoard event files of one launch (nothing when disabled)."""

    def __init__(
        self,
        logger: LoggerSpec,
        seeds: Sequence[int],
        run_dir: Path,
        resumed_at: int | None,
        metrics_files: Sequence[Path],
    ) -> None:
        """Open one event file per seed.

        Args:
          logger: the logger spec; nothing is imported or written unless ``tensorboard``.
          seeds: the seeds, in the state's seed-axis order.
          run_dir: the run directory (event files go to ``run_dir/tensorboard``).
          resumed_at: the timestep of the checkpoint this launch resumes from; None for
            a run started afresh. Earlier launches' events after it are purged.
          metrics_files: the seeds' metrics files, already cut back to that checkpoint
            (or their rows); a seed directory new to this launch gets their rows first.
        """
        self.seeds = list(seeds)
        self.root = Path(run_dir) / DIRECTORY
        self.writers: list[Any] = []
        if not logger.tensorboard:
            return
        for seed, metrics in zip(self.seeds, metrics_files, strict=True):
            directory = seed_dir(run_dir, seed)
            if event_files(directory) and resumed_at is not None:
                self.writers.append(_open(directory, int(resumed_at) + 1))
                continue
            writer = _open(directory, 0)
            for row in _rows(metrics):
                _write(writer, row)
            writer.flush()
            self.writers.append(writer)

    @property
    def enabled(self) -> bool:
        return bool(self.writers)

    def log(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Log one row per seed (same order as ``seeds``), as W&B does; on disk on return."""
        for writer, row in zip(self.writers, rows, strict=False):
            _write(writer, row)
            writer.flush()

    def log_reference(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Write the reference rows (the ``reference_rows`` hooks', by default the paper's
        curve: ``analysis.paper_line``) as the run ``tensorboard/paper`` once: a later
        launch finds it written and adds nothing."""
        directory = self.root / REFERENCE_RUN
        if not self.enabled or not rows or event_files(directory):
            return
        writer = _open(directory, None)
        try:
            for row in rows:
                _write(writer, row)
        finally:
            writer.close()

    def finish(self) -> None:
        """Close the event files."""
        for writer in self.writers:
            writer.close()
        self.writers = []


class TensorBoardOutput:
    """The ``tensorboard`` output (:mod:`launcher.logger.loggers`): :class:`TensorBoardRuns`,
    opened with the purge step of the checkpoint resumed from."""

    FOLDERS = {DIRECTORY: "its TensorBoard event files"}
    KEY_HINTS = {
        "tensorboard": "logger.tensorboard=true (beside the preset's outputs), or "
        "logger=tensorboard (the metrics files and TensorBoard)"
    }

    @classmethod
    def default(cls, logger: LoggerSpec) -> bool:
        """Listed by the presets when ``logger.tensorboard``."""
        return logger.tensorboard

    @classmethod
    def configure(cls, given: Given, listed: bool) -> LoggerSpec:
        """``logger.tensorboard`` set exactly when listed (it cannot ask for an unlisted one)."""
        if given.logger.tensorboard and not listed:
            raise ConfigError(
                f"logger.outputs: {given.shown} leaves out tensorboard, but "
                "logger.tensorboard=true; add tensorboard to the list"
            )
        return dataclasses.replace(given.logger, tensorboard=listed)

    def __init__(self, ctx: OutputContext) -> None:
        self.ctx, self.runs = ctx, None

    def open(self, start: Start) -> None:
        """One event file per seed (purging the events past ``start.step``); the paper's
        run once, with a fresh run."""
        spec, ctx = self.ctx.spec, self.ctx
        logger = dataclasses.replace(spec.logger, tensorboard=True)
        self.runs = TensorBoardRuns(logger, ctx.seeds, ctx.run_dir, start.step, start.kept)
        if start.step is None:
            self.runs.log_reference(start.reference)

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if self.runs is not None:
            self.runs.log(rows)  # on disk (fsynced) before the chunk's checkpoint

    def flush(self, step: int) -> None:
        """Nothing to do: each row is on disk when written."""

    def finish(self) -> None:
        if self.runs is not None:
            self.runs.finish()


def _rows(metrics: Path | Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """A metrics file's rows (none if it does not exist), or the rows themselves."""
    if isinstance(metrics, str | Path):
        return read_metrics(Path(metrics)) if Path(metrics).exists() else []
    return metrics


def _open(directory: Path, purge_step: int | None) -> Any:
    """A tensorboardX events writer adding one event file to ``directory``, starting with
    a purge at ``purge_step`` (None: no purge)."""
    # Imported only when TensorBoard is on. tensorboardX's synchronous EventsWriter (what
    # its SummaryWriter's background thread writes through): flush() is an fsync, so the
    # run loop knows a chunk's rows are on disk before it saves the chunk's checkpoint.
    from tensorboardX.event_file_writer import EventsWriter
    from tensorboardX.proto.event_pb2 import Event, SessionLog

    directory.mkdir(parents=True, exist_ok=True)
    # tensorboardX names event files by the second and host alone: the suffix numbers
    # this launch's file after the earlier ones, so two launches within one second
    # neither share a file nor read back out of order.
    suffix = f".launch{len(event_files(directory)):04d}"
    writer = EventsWriter(str(directory / "events"), suffix)
    if purge_step is not None:
        start = SessionLog(status=SessionLog.START)
        writer.write_event(Event(step=purge_step, wall_time=time.time(), session_log=start))
    return writer


def _write(writer: Any, row: Mapping[str, Any]) -> None:
    """One row as one event: a summary of its scalars at its timestep."""
    # A summary proto, not SummaryWriter.add_scalar: that rewrites tags to TensorFlow
    # node-name characters ("Train/episodic mean reward" -> "Train/episodic_mean_reward");
    # the proto keeps W&B's names, which TensorBoard shows as they are.
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.proto.summary_pb2 import Summary

    parsed = scalars(row)
    if parsed is None or not parsed[1]:
        return
    step, values = parsed
    summary = Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()])
    writer.write_event(Event(step=step, wall_time=time.time(), summary=summary))
