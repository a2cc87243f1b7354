"""The run's outputs: where its metric rows go, one class each, behind one protocol.

    logger.outputs=[jsonl, wandb, tensorboard, my_pkg.out:MyOutput]

An output is a class, named in :data:`OUTPUTS` or by import path (``package.module:Class``,
a user's own, no edit of the project), built once per launch from an :class:`OutputContext`
and then driven by the run loop (:mod:`launcher.loop.run`, :mod:`launcher.loop.chunks`), the same
calls for every output, in list order::

    Output(ctx)       check and start; write nothing (a ConfigError refuses the launch:
                      exit 2, the run directory left as it was found)
    open(start)       the run directory is made. ``start``: the checkpoint resumed from
                      (``step``, ``chunk``; None for a fresh run) and the rows the run keeps
                      up to it, per seed (``kept``), and the reference rows. Drop what you
                      hold past ``start.step``, take the kept rows you lack
    write(rows)       one row per seed (``ctx.seeds`` order): a train chunk's or an evaluation's
    flush(step)       checkpoint ``step`` is saved: the rows written so far are the run's
                      for good (a kill from here on resumes after them)
    finish()          the launch ends (done, stopped or failed)

Optional: ``meta() -> dict`` (merged into each checkpoint's metadata, read back as
``ctx.resumed_meta``), ``upload_dirs() -> list[str]`` (printed for a later upload), and the
classmethod ``top_up(ctx, start) -> list[str]`` (a finished run's relaunch: the rows it lacks,
nothing else started). Rows written between two flushes are rolled back by a kill; an
output holds each row once through a kill -9 + resume by either holding rows until
``flush`` (W&B) or dropping those past ``start.step`` in ``open`` (jsonl, TensorBoard). A
row is ``{"kind": "train"|"eval", "chunk", "timestep", metric: number or list, ...}``.

An output also declares, on its class, what the launcher would otherwise have to know
about it (all optional; the launcher calls these and names no output)::

    FILES, FOLDERS       its files and folders in the run directory (FOLDERS: name -> what
                         it holds); a folder holding one of FILES is a run directory
    KEY_HINTS            a key people misplace -> where it lives (``tensorboard=true``)
    default(logger)      listed when ``logger.outputs`` is not given (the presets)
    configure(given, listed) -> LoggerSpec   check its settings against the list
                         (:class:`Given`) and return the logger spec agreeing with it
    prepare(spec, rd)    before the launch restores: bring a checkpoint in (W&B's
                         ``+from_artifact``); True if the launch resumes what is there now
    summary(spec, run_dir, dirs) -> [(label, text)]   its lines of the end-of-run summary

The built-in outputs' declarations count whether they are listed or not (their settings
are checked and their files belong to the layout either way); a user's output's, when
listed.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from launcher.config.coerce import close_matches, listing
from launcher.config.schema import LoggerSpec, RunControl, RunSpec
from launcher.errors import ConfigError
from launcher.store.rundir import RunDir, read_metrics

# The built-in outputs: name -> import path (imported only when listed).
OUTPUTS = {
    "jsonl": "launcher.logger.jsonl_output:JsonlOutput",
    "wandb": "launcher.logger.wandb_output:WandbOutput",
    "tensorboard": "launcher.logger.tensorboard_logger:TensorBoardOutput",
}
RECORD = "jsonl"  # the metrics files: every run keeps them (resume, report and catch-up read them)
METHODS = ("open", "write", "flush", "finish")

Row = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class OutputContext:
    """What an output is built from: the run, its directory and seeds, and the metadata of
    the checkpoint this launch resumes from (None for a fresh run)."""

    spec: RunSpec
    run_dir: Path
    seeds: tuple[int, ...]
    resumed_meta: Mapping[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class Start:
    """Where a launch starts: ``step``/``chunk`` of the restored checkpoint (None: a fresh
    run), ``kept`` (per seed, the metrics rows of chunks <= ``chunk``), ``reference`` (the
    ``reference_rows`` hooks' rows, by default the paper's curve)."""

    step: int | None
    chunk: int | None
    kept: tuple[tuple[Row, ...], ...]
    reference: tuple[Row, ...] = ()


def load_output(name: str, where: str = "logger.outputs") -> type:
    """The class of one output (a built-in name or ``package.module:Class``); ConfigError
    naming ``where`` if it cannot be imported or lacks a protocol method."""
    path = OUTPUTS.get(name, name)
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"{where}: {name!r} is not an output; {close_matches(name, list(OUTPUTS))}"
            f"choose from {listing(list(OUTPUTS))}, or give an import path package.module:Class"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - a user's module: any error is one line
        first = (str(err).strip().splitlines() or [""])[0]
        raise ConfigError(
            f"{where}: cannot import {module_name!r} ({type(err).__name__}: {first})"
        ) from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise ConfigError(f"{where}: {module_name!r} has no {attr!r}")
    missing = [m for m in METHODS if not callable(getattr(cls, m, None))]
    if not isinstance(cls, type) or missing:
        lacks = f"lacks {', '.join(missing)}" if isinstance(cls, type) else "is not a class"
        raise ConfigError(
            f"{where}: {path} {lacks}; an output is a class with {', '.join(METHODS)} "
            "(launcher.logger.loggers)"
        )
    return cls


@dataclasses.dataclass(frozen=True)
class Given:
    """What an output's ``configure`` checks: the logger section (as agreed so far), the
    run control, the resolved output list (``names``, the record first) and the list as
    given (``shown``, for messages)."""

    logger: LoggerSpec
    control: RunControl
    names: tuple[str, ...]
    shown: str


def builtins() -> dict[str, type]:
    """The built-in outputs' classes, by name (each module imported)."""
    return {name: load_output(name) for name in OUTPUTS}


