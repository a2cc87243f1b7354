"""The run directory: what a run keeps on disk, and the guard against a changed config.

Layout (``RUN_DIR`` = ``runs/<agent>-<env>-<protocol>-<hash>`` or ``hydra.run.dir``)::

    run.json                 identity (hashed), composed config, env facts, memory per seed
    launches.jsonl           one line per launch: time and provenance (git sha, jax, device)
    checkpoints/<step>/      orbax, named by env step: seed-batched state + JSON metadata
    corrupt_checkpoints/     unreadable checkpoints moved aside by a resume
    metrics/seed_<s>.jsonl   one line per train chunk / evaluation
    plots/learning_curves.png
    launcher.log             the launches' log (created once a launch passes its checks)
    videos/step_<t>/         episodes rendered by ``launcher.evaluate --video``
    ...                      each output's own files and folders, declared by the output
                             (its ``FILES``/``FOLDERS``, :func:`launcher.logger.loggers.layout`)

:func:`check_path` refuses, before anything is created, a path that cannot hold a run,
one check each: a file, a broken link, an unwritable or unreadable folder, one no
directory can be made in, a folder of other files, a layout folder that is a file.

The JSON files are written atomically (temporary file + rename) and the metrics files
one flushed line at a time, so a run killed at any point leaves either the old or the
new version of a file, or one cut last line that readers skip and a resume drops.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from launcher.config.identity import diff, identity
from launcher.config.schema import FORCE_CHANGEABLE, RunSpec
from launcher.errors import ConfigError

log = logging.getLogger(__name__)

RUN_FILE = "run.json"
LAUNCHES = "launches.jsonl"
LOG_FILE = "launcher.log"  # launcher.loop.run opens it
# The layout's folders, with what a run keeps in each.
FOLDERS = {
    "checkpoints": "its checkpoints",
    "corrupt_checkpoints": "the unreadable checkpoints a resume moved aside",
    "metrics": "its metrics files",
    "plots": "its plots",
    "videos": "its rendered episodes",
}
# Files only a launch writes: a folder holding one is a run directory, whatever else it holds.
OWN_FILES = (RUN_FILE, LAUNCHES, LOG_FILE)
# Listed and written again by a resume.
RESUMED = ("checkpoints", "metrics")


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same directory + rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else value
    return value


# ------------------------------------------------------------------ the path
def check_path(
    path: Path | str, files: Sequence[str] = (), folders: Mapping[str, str] | None = None
) -> None:
    """Refuse a run directory that cannot hold a run, before anything is created: one
    ConfigError naming the problem and the fix. One check each, in this order: a file; a
    broken link or a file on the way; not writable; a new one that cannot be made there;
    not readable; a folder of other files; a layout folder that is a file or (those a
    resume rewrites) not writable or readable. ``files``, ``folders``: the outputs' own,
    beside :data:`OWN_FILES` and :data:`FOLDERS` (:func:`launcher.logger.loggers.layout`)."""
    path = Path(path).absolute()
    if path.exists() and not path.is_dir():
        raise _refused(path, "is a file, not a directory")
    base = _nearest_existing(path)
    _check_writable(path, base)
    if base != path:
        _check_creatable(path, base)
    elif not os.access(path, os.R_OK):
        # An existing run directory is also listed and opened (the lock, the resume): one
        # that cannot be read failed later with a PermissionError traceback (exit 1).
        raise _refused(path, ": the run directory is not readable", _PERMISSIONS)
    else:
        own, layout = (*OWN_FILES, *files), {**FOLDERS, **(folders or {})}
        _check_holds_a_run(path, own, layout)
        _check_folders(path, layout)


_PERMISSIONS = "choose another path or fix its permissions"


def _refused(path: Path, problem: str, fix: str = "choose another path") -> ConfigError:
    """``hydra.run.dir: <path><problem>; <fix>`` (``problem`` starts with its separator)."""
    sep = "" if problem.startswith(":") else " "
    return ConfigError(f"hydra.run.dir: {path}{sep}{problem}; {fix}")


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest existing parent; a broken link or a file on the way refused."""
    probe = path
    while not probe.exists():
        # exists() follows links: a link to a missing path (or a loop), e.g. runs/ linked
        # to an unmounted scratch disk, cannot be made a directory (mkdir raised
        # FileExistsError, a traceback with exit 1)
        if probe.is_symlink():
            what = "is a" if probe == path else "lies under the"
            link = "" if probe == path else f" {probe}"
            raise _refused(
                path,
                f"{what} broken symbolic link{link} (to {os.readlink(probe)})",
                "create its target or choose another path",
            )
        probe = probe.parent
    if not probe.is_dir():
        raise _refused(path, f"lies under the file {probe}")
    return probe


