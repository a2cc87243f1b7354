"""Weights & Biases: one W&B run per seed, grouped by experiment, config logged (the
``wandb`` output, :mod:`launcher.logger.wandb_output`).

``mode=offline`` (the default) needs no account and no network: each launch writes
``RUN_DIR/wandb/offline-run-<time>-<id>/``, uploaded later with ``wandb sync`` (which
syncs the launches of one run id in order). The run ids are created once and kept in
``RUN_DIR/wandb_ids.json``, so a resumed run continues the same W&B runs
(``resume="allow"``). Metrics are charted against ``timestep`` (``define_metric``).
``mode=disabled`` imports nothing.

History across launches (a resume, a ``kill -9``): a run's W&B history is the same as an
uninterrupted run's, row for row (values and ``_step``; only W&B's own ``_runtime`` /
``_timestamp`` differ), so a synced dashboard shows each timestep once and no row of a
chunk that a resume rolled back. How:

* a chunk's rows (train, eval) are staged and handed to W&B only once the checkpoint
  that covers them is saved (:meth:`WandbRuns.stage`, :meth:`WandbRuns.commit`): rows a
  resume would roll back never reach W&B;
* each row is logged at an explicit ``_step``, one past the last step W&B already holds
  for the run id (W&B's offline resume would restart at 0);
* at start, the history W&B holds is read back from the transaction logs of the earlier
  launches (:mod:`launcher.logger.wandb_history`): the launch then offers the run's rows from
  the start (the paper's reference rows, then every metrics row kept in
  ``metrics/seed_<s>.jsonl``) and logs only those past what W&B holds, so rows that a
  kill kept from W&B (after the checkpoint, before W&B wrote them) are logged once, and
  rows it already has are not logged again.

Checkpoints as artifacts (``logger.checkpoint_artifact``, :mod:`launcher.logger.wandb_carry`): each
saved checkpoint is logged from the first seed's run (:meth:`WandbRuns.log_checkpoint`);
:func:`download_artifact` fetches one back (``+from_artifact``).

W&B's rewind (``resume_from="<id>?_step=<n>"``) is not used: it is carried out by the W&B
server, so it cannot clean an offline run's files.
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.config.schema import LoggerSpec
from launcher.errors import ConfigError
from launcher.logger import wandb_history
from launcher.store.rundir import atomic_write

log = logging.getLogger(__name__)

NOT_LOGGED = ("chunk", "kind")  # the metrics files' bookkeeping, not W&B metrics
REFERENCE_PREFIX = "Paper/"  # the reference rows' metrics (analysis.paper_line)
IDS_FILE = "wandb_ids.json"  # seed -> W&B run id, in the run directory
ARTIFACT_TYPE = "checkpoint"  # the type of the checkpoint artifacts (launcher.logger.wandb_carry)


def read_ids(run_dir: Path) -> dict[int, str]:
    """The run ids kept in ``run_dir`` (seed -> id); empty before the first launch's."""
    path = Path(run_dir) / IDS_FILE
    if not path.exists():
        return {}
    return {int(k): v for k, v in json.loads(path.read_text()).items()}


def write_ids(run_dir: Path, ids: Mapping[int, str]) -> None:
    text = json.dumps({str(k): v for k, v in ids.items()}, indent=2) + "\n"
    atomic_write(Path(run_dir) / IDS_FILE, text)


@dataclass
class _History:
    """What one W&B run holds, and how many of this launch's offered rows it covers."""

    reference: int = 0  # reference rows W&B holds
    rows: int = 0  # metrics rows W&B holds
    next_step: int = 0  # the ``_step`` of the next row logged
    offered_reference: int = 0
    offered_rows: int = 0

    @classmethod
    def read(cls, wandb_dir: Path, run_id: str) -> _History:
        """The history of ``run_id`` in the transaction logs under ``wandb_dir``."""
        try:
            rows = wandb_history.history(wandb_dir, run_id)
        except Exception as err:  # noqa: BLE001 - unreadable: log all rows (a warning)
            log.warning("cannot read W&B's logs of run %s (%s): rows may repeat", run_id, err)
            rows = []
        reference = sum(any(str(k).startswith(REFERENCE_PREFIX) for k in r) for r in rows)
        steps = [int(r["_step"]) for r in rows if isinstance(r.get("_step"), int | float)]
        return cls(reference, len(rows) - reference, max(steps, default=-1) + 1)