def resolve(logger: LoggerSpec, control: RunControl | None = None) -> LoggerSpec:
    """``logger`` with its output list filled in (the outputs' ``default`` when not given:
    the presets) and checked, each output's settings made to agree with it (``configure``)."""
    known = builtins()
    names = logger.outputs
    if names is None:
        names = tuple(n for n, cls in known.items() if _hook(cls, "default", False, logger))
    names = tuple(str(n) for n in names)
    listed = [(n, load_output(n, f"logger.outputs[{i}]")) for i, n in enumerate(names)]
    shown = f"[{','.join(names)}]"
    if RECORD not in names:
        raise ConfigError(
            f"logger.outputs: {shown} leaves out {RECORD}, the metrics files every run keeps "
            f"(resume and the report read them); list it: logger.outputs=[{RECORD},{shown[1:]}"
        )
    if len(set(names)) < len(names):
        raise ConfigError(f"logger.outputs: {shown} names an output twice; list each once")
    names = (RECORD, *(n for n in names if n != RECORD))  # the record first: others read it
    given = Given(logger, control or RunControl(), names, shown)
    for name, cls in {**known, **dict(listed)}.items():
        agreed = _hook(cls, "configure", given.logger, given, name in names)
        given = dataclasses.replace(given, logger=agreed)
    return dataclasses.replace(given.logger, outputs=names)


def _hook(cls: type, name: str, absent: Any, *args: Any) -> Any:
    """``cls.name(*args)``, an optional declaration; ``absent`` where the class has none."""
    hook = getattr(cls, name, None)
    return hook(*args) if callable(hook) else absent


def _declared(spec: RunSpec | None) -> list[type]:
    """Whose declarations count: every built-in output, and ``spec``'s listed ones."""
    classes = builtins()
    for name in (spec.logger.outputs or ()) if spec is not None else ():
        classes.setdefault(name, load_output(name))
    return list(classes.values())


def layout(spec: RunSpec | None = None) -> tuple[tuple[str, ...], dict[str, str]]:
    """The files and folders (name -> what it holds) the outputs keep in a run directory
    (:func:`launcher.store.rundir.check_path`)."""
    files: list[str] = []
    folders: dict[str, str] = {}
    for cls in _declared(spec):
        files.extend(getattr(cls, "FILES", ()))
        folders.update(getattr(cls, "FOLDERS", {}))
    return tuple(files), folders


def key_hints() -> dict[str, str]:
    """The outputs' misplaced keys -> where each lives (:func:`launcher.config.coerce.key_hint`)."""
    return {k: v for cls in _declared(None) for k, v in getattr(cls, "KEY_HINTS", {}).items()}


def prepare(spec: RunSpec, rd: RunDir) -> bool:
    """Before the launch restores: each output's ``prepare`` (W&B's ``+from_artifact``
    fetch); True if one says the launch resumes what is in ``rd`` now."""
    answers = [bool(_hook(cls, "prepare", False, spec, rd)) for cls in _declared(spec)]
    return any(answers)  # every hook ran (a list, not a generator)


