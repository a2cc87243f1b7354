"""The ``wandb`` output (:mod:`launcher.logger.loggers`): the per-seed W&B runs of
:mod:`launcher.logger.wandb_logger` driven by the output protocol.

Its run ids are kept in ``wandb_ids.json`` and in each checkpoint's metadata
(``wandb_ids``), so every launch of a run continues the same W&B runs. ``write`` stages a
chunk's rows and ``flush`` (its checkpoint saved) logs them, so W&B never holds a row that
a resume rolls back; ``open`` logs the kept rows W&B's logs lack (a kill between the
checkpoint and W&B's write), and ``top_up`` does so for a finished run's relaunch. With
``logger.checkpoint_artifact`` each flush also logs the checkpoint
(:mod:`launcher.logger.wandb_carry`).

The output's own settings (``logger.mode``, ``project``, ``entity``, ``group``, ``tags``,
``checkpoint_artifact``, and ``+from_artifact``) are checked by :meth:`WandbOutput.configure`,
its files in the run directory declared by ``FILES``/``FOLDERS``, a carried checkpoint
fetched by :meth:`WandbOutput.prepare` and its summary lines written by
:meth:`WandbOutput.summary` (the protocol's declarations, :mod:`launcher.logger.loggers`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from launcher.config.coerce import close_matches, listing
from launcher.config.schema import LoggerSpec, RunSpec
from launcher.errors import ConfigError
from launcher.logger import wandb_carry
from launcher.logger.loggers import Given, OutputContext, Start
from launcher.logger.wandb_logger import IDS_FILE, WandbRuns, read_ids, top_up, write_ids
from launcher.store.rundir import RunDir

MODES = ("offline", "online", "disabled")  # W&B's; disabled: the output is not listed
# A W&B artifact reference: [ENTITY/][PROJECT/]NAME:ALIAS (W&B's own name characters).
ARTIFACT_REF = re.compile(r"([\w.-]+/){0,2}[\w.-]+:[\w.-]+")


class WandbOutput:
    """The ``wandb`` output (:mod:`launcher.logger.loggers`): :class:`WandbRuns` with the run ids
    kept in ``wandb_ids.json`` and each checkpoint's metadata (``wandb_ids``)."""

    FILES = (IDS_FILE,)
    FOLDERS = {"wandb": "its W&B offline runs"}
    KEY_HINTS = {"wandb": "logger=offline|online|disabled"}

    @classmethod
    def default(cls, logger: LoggerSpec) -> bool:
        """Listed by the presets unless ``logger.mode=disabled``."""
        return logger.mode != "disabled"

    @classmethod
    def configure(cls, given: Given, listed: bool) -> LoggerSpec:
        """Check the W&B settings (listed or not) and the list; ``mode`` disabled when
        not listed."""
        logger, shown = given.logger, given.shown
        if logger.mode not in MODES:
            raise ConfigError(
                f"logger.mode: {logger.mode!r} is not a W&B mode; "
                f"{close_matches(logger.mode, MODES)}choose one of: {listing(MODES)}"
            )
        if not logger.project:
            raise ConfigError("logger.project: must be a non-empty string")
        if listed and logger.mode == "disabled":
            raise ConfigError(
                f"logger.outputs: {shown} names wandb, but logger.mode=disabled; "
                "set logger.mode=offline (or online), or leave wandb out"
            )
        if logger.checkpoint_artifact and not listed:
            raise ConfigError(
                "logger.checkpoint_artifact: needs W&B, but logger.mode=disabled (or wandb is "
                "not among logger.outputs); use logger=offline or logger=online with it"
            )
        ref = given.control.from_artifact
        if ref is not None and not ARTIFACT_REF.fullmatch(ref):
            raise ConfigError(
                f"from_artifact: {ref!r} is not a W&B artifact reference; "
                "write +from_artifact=ENTITY/PROJECT/NAME:ALIAS (e.g. me/wmrl/<run name>:latest)"
            )
        return logger if listed else dataclasses.replace(logger, mode="disabled")

    @classmethod
    def prepare(cls, spec: RunSpec, rd: RunDir) -> bool:
        """``+from_artifact``: the checkpoint (and run.json) arrive in ``rd``
        (:func:`launcher.logger.wandb_carry.fetch`); True: the launch resumes them."""
        if spec.control.from_artifact is None:
            return False
        wandb_carry.fetch(spec, rd)
        return True

    @classmethod
    def summary(cls, spec: RunSpec, run_dir: Path, dirs: list[str]) -> list[tuple[str, str]]:
        """Where the runs are, and (offline) how to upload them."""
        lines = [(f"W&B {spec.logger.mode}", ", ".join(dirs))]
        if spec.logger.mode == "offline":
            lines.append(("", f"upload: wandb sync {run_dir / 'wandb'}/offline-run-*"))
        return lines

    def __init__(self, ctx: OutputContext) -> None:
        """Start the runs (ConfigError if W&B cannot start: nothing written)."""
        self.ctx, spec, rd = ctx, ctx.spec, RunDir(ctx.run_dir)
        meta = ctx.resumed_meta or {}
        if "wandb_ids" in meta:  # the restored checkpoint's
            self.ids = {int(k): v for k, v in meta["wandb_ids"].items()}
        else:  # a fresh run (a launch killed before its first checkpoint kept the file)
            self.ids = read_ids(rd.path) or WandbRuns.new_ids(ctx.seeds, spec.logger.mode)
        self.runs = WandbRuns(spec.logger, spec.run_name, ctx.seeds, self.ids, spec.config, rd.path)

    def open(self, start: Start) -> None:
        """Keep the ids; log the reference rows and the kept rows W&B's logs lack."""
        write_ids(self.ctx.run_dir, self.ids)
        self.runs.log_reference(start.reference)
        self.runs.catch_up(start.kept)

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.runs.stage(rows)  # logged at the flush: rows a resume rolls back never reach W&B

    def flush(self, step: int) -> None:
        """Log the staged rows, then (``logger.checkpoint_artifact``) the checkpoint."""
        self.runs.commit()
        spec = self.ctx.spec
        if spec.logger.checkpoint_artifact:
            files = wandb_carry.carried_files(RunDir(self.ctx.run_dir), step)
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
        ids, reference = read_ids(rd.path), [dict(r) for r in start.reference]
        args = (spec.logger, spec.run_name, list(ctx.seeds), ids, spec.config, rd.path)
        return top_up(*args, reference, start.kept)
