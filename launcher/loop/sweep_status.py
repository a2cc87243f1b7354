"""A multirun's summary: one status line per job, whichever Hydra launcher ran it.

:class:`SweepStatus` is a Hydra callback (``hydra.callbacks.sweep_status`` in
``conf/config.yaml``). Its ``on_job_end`` runs in the job's own process (a submitit
job's too) and appends the job's status to ``<sweep dir>/.sweeps/<sweep id>.jsonl``;
``python -m launcher -m`` gives each sweep an id and prints :func:`report` at the end,
also when a job failed (Hydra skips ``on_multirun_end`` then), with the overlay command
of its completed runs.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

STATUS_DIR = ".sweeps"


class SweepStatus(Callback):
    """Appends ``{job, overrides, run_dir, status, error, logs}`` per finished job (``logs``:
    a submitit job's stdout and stderr files)."""

    def __init__(self, sweep_id: str | None = None) -> None:
        self.sweep_id = sweep_id

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        if not self.sweep_id:
            return
        from hydra.core.utils import JobStatus

        hydra = config.hydra
        failed = job_return.status == JobStatus.FAILED
        error = job_return._return_value if failed else None  # noqa: SLF001 - no accessor
        line = {
            "job": int(hydra.job.num),
            "overrides": list(hydra.overrides.task),
            "run_dir": str(hydra.runtime.output_dir),
            "status": "failed" if failed else "completed",
            "error": f"{type(error).__name__}: {error}".splitlines()[0] if failed else None,
            "logs": _job_logs(),
        }
        path = status_file(Path(str(hydra.sweep.dir)), self.sweep_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        # One short O_APPEND write per job: lines from concurrent jobs do not interleave.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)


def _job_logs() -> list[str] | None:
    """This job's own log files, ``[stdout, stderr]``, when a submitit launcher runs it
    (on a cluster the only place its output lands), else None."""
    if not os.environ.get("SUBMITIT_EXECUTOR"):
        return None
    try:
        import submitit

        paths = submitit.JobEnvironment().paths
        return [str(paths.stdout), str(paths.stderr)]
    except Exception:  # noqa: BLE001 - the logs' paths are a courtesy
        return None


def status_file(sweep_dir: Path, sweep_id: str) -> Path:
    return Path(sweep_dir) / STATUS_DIR / f"{sweep_id}.jsonl"


def read(sweep_dir: Path, sweep_id: str) -> list[dict[str, Any]]:
    """The recorded job lines of one sweep, by job number."""
    path = status_file(sweep_dir, sweep_id)
    if not path.exists():
        return []
    rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return sorted(rows, key=lambda r: r["job"])


def report(overrides: Sequence[str], sweep_id: str) -> str:
    """The sweep's summary table (empty if no job recorded a status)."""
    from omegaconf import OmegaConf

    from launcher.config.compose import compose
    from launcher.config.precheck import first_choice, parse

    try:
        # Hydra composes no sweep override (a,b,...): take each one's first value.
        first = [first_choice(o, parse(o)) for o in overrides]
        sweep_dir = Path(OmegaConf.select(compose(first, hydra_node=True), "hydra.sweep.dir"))
    except Exception:  # noqa: BLE001 - the summary is a courtesy
        return ""
    rows = read(sweep_dir, sweep_id)
    if not rows:
        return ""
    failed = sum(r["status"] == "failed" for r in rows)
    lines = [f"sweep: {len(rows)} job(s), {failed} failed"]
    for r in rows:
        what = " ".join(o for o in r["overrides"] if not o.startswith("hydra."))
        tail = f"  {r['error']}" if r["error"] else ""
        if r["error"] and r.get("logs"):  # errors and tracebacks go to stderr
            tail += f" (log: {r['logs'][-1]})"
        lines.append(f"  #{r['job']} {r['status']:9s} {what}  -> {r['run_dir']}{tail}")
    done = [shlex.quote(_short(r["run_dir"])) for r in rows if r["status"] == "completed"]
    if len(done) > 1:  # the sweep dir (runs/) holds other runs too: name the jobs' own
        lines.append(f"overlay: python -m analysis {' '.join(done)}")
    return "\n".join(lines)


def _short(path: str) -> str:
    """``path`` relative to the working directory when it lies below it (a copyable
    command line), else as recorded."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path
