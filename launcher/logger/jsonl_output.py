"""The ``jsonl`` output: one metrics file per seed, ``RUN_DIR/metrics/seed_<s>.jsonl``.

The run's own record, always among the outputs (:mod:`launcher.logger.loggers`): a resume
keeps its rows up to the restored checkpoint, the other outputs catch up from them, and
the report and the end-of-run summary read them. Each row is one flushed line
(:meth:`launcher.store.rundir.RunDir.append_metrics`), so a kill leaves whole lines and at most
one cut last line; ``open`` drops the lines of chunks after the checkpoint resumed from
(and a cut line), which the resumed launch writes again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from launcher.logger.loggers import OutputContext, Start
from launcher.loop import faults
from launcher.store.rundir import RunDir


class JsonlOutput:
    """The per-seed metrics files (module docstring)."""

    @classmethod
    def default(cls, logger: Any) -> bool:
        """Always listed: the run's own record."""
        return True

    def __init__(self, ctx: OutputContext) -> None:
        self.rd, self.seeds = RunDir(ctx.run_dir), list(ctx.seeds)

    def open(self, start: Start) -> None:
        """Roll the files back to the chunk resumed from (all rows for a fresh run)."""
        self.rd.truncate_metrics(self.seeds, -1 if start.chunk is None else start.chunk)

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """One line per seed; the fault point ``metrics`` falls between the first seed's
        line and the others' (a kill there leaves the seeds' files uneven)."""
        for i, (seed, row) in enumerate(zip(self.seeds, rows, strict=True)):
            self.rd.append_metrics(seed, [row])
            if i == 0:
                faults.point("metrics", int(row.get("chunk", -1)))

    def flush(self, step: int) -> None:
        """Nothing to do: every line is on disk when written."""

    def finish(self) -> None:
        """Nothing to close: every line is written and closed at once."""
