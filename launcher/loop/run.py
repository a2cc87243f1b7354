"""The run loop: seed-vmapped, compiled once, chunked on the host, checkpointed, resumable.

    checks (run dir path, env facts, lock, stored config)      nothing written yet
    state = vmap(agent.init)(seed keys)  or the latest checkpoint (migrated if the
                                         run's length changed)
    outputs built (W&B starts); run.json, launcher.log        the run dir is now made
    outputs opened (metrics files rolled back to the checkpoint, W&B ids kept)
    compile train ("compiling" on the bar; kept out of steps/s)
    for each chunk c of log_frequency env steps:
        state, metrics = train(state, ticks of c)              ticks unbatched
        agent.check + finiteness guards -> rows to every output (logger.outputs:
        metrics JSONL, W&B, TensorBoard, ...) -> evaluation on its schedule
        -> checkpoint (named by env step) -> the outputs flushed (W&B gets its rows)

The tick array holds absolute tick indices, ``(c-1)*C + arange(C)``; a resumed run
restores the state and continues the ticks at the saved offset, bit-identical to an
uninterrupted one on CPU (tested, also after ``kill -9`` at each point of
:mod:`launcher.loop.faults`).

In code: :func:`run` takes the lock; ``_accept`` checks, restores (:mod:`launcher.store.restore`,
the one restore path, shared with ``launcher.evaluate``) or initialises and starts the
loggers; ``_open`` writes the accepted launch into the run dir; ``_train`` runs
:class:`launcher.loop.chunks.ChunkLoop` (one chunk: train, guards, record, evaluate, checkpoint).

A launch refused before training leaves nothing behind: a run directory it created is
removed, and an existing one is not written to (only a resume may move an unreadable
checkpoint aside). A relaunch of a finished run writes nothing and says so.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from launcher.config import guards
from launcher.config.schema import RunSpec
from launcher.errors import ConfigError, RunStopped
from launcher.logger.loggers import OutputContext, RunOutputs, kept_rows, layout, prepare, top_up
from launcher.loop import build
from launcher.loop.callbacks import Callbacks
from launcher.loop.chunks import ChunkLoop, Launch
from launcher.loop.interrupts import CtrlC
from launcher.loop.program import SeedProgram, seed_keys
from launcher.loop.progress import Progress
from launcher.loop.summary import RunResult
from launcher.store import provenance, restore, rundir
from launcher.store.checkpoint import Checkpointer
from launcher.store.restore import Checkpoint
from launcher.store.rundir import RunDir

log = logging.getLogger(__name__)

TIMING_KEYS = ("time/steps_per_second", "time/chunk_seconds")
LOG_FILE = "launcher.log"


def run(
    spec: RunSpec,
    run_dir: Path | str,
    *,
    make_env: build.MakeEnv | None = None,
    plot: bool = True,
) -> RunResult:
    """Train ``spec`` in ``run_dir``, resuming from its latest complete checkpoint.

    Args:
      spec: the validated run.
      run_dir: the run directory (created if new).
      make_env: ``(id, action_repeat, episode_length) -> Env``; default ``envs.make``.
      plot: run the ``run_end`` hooks at the end (:mod:`launcher.loop.callbacks`; by default
        the learning-curve PNG, ``plots/learning_curves.png``).

    Raises:
      ConfigError: before anything is written (an env the agent cannot run, a run dir
        that is a file, unwritable, locked by another launch or holding another config,
        no readable checkpoint in a run dir that has some, W&B failing to start).
      RunStopped: during the run (the agent's check, a non-finite or diverging loss or
        parameter); the checkpoints saved before are kept.
    """
    rd = RunDir(run_dir)
    rundir.check_path(rd.path, *layout(spec))
    env = build.make_env(spec, make_env)
    agent = build.make_agent(spec, env)
    callbacks = Callbacks.build(spec.callbacks)
    rd.path.mkdir(parents=True, exist_ok=True)
    lock = guards.RunLock(rd.path)
    # Refused: the directory is another launch's, even if it is still empty (that launch
    # may be initialising before it writes a file), so nothing is removed here.
    lock.acquire()
    try:
        # Whether this launch starts the run (and removes the directory if refused) is
        # judged under the lock: before it, another launch may have been filling it.
        fresh = not any(rd.path.iterdir())
        return _locked_run(spec, rd, env, agent, callbacks, fresh, plot)
    finally:
        lock.release()


def _discard(rd: RunDir, fresh: bool) -> None:
    """Remove a run directory this launch created (refused before training)."""
    if fresh and rd.path.is_dir():
        shutil.rmtree(rd.path, ignore_errors=True)


def _locked_run(
    spec: RunSpec,
    rd: RunDir,
    env: Any,
    agent: Any,
    callbacks: Callbacks,
    fresh: bool,
    plot: bool,
) -> RunResult:
    """The launch under its lock: accepted (or the finished run's result), opened, trained."""
    p = spec.protocol
    program = SeedProgram(agent, len(p.seeds), p.shard_seeds, p.fast_compile)
    accepted = _accept(spec, rd, env, program, callbacks, fresh, plot)
    if isinstance(accepted, RunResult):
        return accepted
    launch, state, stored = accepted
    handler = _log_to(rd.path / LOG_FILE)
    ckpt = _open(launch, env, stored)
    return _train(launch, state, ckpt, handler, plot)


def _accept(
    spec: RunSpec,
    rd: RunDir,
    env: Any,
    program: SeedProgram,
    callbacks: Callbacks,
    fresh: bool,
    plot: bool,
) -> tuple[Launch, Any, dict[str, Any] | None] | RunResult:
    """Check the launch, restore its latest checkpoint or initialise, start its loggers:
    ``(launch, state, stored run.json)``, or the result of a finished run's relaunch.
    Refused (any exception): nothing written, a run directory this launch made removed."""
    p, seeds = spec.protocol, list(spec.protocol.seeds)
    chunk_ticks = int(program.agent.ticks_for(p.log_frequency))
    total_ticks = int(program.agent.ticks_for(p.n_timesteps))
    n_chunks = chunk_count(total_ticks, chunk_ticks)
    try:
        stored = rd.check_config(spec)
        carried = prepare(spec, rd)  # an output brought a checkpoint in (+from_artifact)
        if carried:
            stored = rd.check_config(spec)
        restored = _resume_point(spec, rd, env, program, fresh and not carried)
        if restored is not None and int(restored.meta["tick"]) == total_ticks:
            finished = (restored.meta, restored.state)
            return _complete(spec, rd, n_chunks, finished, program, callbacks, plot)
        if restored is not None:
            state, start, steps_done = _resume(spec, rd, program, restored)
        else:
            state, start, steps_done = _begin(spec, program, callbacks)
        reference = callbacks.run_reference_rows(spec)
        meta = restored.meta if restored is not None else None
        loggers = RunOutputs(OutputContext(spec, rd.path, tuple(seeds), meta), reference)
    except BaseException:
        _discard(rd, fresh)
        raise
    launch = Launch(
        spec=spec,
        rd=rd,
        agent=program.agent,
        program=program,
        callbacks=callbacks,
        loggers=loggers,
        eval_keys=program.place(seed_keys(seeds)[1]),
        chunk_ticks=chunk_ticks,
        total_ticks=total_ticks,
        n_chunks=n_chunks,
        start=start,
        steps_done=steps_done,
        resumed=restored is not None,
    )
    return launch, state, stored


def _resume_point(
    spec: RunSpec, rd: RunDir, env: Any, program: SeedProgram, fresh: bool
) -> Checkpoint | None:
    """The latest readable checkpoint of an existing run (unreadable newer ones moved aside).

    Read only until the launch is accepted: a writing manager removes orbax's temporary
    directories (a save cut by a kill) as it opens, which wrote into the run dir of a
    launch refused later (e.g. +resume=force shorter than the run)."""
    if fresh or not rd.checkpoints.is_dir():
        return None
    p = spec.protocol
    ckpt = Checkpointer(rd.checkpoints, p.keep_checkpoints, rd.corrupt, create=False)
    try:
        return restore.restore_latest(ckpt, spec, env, program, set_aside=True)
    finally:
        ckpt.close()


def _resume(
    spec: RunSpec, rd: RunDir, program: SeedProgram, restored: Checkpoint
) -> tuple[Any, int, int]:
    """``(state, chunk, env step)`` to continue from ``restored``, migrated when the
    run's length changed; ConfigError when the run is already past the asked length."""
    p, meta = spec.protocol, restored.meta
    if int(meta["timestep"]) > p.n_timesteps:
        raise ConfigError(
            f"protocol.n_timesteps: the run in {rd.path} has already taken "
            f"{meta['timestep']} env steps, more than n_timesteps={p.n_timesteps}; "
            "ask for at least that many"
        )
    state = restored.state
    if restored.saved_length != p.n_timesteps:
        try:
            state = program.migrate(state, restored.saved_length)
        except ValueError as err:
            raise ConfigError(f"protocol.n_timesteps: {err}") from None
    return state, int(meta["chunk"]), int(meta["timestep"])


def _begin(spec: RunSpec, program: SeedProgram, callbacks: Callbacks) -> tuple[Any, int, int]:
    """``(state, 0, 0)`` of a new run: initialised, then the pretrain callbacks."""
    seeds = list(spec.protocol.seeds)
    state = program.init(program.place(seed_keys(seeds)[0]))
    if callbacks.pretrain:
        state = program.place(callbacks.run_pretrain(state, spec))
    return state, 0, 0


def _open(launch: Launch, env: Any, stored: dict[str, Any] | None) -> Checkpointer:
    """Write the accepted launch into its run dir (its launch record, run.json when new or
    changed), open the outputs (the metrics files rolled back to the restored chunk, the
    W&B ids kept); returns the writing checkpointer."""
    spec, rd, p = launch.spec, launch.rd, launch.spec.protocol
    start, steps_done = launch.start, launch.steps_done
    ckpt = Checkpointer(rd.checkpoints, p.keep_checkpoints, rd.corrupt)
    if launch.resumed:
        log.info("resuming %s after chunk %d (timestep %d)", rd.path, start, steps_done)
    else:
        log.info("starting %s: %d chunks of %d ticks", rd.path, launch.n_chunks, launch.chunk_ticks)
    origin = provenance.collect()
    record = {"started": time.time(), "resumed_at_step": steps_done, **origin}
    if spec.control.from_artifact is not None:  # a requeue of this command resumes here
        record["from_artifact"] = spec.control.from_artifact
    rd.append_launch(record)
    if stored is None or stored.get("config_hash") != spec.config_hash:
        facts = _run_facts(launch.agent, env, launch.program)
        rd.write_run(spec, {**facts, "provenance": origin})
    if launch.resumed:
        launch.loggers.open(steps_done, start)
    else:
        launch.loggers.open(None, None)
    return ckpt


def _train(
    launch: Launch, state: Any, ckpt: Checkpointer, handler: logging.Handler, plot: bool
) -> RunResult:
    """Run the chunk loop under the Ctrl-C handler; close the checkpointer, loggers, bar
    and log file whatever happens."""
    spec = launch.spec
    shown = spec.logger.progress
    bar = Progress(spec.protocol.n_timesteps, launch.steps_done, shown, spec.run_name)
    loop = ChunkLoop(launch, state, ckpt, bar)
    upload_dirs = launch.loggers.upload_dirs()
    try:
        with CtrlC() as ctrl_c:
            loop.run(ctrl_c)
    except RunStopped as err:
        log.error("%s", err)
        raise
    finally:
        ckpt.close()
        launch.loggers.finish()
        bar.close()
        _unlog(handler)
    return RunResult(
        run_dir=launch.rd.path,
        spec=spec,
        n_chunks=launch.n_chunks,
        chunks_done=loop.chunk,
        resumed_from=launch.start if launch.resumed else None,
        stopped_early=loop.stopped,
        final_train=loop.final_train,
        final_eval=loop.final_eval,
        metrics_files=[launch.rd.metrics_file(s) for s in launch.seeds],
        plot=launch.callbacks.run_run_end(launch.rd.path) if plot else None,
        upload_dirs=upload_dirs,
        compiles=launch.program.compiles(),
        n_devices=launch.program.n_devices,
        state=loop.state,
        compile_seconds=loop.compile_seconds,
    )


def _complete(
    spec: RunSpec,
    rd: RunDir,
    n_chunks: int,
    finished: tuple[Mapping[str, Any], Any],
    program: SeedProgram,
    callbacks: Callbacks,
    plot: bool,
) -> RunResult:
    """The result of relaunching a finished run (``finished``: its final checkpoint's
    metadata and state): nothing trained, logged or written (but the rows an output with
    ``top_up`` lacks: W&B's, after a kill that kept the last ones from W&B)."""
    meta, state = finished
    seeds = list(spec.protocol.seeds)
    finals: dict[str, list[dict[str, Any]]] = {"train": [], "eval": []}
    kept = kept_rows(rd, seeds)
    for rows in kept:
        for kind in finals:
            last = [r for r in rows if r.get("kind") == kind]
            finals[kind].append(last[-1] if last else {})
    curves = rd.plots / "learning_curves.png"
    log.info("%s is already complete (chunk %d)", rd.path, meta["chunk"])
    upload_dirs = top_up(spec, rd, meta, callbacks.run_reference_rows(spec))
    return RunResult(
        run_dir=rd.path,
        spec=spec,
        n_chunks=n_chunks,
        chunks_done=int(meta["chunk"]),
        resumed_from=None,
        stopped_early=False,
        final_train=finals["train"],
        final_eval=finals["eval"],
        metrics_files=[rd.metrics_file(s) for s in seeds],
        plot=curves if plot and curves.exists() else None,
        upload_dirs=upload_dirs,
        compiles=program.compiles(),
        n_devices=program.n_devices,
        state=state,
        already_complete=True,
    )


def _log_to(path: Path) -> logging.Handler:
    """Send the launcher's log records to ``path`` (the run's ``launcher.log``)."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger("launcher")
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    return handler


def _unlog(handler: logging.Handler) -> None:
    logging.getLogger("launcher").removeHandler(handler)
    handler.close()


def chunk_count(total_ticks: int, chunk_ticks: int) -> int:
    """Chunks of ``chunk_ticks`` covering ``total_ticks``, the last one taking the rest. A
    rest of one tick joins the chunk before it: that tick may be an agent's hold tick alone
    (a reset tick after an episode's last step, e.g. with ``agent.n_envs=2``), which takes
    no env step, so its checkpoint would have the previous chunk's env-step name."""
    n = math.ceil(total_ticks / chunk_ticks)
    return n - 1 if n > 1 and total_ticks - (n - 1) * chunk_ticks == 1 else n


def _run_facts(agent: Any, env: Any, program: SeedProgram) -> dict[str, Any]:
    import dataclasses

    spec = getattr(env, "spec", None)
    return {
        **build.describe_agent(agent),
        "env_spec": dataclasses.asdict(spec) if dataclasses.is_dataclass(spec) else {},
        "n_devices": program.n_devices,
    }