def summary(
    spec: RunSpec, run_dir: Path, dirs: Mapping[str, Sequence[str]]
) -> list[tuple[str, str]]:
    """The outputs' lines of the end-of-run summary, ``(label, text)`` (label "" continues
    the line above), from the directories each wrote (``upload_dirs``, ``top_up``)."""
    lines: list[tuple[str, str]] = []
    for name, written in dirs.items():
        plain = [(name, ", ".join(written))]  # an output that declares no summary
        lines.extend(_hook(load_output(name), "summary", plain, spec, Path(run_dir), written))
    return lines


def kept_rows(rd: RunDir, seeds: Sequence[int], chunk: float = math.inf) -> list[list[Row]]:
    """Each seed's metric rows on disk of chunks <= ``chunk`` (what a resume from that
    chunk keeps; :meth:`launcher.store.rundir.RunDir.truncate_metrics`)."""
    out = []
    for path in map(rd.metrics_file, seeds):
        rows = read_metrics(path) if path.exists() else []
        out.append([r for r in rows if r.get("chunk", math.inf) <= chunk])
    return out


def _classes(spec: RunSpec) -> list[tuple[str, type]]:
    return [(n, load_output(n)) for n in resolve(spec.logger, spec.control).outputs or ()]


class RunOutputs:
    """The outputs of one launch, called in list order (module docstring)."""

    def __init__(self, ctx: OutputContext, reference: Sequence[Mapping[str, Any]] = ()) -> None:
        """Build every output (each starts here); raises ConfigError before anything is
        written, the outputs built so far finished."""
        self.ctx, self.reference = ctx, tuple(dict(r) for r in reference)
        self.outputs: list[Any] = []
        self.names: list[str] = []
        try:
            for name, cls in _classes(ctx.spec):
                self.outputs.append(_start(name, cls, ctx))
                self.names.append(name)
        except BaseException:
            self.finish()
            raise

    def open(self, step: int | None, chunk: int | None) -> None:
        """The run dir is made; ``step``/``chunk``: the restored checkpoint (None: fresh)."""
        rd = RunDir(self.ctx.run_dir)
        kept = kept_rows(rd, self.ctx.seeds, -1 if chunk is None else chunk)
        start = Start(step, chunk, tuple(map(tuple, kept)), self.reference)
        for out in self.outputs:
            out.open(start)

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        for out in self.outputs:
            out.write([dict(r) for r in rows])  # each its own copy: one may change its rows

    def flush(self, step: int) -> None:
        for out in self.outputs:
            out.flush(step)

    def meta(self) -> dict[str, Any]:
        """What the outputs keep in a checkpoint's metadata."""
        return {k: v for out in self.outputs for k, v in _optional(out, "meta", {}).items()}

    def upload_dirs(self) -> dict[str, list[str]]:
        """Output name -> the directories it wrote for a later upload (those with any)."""
        pairs = zip(self.names, self.outputs, strict=True)
        dirs = {name: list(_optional(out, "upload_dirs", [])) for name, out in pairs}
        return {name: written for name, written in dirs.items() if written}

    def finish(self) -> None:
        """Finish every output (each even if another fails; the first error is raised)."""
        first: BaseException | None = None
        for out in self.outputs:
            try:
                out.finish()
            except BaseException as err:  # noqa: BLE001 - finish the others first
                first = first or err
        self.outputs, self.names = [], []
        if first is not None:
            raise first


def _start(name: str, cls: type, ctx: OutputContext) -> Any:
    """``cls(ctx)``; any error but a ConfigError (already one line) becomes one."""
    try:
        return cls(ctx)
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001 - a user's output: one line, exit 2
        first = (str(err).strip().splitlines() or [""])[0]
        raise ConfigError(
            f"logger.outputs: {name} could not start ({type(err).__name__}: {first})"
        ) from None


def _optional(out: Any, name: str, default: Any) -> Any:
    method = getattr(out, name, None)
    return method() if callable(method) else default


def top_up(
    spec: RunSpec, rd: RunDir, meta: Mapping[str, Any], reference: Sequence[Mapping[str, Any]]
) -> dict[str, list[str]]:
    """A finished run's relaunch: each output with a ``top_up`` gets the rows it lacks (a
    kill after the final checkpoint, before it held them); output name -> the directories
    written (those with any)."""
    seeds = tuple(spec.protocol.seeds)
    ctx = OutputContext(spec, rd.path, seeds, meta)
    kept = tuple(map(tuple, kept_rows(rd, seeds)))
    start = Start(int(meta["timestep"]), int(meta["chunk"]), kept, tuple(map(dict, reference)))
    dirs: dict[str, list[str]] = {}
    for name, cls in _classes(spec):
        if callable(getattr(cls, "top_up", None)) and (written := list(cls.top_up(ctx, start))):
            dirs[name] = written
    return dirs