def _check_writable(path: Path, base: Path) -> None:
    if not os.access(base, os.W_OK | os.X_OK):
        what = "the run directory" if base == path else f"its parent {base}"
        raise _refused(path, f": {what} is not writable", _PERMISSIONS)


def _check_creatable(path: Path, base: Path) -> None:
    """A new run directory: make a directory where it would be made, and remove it. Some
    folders take no new entry whatever ``os.access`` says (``/proc`` to root), which
    Hydra's own mkdir reported as a traceback."""
    try:
        made = tempfile.mkdtemp(prefix=".wmrl-check-", dir=base)
    except OSError as err:
        problem = f"cannot be created: {base} takes no new directory ({err.strerror})"
        raise _refused(path, problem) from None
    os.rmdir(made)


def _check_holds_a_run(path: Path, own: Sequence[str], layout: Mapping[str, str]) -> None:
    """A folder with entries is a run directory if a launch wrote one of its own files
    there, or if it holds nothing but the layout's folders (a launch killed before its
    first file); anything else is someone's own folder, which a run would mix files into."""
    if any((path / name).exists() for name in own):
        return
    temps = tuple(f".{name}." for name in own)  # atomic_write's, left by a kill
    other = sorted(
        f"{e.name}/" if e.is_dir() else e.name
        for e in path.iterdir()
        if e.name not in layout and not (e.name.startswith(temps) and e.name.endswith(".tmp"))
    )
    if other:
        more = f" and {len(other) - 3} more" if len(other) > 3 else ""
        raise _refused(
            path,
            f"holds other files ({', '.join(other[:3])}{more}) and no {RUN_FILE}: it is not a "
            "run directory, and a run would mix its files in",
            "choose a new or empty folder, or move those files out",
        )


def _check_folders(path: Path, layout: Mapping[str, str]) -> None:
    """The layout's folders are folders; those a resume rewrites, writable and readable."""
    for name, what in layout.items():
        inner = path / name
        if not inner.exists():
            continue
        if not inner.is_dir():
            problem = f"is a file, where a run directory keeps {what} (a folder)"
            raise _refused(inner, problem, "move that file away or choose another path")
        if name in RESUMED and not os.access(inner, os.W_OK | os.X_OK):
            raise _refused(inner, "is not writable", "fix its permissions to resume")
        if name in RESUMED and not os.access(inner, os.R_OK):  # listed on resume
            raise _refused(inner, "is not readable", "fix its permissions to resume")


