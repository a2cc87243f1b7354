"""Carrying a run to another machine: its checkpoint as a W&B artifact, and a resume from one.

Upload (``logger.checkpoint_artifact=true``): after each checkpoint save is on disk and W&B
got the rows it covers, the ``wandb`` output (:mod:`launcher.logger.wandb_output`) logs
:func:`carried_files` (the newest checkpoint and the small files a resume reads) as a W&B
artifact of type ``checkpoint`` named for the run (its run name), aliases ``latest`` and
``step_<t>``, from the first seed's W&B run
(:meth:`launcher.logger.wandb_logger.WandbRuns.log_checkpoint`)::

    checkpoints/<t>/         the seed-batched state + metadata (orbax), every seed
    run.json                 identity and composed config (the resume's config check)
    metrics/seed_<s>.jsonl   the rows up to the checkpoint (kept by the resume)
    launches.jsonl           the launches' provenance
    wandb_ids.json           the W&B run ids (the resumed launch continues those runs)

Download (``+from_artifact=ENTITY/PROJECT/NAME:ALIAS``, :func:`fetch`, in the launch's
checks under its run-directory lock)::

    a run dir holding checkpoints          refused (nothing overwritten), unless a launch
                                             there came from the same reference (a
                                             requeue): then it resumes them, no download
    download into a temporary directory    beside the run dir (launcher.logger.wandb_logger)
    check it: run.json, a checkpoint,      else refused; the temporary directory
      the launch's config identity           removed, the run dir untouched
    move its files into the run dir        the checkpoint last (a kill mid-move leaves
                                             none: the next launch downloads again)

The launch then resumes from that checkpoint as from a local one (:mod:`launcher.loop.run`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from launcher.config.identity import diff, identity
from launcher.config.schema import FORCE_CHANGEABLE, RunSpec
from launcher.errors import ConfigError
from launcher.logger import wandb_logger
from launcher.store.rundir import LAUNCHES, RUN_FILE, RunDir

SMALL_FILES = (RUN_FILE, LAUNCHES, wandb_logger.IDS_FILE)
METRICS = "metrics"
CHECKPOINTS = "checkpoints"


def carried_files(rd: RunDir, step: int) -> dict[str, Path]:
    """``{path in the artifact: local file or directory}`` of checkpoint ``step``: the
    step's directory and what a resume reads beside it (those present)."""
    files = {f"{CHECKPOINTS}/{step}": rd.checkpoints / str(step)}
    for name in SMALL_FILES:
        if (rd.path / name).is_file():
            files[name] = rd.path / name
    if rd.metrics.is_dir():
        files[METRICS] = rd.metrics
    return files


def checkpoint_steps(directory: Path) -> list[int]:
    """The steps of the complete checkpoints under ``directory`` (orbax names each by its
    step; its temporary directories have other names), ascending."""
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit() and p.is_dir())


def fetch(spec: RunSpec, rd: RunDir) -> int | None:
    """Put the checkpoint artifact ``spec.control.from_artifact`` into ``rd`` (module
    docstring); returns its step. None, fetching nothing: ``rd`` holds checkpoints and an
    earlier launch there came from the same reference (a requeued job relaunching its
    command line, e.g. submitit's): the launch resumes what is here.

    Raises:
      ConfigError: ``rd`` already holds checkpoints of another origin; W&B cannot fetch
        the artifact; the artifact holds no run of this launcher or a run of another
        config. Nothing in ``rd`` is written then.
    """
    ref = spec.control.from_artifact
    held = checkpoint_steps(rd.checkpoints)
    if held and any(r.get("from_artifact") == ref for r in rd.read_launches()):
        return None
    if held:
        raise ConfigError(
            f"from_artifact: {rd.path} already holds checkpoints (steps "
            f"{', '.join(map(str, held))}); relaunch without +from_artifact to resume them, "
            "or choose another hydra.run.dir for the artifact's run"
        )
    rd.path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=rd.path.parent, prefix=f".{rd.path.name}.artifact-"))
    try:
        wandb_logger.download_artifact(str(ref), tmp)
        step = _check(spec, str(ref), tmp)
        _move_in(tmp, rd, step)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return step


def _check(spec: RunSpec, ref: str, root: Path) -> int:
    """The newest checkpoint step of a downloaded artifact whose run.json holds the
    launch's config identity (``+resume=force``: :data:`FORCE_CHANGEABLE` may differ)."""
    steps = checkpoint_steps(root / CHECKPOINTS)
    if not (root / RUN_FILE).is_file() or not steps:
        raise ConfigError(
            f"from_artifact: {ref} is not a checkpoint artifact of this launcher (it lacks "
            f"{RUN_FILE} or {CHECKPOINTS}/<step>/); give one logged with "
            "logger.checkpoint_artifact=true"
        )
    try:
        stored = json.loads((root / RUN_FILE).read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"from_artifact: {ref}: unreadable {RUN_FILE} ({err})") from None
    changes = diff(stored.get("identity", {}), identity(spec))
    forced = spec.control.resume == "force"
    if changes and not (forced and all(key in FORCE_CHANGEABLE for key, _, _ in changes)):
        shown = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in changes[:8])
        more = f" (and {len(changes) - 8} more)" if len(changes) > 8 else ""
        raise ConfigError(
            f"from_artifact: {ref} holds a run with another config: {shown}{more}; launch "
            "with the overrides of the run it was saved from (run name "
            f"{stored.get('run_name', '?')})"
        )
    return steps[-1]


def _move_in(root: Path, rd: RunDir, step: int) -> None:
    """Move a checked download into the run dir: the small files and metrics, then the
    checkpoint (its arrival makes the run dir a resumable run)."""
    rd.path.mkdir(parents=True, exist_ok=True)
    for name in SMALL_FILES:
        if (root / name).is_file():
            shutil.move(root / name, rd.path / name)
    if (root / METRICS).is_dir():
        rd.metrics.mkdir(parents=True, exist_ok=True)
        for path in sorted((root / METRICS).iterdir()):
            shutil.move(path, rd.metrics / path.name)
    rd.checkpoints.mkdir(parents=True, exist_ok=True)
    shutil.move(root / CHECKPOINTS / str(step), rd.checkpoints / str(step))