class WandbRuns:
    """The per-seed W&B runs of one launch."""

    def __init__(
        self,
        logger: LoggerSpec,
        run_name: str,
        seeds: Sequence[int],
        ids: Mapping[int, str],
        config: Mapping[str, Any],
        directory: Path,
    ) -> None:
        """Start (or resume) one W&B run per seed.

        Args:
          logger: the logger spec (mode, project, entity, group, tags).
          run_name: the experiment name; the default group.
          seeds: the seeds, in the state's seed-axis order.
          ids: seed -> W&B run id (from :meth:`new_ids` on the first launch).
          config: logged as the W&B config (plus the seed).
          directory: the run directory (W&B writes ``directory/wandb``).
        """
        self.mode = logger.mode
        self.seeds = list(seeds)
        self.runs: list[Any] = []
        self._history: list[_History] = []
        self._staged: list[Sequence[Mapping[str, Any]]] = []
        if self.mode == "disabled":
            return
        # Our top-level package is named `agents`, which W&B mistakes for the LLM
        # library of that name and advertises Weave for; keep the console clean.
        os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
        import wandb

        directory.mkdir(parents=True, exist_ok=True)
        wandb_dir = directory / "wandb"
        before = set(wandb_dir.iterdir()) if wandb_dir.is_dir() else None
        # read before this launch's own (empty) logs exist
        self._history = [_History.read(wandb_dir, ids[seed]) for seed in self.seeds]
        settings = wandb.Settings(silent=True, console="off", disable_git=True, save_code=False)
        for seed in self.seeds:
            try:
                run = wandb.init(
                    project=logger.project,
                    entity=logger.entity,
                    group=logger.group or run_name,
                    name=f"{run_name}-seed{seed}",
                    id=ids[seed],
                    tags=list(logger.tags),
                    config={**config, "seed": seed},
                    dir=str(directory),
                    mode=self.mode,
                    resume="allow",
                    reinit="create_new",
                    settings=settings,
                )
            except Exception as err:  # noqa: BLE001 - login, network, permissions
                self.finish()
                _remove_new(wandb_dir, before)
                first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                raise ConfigError(
                    f"logger.mode={self.mode}: W&B could not start ({type(err).__name__}: "
                    f"{first}); run `wandb login` for online mode, or use logger=offline"
                ) from None
            run.define_metric("timestep")
            run.define_metric("*", step_metric="timestep")
            self.runs.append(run)

    @staticmethod
    def new_ids(seeds: Sequence[int], mode: str) -> dict[int, str]:
        """Fresh W&B run ids, one per seed."""
        alphabet = string.ascii_lowercase + string.digits
        return {s: "".join(secrets.choice(alphabet) for _ in range(8)) for s in seeds}

    def log(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Log one metrics row per seed (same order as ``seeds``), in the run's order;
        a row W&B already holds (offered again after a resume) is skipped."""
        for i, row in enumerate(rows[: len(self.runs)]):
            self._log_row(i, row)

    def stage(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Keep one row per seed for :meth:`commit` (rows of a chunk not saved yet)."""
        if self.runs:
            self._staged.append([dict(r) for r in rows])

    def commit(self) -> None:
        """Log the staged rows: the checkpoint that covers their chunks is saved."""
        staged, self._staged = self._staged, []
        for rows in staged:
            self.log(rows)

    def catch_up(self, rows_by_seed: Sequence[Sequence[Mapping[str, Any]]]) -> None:
        """Offer the rows a resumed run kept (each seed's metrics file, in order): W&B
        gets those it lacks. A metrics file's ``null`` is the NaN W&B was given."""
        for i, rows in enumerate(rows_by_seed[: len(self.runs)]):
            for row in rows:
                self._log_row(i, {k: math.nan if v is None else v for k, v in row.items()})

    def _held(self, i: int) -> _History:
        """What run ``i`` holds (nothing, for a run set from outside, as tests do)."""
        while len(self._history) <= i:
            self._history.append(_History())
        return self._history[i]

    def _log_row(self, i: int, row: Mapping[str, Any]) -> None:
        held = self._held(i)
        held.offered_rows += 1
        if held.offered_rows > held.rows:
            self._log(self.runs[i], held, {k: v for k, v in row.items() if k not in NOT_LOGGED})

    def log_reference(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Log the same rows (the ``reference_rows`` hooks': by default the paper's curve,
        ``analysis.paper_line``) to every seed's run: a reference line beside the run's own
        curves. Offered by every launch; a run gets the rows it does not hold yet."""
        for i, run in enumerate(self.runs):
            held = self._held(i)
            for row in rows:
                held.offered_reference += 1
                if held.offered_reference > held.reference:
                    self._log(run, held, dict(row))

    @staticmethod
    def _log(run: Any, held: _History, row: Mapping[str, Any]) -> None:
        run.log(dict(row), step=held.next_step, commit=True)
        held.next_step += 1

    def finish(self) -> None:
        """End the runs; staged rows (of chunks not saved) are dropped. Returns once the
        transaction logs are written: ``run.finish()`` returns before W&B's service has
        closed the last run's log (read right after, it held only its header), so the
        service is shut down (``wandb.teardown``) and the next launch starts another."""
        self._staged = []
        if not self.runs:
            return
        for run in self.runs:
            run.finish()
        self.runs = []
        import wandb

        wandb.teardown()

    def log_checkpoint(self, name: str, step: int, files: Mapping[str, Path]) -> None:
        """Log a saved checkpoint as a W&B artifact of type ``checkpoint`` from the first
        seed's run (the state holds every seed): ``files`` maps each path in the artifact
        to a local file or directory, aliases ``latest`` and ``step_<step>``. W&B copies
        the files into its staging directory here (its default, mutable policy; not into
        its artifact cache as well, ``skip_cache``: a checkpoint may be gigabytes), so the
        checkpoint manager may delete the step later: the upload (online) or ``wandb
        sync`` (offline) reads the copies. A failure is a warning: the run goes on, and
        the next save logs a newer checkpoint."""
        if not self.runs:
            return
        import wandb

        try:
            artifact = wandb.Artifact(name, type=ARTIFACT_TYPE, metadata={"timestep": step})
            for target, local in files.items():
                if Path(local).is_dir():
                    artifact.add_dir(str(local), name=target, skip_cache=True)
                else:
                    artifact.add_file(str(local), name=target, skip_cache=True)
            self.runs[0].log_artifact(artifact, aliases=["latest", f"step_{step}"])
        except Exception as err:  # noqa: BLE001 - staging disk, W&B's service
            log.warning("checkpoint %d not logged as a W&B artifact: %s", step, err)

    def offline_dirs(self) -> list[str]:
        """The offline run directories written by this launch."""
        out = []
        for run in self.runs:
            directory = getattr(run, "dir", None)  # .../offline-run-*/files
            if directory:
                out.append(os.path.dirname(directory))
        return out


def top_up(
    logger: LoggerSpec,
    run_name: str,
    seeds: Sequence[int],
    ids: Mapping[int, str],
    config: Mapping[str, Any],
    directory: Path,
    reference: Sequence[Mapping[str, Any]],
    rows_by_seed: Sequence[Sequence[Mapping[str, Any]]],
) -> list[str]:
    """A finished run's relaunch: log the rows its W&B runs lack (a kill after the final
    checkpoint, before W&B wrote that chunk's rows) and return the offline directories
    written. A run whose W&B logs are whole, or that never logged to W&B, gets nothing:
    no W&B run is started. If W&B cannot start, a warning (the run is done)."""
    if logger.mode == "disabled" or not ids or set(seeds) - set(ids):
        return []
    wandb_dir = Path(directory) / "wandb"
    if not any(wandb_history.run_logs(wandb_dir, ids[s]) for s in seeds):
        return []
    held = [_History.read(wandb_dir, ids[s]) for s in seeds]
    if all(
        h.reference >= len(reference) and h.rows >= len(rows)
        for h, rows in zip(held, rows_by_seed, strict=True)
    ):
        return []
    try:
        wb = WandbRuns(logger, run_name, seeds, ids, config, Path(directory))
    except ConfigError as err:
        log.warning("the W&B runs lack rows of the last chunks, not logged: %s", err)
        return []
    try:
        wb.log_reference(reference)
        wb.catch_up(rows_by_seed)
        return wb.offline_dirs()
    finally:
        wb.finish()


def download_artifact(ref: str, root: Path) -> None:
    """Download the W&B artifact ``ref`` (``ENTITY/PROJECT/NAME:ALIAS``) into ``root``
    through W&B's public API (needs ``wandb login`` and network). The one W&B fetch of
    :mod:`launcher.logger.wandb_carry` (tests replace it). ConfigError when W&B cannot fetch it."""
    os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
    import wandb

    try:
        artifact = wandb.Api().artifact(ref, type=ARTIFACT_TYPE)
        artifact.download(root=str(root), skip_cache=True)  # no second copy in W&B's cache
    except Exception as err:  # noqa: BLE001 - login, network, a wrong reference or type
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise ConfigError(
            f"from_artifact: W&B cannot fetch {ref!r} ({type(err).__name__}: {first}); "
            "check the reference (ENTITY/PROJECT/NAME:ALIAS of a checkpoint artifact) "
            "and run `wandb login`"
        ) from None


def _remove_new(wandb_dir: Path, before: set[Path] | None) -> None:
    """Remove what a failed start wrote under ``wandb_dir`` (a refused launch leaves the
    run directory as it found it)."""
    import shutil

    if not wandb_dir.is_dir():
        return
    if before is None:
        shutil.rmtree(wandb_dir, ignore_errors=True)
        return
    for path in set(wandb_dir.iterdir()) - before:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