class RunDir:
    """Paths and small files of one run directory."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).absolute()

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def corrupt(self) -> Path:
        return self.path / "corrupt_checkpoints"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics"

    @property
    def plots(self) -> Path:
        return self.path / "plots"

    def metrics_file(self, seed: int) -> Path:
        return self.metrics / f"seed_{seed}.jsonl"

    def metrics_files(self) -> dict[int, Path]:
        """seed -> its metrics file, for the files there are, by seed."""
        found = {}
        for path in self.metrics.glob("seed_*.jsonl"):
            seed = path.name.removeprefix("seed_").removesuffix(".jsonl")
            if seed.isdigit():
                found[int(seed)] = path
        return dict(sorted(found.items()))

    # ------------------------------------------------------------------ run.json
    def read_run(self) -> dict[str, Any] | None:
        """The stored ``run.json``, or None for a new directory."""
        path = self.path / RUN_FILE
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path}: unreadable run file ({err}); move it away") from None

    def write_run(self, spec: RunSpec, extra: Mapping[str, Any]) -> None:
        """Store the run's identity, composed config and ``extra`` facts."""
        data = {
            "format": 1,
            "run_name": spec.run_name,
            "config_hash": spec.config_hash,
            "identity": identity(spec),
            "config": spec.config,
            **extra,
        }
        atomic_write(self.path / RUN_FILE, json.dumps(data, indent=2, sort_keys=True) + "\n")

    def check_config(self, spec: RunSpec) -> dict[str, Any] | None:
        """Refuse a run directory that holds another config.

        Returns the stored ``run.json`` (None if new). A ``+resume=force`` launch may
        differ in :data:`launcher.config.validate.FORCE_CHANGEABLE` keys only.

        Raises:
          ConfigError: naming the differing keys with their stored and new values.
        """
        stored = self.read_run()
        if stored is None:
            return None
        changes = diff(stored.get("identity", {}), identity(spec))
        if not changes:
            return stored
        forced = spec.control.resume == "force"
        if forced and all(key in FORCE_CHANGEABLE for key, _, _ in changes):
            return stored
        shown = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in changes[:8])
        more = f" (and {len(changes) - 8} more)" if len(changes) > 8 else ""
        if forced:
            hint = f"+resume=force may change only {', '.join(FORCE_CHANGEABLE)}"
        else:
            hint = (
                "relaunch with the stored config, choose another hydra.run.dir, or add "
                f"+resume=force to change only {', '.join(FORCE_CHANGEABLE)}"
            )
        raise ConfigError(
            f"run dir {self.path} holds a run with another config: {shown}{more}; {hint}"
        )

    # ---------------------------------------------------------------- launches
    def append_launch(self, record: Mapping[str, Any]) -> None:
        """Append one launch's record (``launcher.store.provenance.collect`` and its start) to
        ``launches.jsonl``."""
        with (self.path / LAUNCHES).open("a") as f:
            f.write(json.dumps(dict(record), sort_keys=True) + "\n")
            f.flush()

    def read_launches(self) -> list[dict[str, Any]]:
        """Every launch's record, oldest first; [] when none was recorded."""
        path = self.path / LAUNCHES
        return read_metrics(path) if path.exists() else []

    # ----------------------------------------------------------------- metrics
    def truncate_metrics(self, seeds: Sequence[int], chunk: int) -> None:
        """Keep only the metric lines of chunks <= ``chunk`` (all dropped if ``chunk`` < 0):
        lines written after the checkpoint a resume starts from are rewritten by it. A line
        cut by a kill is dropped too, and said so in one warning."""
        cut = []
        for seed in seeds:
            path = self.metrics_file(seed)
            if not path.exists():
                continue
            kept = []
            for line in path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a kill
                    cut.append(path.name)
                    continue
                if row.get("chunk", math.inf) <= chunk:
                    kept.append(line)
            atomic_write(path, "".join(f"{ln}\n" for ln in kept))
        if cut:  # rows are written before their chunk's checkpoint: the cut one is after it
            log.warning(
                "dropped a metrics line cut by a kill mid-write (%s in %s); this launch "
                "writes the rows after its checkpoint again",
                ", ".join(cut),
                self.metrics,
            )

    def append_metrics(self, seed: int, rows: Sequence[Mapping[str, Any]]) -> None:
        """Append rows to the seed's JSONL file (flushed, one line each)."""
        self.metrics.mkdir(parents=True, exist_ok=True)
        with self.metrics_file(seed).open("a") as f:
            for row in rows:
                f.write(json.dumps({k: _json_value(v) for k, v in row.items()}) + "\n")
            f.flush()


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The rows of one metrics JSONL file (a cut last line is skipped)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def find_runs(path: Path | str, depth: int = 3) -> list[Path]:
    """The run directories (those with a :data:`RUN_FILE`) below ``path``, up to ``depth``
    levels down (a sweep's or a multirun's folder), sorted."""
    patterns = ["/".join(["*"] * d) for d in range(1, depth + 1)]
    return sorted(
        {p.parent for pattern in patterns for p in Path(path).glob(f"{pattern}/{RUN_FILE}")}
    )


def peek_run(path: Path | str) -> dict[str, Any]:
    """A run directory's ``run.json`` for a reader outside the run loop (a report, a
    figure): ``{}`` when it is missing, unreadable or not a JSON object."""
    try:
        data = json.loads((Path(path) / RUN_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
