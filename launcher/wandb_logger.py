"""Weights & Biases: one W&B run per seed, grouped by experiment, config logged.

``mode=offline`` (the default) needs no account and no network: each launch writes
``RUN_DIR/wandb/offline-run-<time>-<id>/``, uploaded later with ``wandb sync``. The
run ids are created once and kept in ``RUN_DIR/wandb_ids.json``, so a resumed run
continues the same W&B runs (``resume="allow"``). Metrics are logged with ``timestep``
as their x-axis (``define_metric``), so relogging chunks after a resume never conflicts
with W&B's own step counter. ``mode=disabled`` imports nothing.
"""

from __future__ import annotations

import os
import secrets
import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from launcher.errors import ConfigError
from launcher.schema import LoggerSpec


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
        if self.mode == "disabled":
            return
        # Our top-level package is named `agents`, which W&B mistakes for the LLM
        # library of that name and advertises Weave for; keep the console clean.
        os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
        import wandb

        directory.mkdir(parents=True, exist_ok=True)
        wandb_dir = directory / "wandb"
        before = set(wandb_dir.iterdir()) if wandb_dir.is_dir() else None
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
        """Log one row per seed (same order as ``seeds``); non-finite values kept."""
        for run, row in zip(self.runs, rows, strict=False):
            run.log({k: v for k, v in row.items() if k not in ("chunk", "kind")})

    def log_reference(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Log the same rows (the paper's curve, ``launcher.compare.wandb_reference_rows``)
        to every seed's run: a reference line beside the run's own curves."""
        for run in self.runs:
            for row in rows:
                run.log(dict(row))

    def finish(self) -> None:
        for run in self.runs:
            run.finish()
        self.runs = []

    def offline_dirs(self) -> list[str]:
        """The offline run directories written by this launch."""
        out = []
        for run in self.runs:
            directory = getattr(run, "dir", None)  # .../offline-run-*/files
            if directory:
                out.append(os.path.dirname(directory))
        return out


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
