"""The run loop: seed-vmapped, compiled once, chunked on the host, checkpointed, resumable.

    checks (run dir path, env facts, lock, stored config)      nothing written yet
    state = vmap(agent.init)(seed keys)  or the latest checkpoint (migrated if the
                                         run's length changed)
    W&B started; run.json, wandb_ids.json, launcher.log        the run dir is now made
    compile train ("compiling" on the bar; kept out of steps/s)
    for each chunk c of log_frequency env steps:
        state, metrics = train(state, ticks of c)              ticks unbatched
        agent.check + finiteness guards -> per-seed metrics JSONL + W&B + TensorBoard
        -> evaluation on its schedule -> checkpoint (named by env step)
        -> W&B gets the rows of the chunks the checkpoint covers

The tick array holds absolute tick indices, ``(c-1)*C + arange(C)``; a resumed run
restores the state and continues the ticks at the saved offset, bit-identical to an
uninterrupted one on CPU (tested, also after ``kill -9`` at each point of
:mod:`launcher.faults`).

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

import jax
import jax.numpy as jnp
import numpy as np

from launcher import build, faults, guards, provenance
from launcher.callbacks import Callbacks
from launcher.checkpoint import Checkpointer
from launcher.errors import ConfigError, RunStopped
from launcher.interrupts import CtrlC
from launcher.loggers import RunLoggers, finish_complete, kept_rows
from launcher.program import SeedProgram, seed_keys
from launcher.progress import Progress
from launcher.rows import per_seed_rows, seed_mean, to_host
from launcher.rundir import RunDir
from launcher.schema import RunSpec
from launcher.summary import RunResult
from launcher.wandb_logger import WandbRuns

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
      plot: write ``plots/learning_curves.png`` at the end.

    Raises:
      ConfigError: before anything is written (an env the agent cannot run, a run dir
        that is a file, unwritable, locked by another launch or holding another config,
        no readable checkpoint in a run dir that has some, W&B failing to start).
      RunStopped: during the run (the agent's check, a non-finite or diverging loss or
        parameter); the checkpoints saved before are kept.
    """
    rd = RunDir(run_dir)
    guards.check_run_dir_path(rd.path)
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
        return _locked_run(spec, rd, env, agent, callbacks, fresh, make_env, plot)
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
    make_env: build.MakeEnv | None,
    plot: bool,
) -> RunResult:
    p = spec.protocol
    seeds = list(p.seeds)
    chunk_ticks = int(agent.ticks_for(p.log_frequency))
    total_ticks = int(agent.ticks_for(p.n_timesteps))
    n_chunks = chunk_count(total_ticks, chunk_ticks)
    program = SeedProgram(agent, len(seeds), p.shard_seeds, p.fast_compile)
    init_keys, eval_keys = (program.place(k) for k in seed_keys(seeds))
    started = False
    ckpt = None
    try:
        stored = rd.check_config(spec)
        # Read only until the launch is accepted: a writing manager removes orbax's
        # temporary directories (a save cut by a kill) as it opens, which wrote into the
        # run dir of a launch refused below (e.g. +resume=force shorter than the run).
        if not fresh and rd.checkpoints.is_dir():
            ckpt = Checkpointer(rd.checkpoints, p.keep_checkpoints, rd.corrupt, create=False)
        restored = _restore(spec, env, program, init_keys, ckpt) if ckpt else None
        if restored is not None:
            state, meta = restored
            if int(meta["tick"]) == total_ticks:
                ckpt.close()
                ckpt = None
                return _complete(spec, rd, n_chunks, meta, program, state, plot)
            if int(meta["timestep"]) > p.n_timesteps:
                raise ConfigError(
                    f"protocol.n_timesteps: the run in {rd.path} has already taken "
                    f"{meta['timestep']} env steps, more than n_timesteps={p.n_timesteps}; "
                    "ask for at least that many"
                )
            saved_total = int(meta.get("n_timesteps", p.n_timesteps))
            if saved_total != p.n_timesteps:
                try:
                    state = program.migrate(state, saved_total)
                except ValueError as err:
                    raise ConfigError(f"protocol.n_timesteps: {err}") from None
            start, steps_done = int(meta["chunk"]), int(meta["timestep"])
            wandb_ids = {int(k): v for k, v in meta["wandb_ids"].items()}
        else:
            state = program.init(init_keys)
            if callbacks.pretrain:
                state = program.place(callbacks.run_pretrain(state, spec))
            start, steps_done = 0, 0
            wandb_ids = rd.read_wandb_ids() or WandbRuns.new_ids(seeds, spec.logger.mode)
        loggers = RunLoggers(spec, seeds, wandb_ids, rd)
        started = True
    except BaseException:
        if ckpt is not None:
            ckpt.close()
        if not started:
            _discard(rd, fresh)
        raise

    handler = _log_to(rd.path / LOG_FILE)
    if ckpt is not None:
        ckpt.close()
    ckpt = Checkpointer(rd.checkpoints, p.keep_checkpoints, rd.corrupt)
    if restored is not None:
        log.info("resuming %s after chunk %d (timestep %d)", rd.path, start, steps_done)
    else:
        log.info("starting %s: %d chunks of %d ticks", rd.path, n_chunks, chunk_ticks)
    rd.truncate_metrics(seeds, start if restored is not None else -1)
    origin = provenance.collect()
    rd.append_launch({"started": time.time(), "resumed_at_step": steps_done, **origin})
    if stored is None or stored.get("config_hash") != spec.config_hash:
        rd.write_run(spec, {**_run_facts(agent, env, program), "provenance": origin})
    rd.write_wandb_ids(wandb_ids)
    loggers.open(steps_done if restored is not None else None)

    bar = Progress(p.n_timesteps, steps_done, spec.logger.progress, spec.run_name)
    evaluating = p.eval_frequency > 0
    final_train: list[dict[str, Any]] = []
    final_eval: list[dict[str, Any]] = []
    stopped = False
    chunk = start
    compile_seconds = 0.0
    updates_before = np.asarray(to_host(jax.vmap(agent.counters)(state))["Train/n_updates"])
    wandb_dirs = loggers.offline_dirs()

    def record(rows: list[dict[str, Any]], chunk: int) -> None:
        for i, (seed, row) in enumerate(zip(seeds, rows, strict=True)):
            rd.append_metrics(seed, [row])
            if i == 0:
                faults.point("metrics", chunk)
        loggers.record(rows)  # W&B gets them once their checkpoint is saved (commit below)

    def evaluate(state: Any, chunk: int, steps: int) -> tuple[Any, list[dict[str, Any]]]:
        state, em = program.evaluate(state, eval_keys)
        em = callbacks.run_eval_metrics(to_host(em), chunk)
        rows = per_seed_rows(em, len(seeds), {"kind": "eval", "chunk": chunk, "timestep": steps})
        record(rows, chunk)
        faults.point("evaluated", chunk)
        bar.eval = seed_mean(em, "Eval/episodic mean reward")
        return state, rows

    try:
        with CtrlC() as ctrl_c:
            if restored is None and evaluating and p.eval_at_start:
                state, final_eval = evaluate(state, 0, 0)
            for chunk in range(start + 1, n_chunks + 1):
                t0 = (chunk - 1) * chunk_ticks
                t1 = total_ticks if chunk == n_chunks else chunk * chunk_ticks
                if not program.is_compiled(t1 - t0):
                    bar.phase("compiling")
                    log.info("compiling train for chunks of %d ticks", t1 - t0)
                    clock = time.perf_counter()
                    program.compile_train(state, t1 - t0)
                    compile_seconds += time.perf_counter() - clock
                    bar.phase(None)
                clock = time.perf_counter()
                state, metrics = program.train(state, jnp.arange(t0, t1, dtype=jnp.int32))
                metrics = to_host(metrics)
                seconds = time.perf_counter() - clock
                ctrl_c.check()  # a Ctrl-C swallowed during the call stops here, unsaved
                faults.point("trained", chunk)
                guards.check_chunk(agent, metrics, state, chunk, spec, updates_before)
                updates_before = np.asarray(metrics["Train/n_updates"])
                steps = int(np.max(metrics["timestep"]))
                sps = (steps - steps_done) / max(seconds, 1e-9)
                metrics = callbacks.run_post_update(metrics, chunk)
                timing = {"time/steps_per_second": sps, "time/chunk_seconds": seconds}
                final_train = per_seed_rows(
                    metrics, len(seeds), {"kind": "train", "chunk": chunk, **timing}
                )
                record(final_train, chunk)
                bar.train = seed_mean(metrics, "Train/episodic mean reward")

                last = chunk == n_chunks
                stop = spec.control.stop_after_chunks is not None and (
                    chunk - start >= spec.control.stop_after_chunks
                )
                if evaluating and (last or _crossed(steps_done, steps, p.eval_frequency)):
                    state, final_eval = evaluate(state, chunk, steps)
                if last or stop or _crossed(steps_done, steps, p.checkpoint_frequency):
                    meta = {
                        "chunk": chunk,
                        "tick": t1,
                        "timestep": steps,
                        "n_timesteps": p.n_timesteps,
                        "chunk_ticks": chunk_ticks,
                        "config_hash": spec.config_hash,
                        "seeds": seeds,
                        "wandb_ids": {str(k): v for k, v in wandb_ids.items()},
                    }
                    ckpt.save(steps, state, meta)
                    faults.point("saving", chunk)
                    ckpt.wait()
                    faults.point("saved", chunk)
                    loggers.commit()
                    log.info("chunk %d: checkpoint at env step %d", chunk, steps)
                bar.update(steps - steps_done, sps)
                steps_done = steps
                if stop and not last:
                    stopped = True
                    break
    except RunStopped as err:
        log.error("%s", err)
        raise
    finally:
        ckpt.close()
        loggers.finish()
        bar.close()
        _unlog(handler)

    return RunResult(
        run_dir=rd.path,
        spec=spec,
        n_chunks=n_chunks,
        chunks_done=chunk,
        resumed_from=start if restored is not None else None,
        stopped_early=stopped,
        final_train=final_train,
        final_eval=final_eval,
        metrics_files=[rd.metrics_file(s) for s in seeds],
        plot=_plot(rd.path) if plot else None,
        wandb_dirs=wandb_dirs,
        compiles=program.compiles(),
        n_devices=program.n_devices,
        state=state,
        compile_seconds=compile_seconds,
    )


# --------------------------------------------------------------------- pieces
def _restore(
    spec: RunSpec, env: Any, program: SeedProgram, init_keys: Any, ckpt: Checkpointer
) -> tuple[Any, dict[str, Any]] | None:
    """The latest readable checkpoint, restored with the shapes it was saved with."""
    target = program.abstract(init_keys)

    def abstract_for(meta: Mapping[str, Any]) -> Any:
        n_old = int(meta.get("n_timesteps", spec.protocol.n_timesteps))
        if n_old == spec.protocol.n_timesteps:
            return target
        return program.abstract(init_keys, build.make_agent(spec, env, n_old))

    return ckpt.restore_latest(abstract_for)


def _complete(
    spec: RunSpec,
    rd: RunDir,
    n_chunks: int,
    meta: Mapping[str, Any],
    program: SeedProgram,
    state: Any,
    plot: bool,
) -> RunResult:
    """The result of relaunching a finished run: nothing trained, logged or written
    (but the rows its W&B logs lack, after a kill that kept the last ones from W&B)."""
    seeds = list(spec.protocol.seeds)
    finals: dict[str, list[dict[str, Any]]] = {"train": [], "eval": []}
    kept = kept_rows(rd, seeds)
    for rows in kept:
        for kind in finals:
            last = [r for r in rows if r.get("kind") == kind]
            finals[kind].append(last[-1] if last else {})
    curves = rd.plots / "learning_curves.png"
    log.info("%s is already complete (chunk %d)", rd.path, meta["chunk"])
    wandb_dirs = finish_complete(spec, rd, kept)
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
        wandb_dirs=wandb_dirs,
        compiles=program.compiles(),
        n_devices=program.n_devices,
        state=state,
        already_complete=True,
    )


def _plot(path: Path) -> Path | None:
    try:
        from launcher.report import plot_run

        return plot_run(path)
    except Exception as err:  # noqa: BLE001 - the curves are a courtesy
        log.warning("could not plot the learning curves: %s", err)
        return None


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
    (TD-MPC2's reset tick after an episode's last step, ``agent.n_envs=2``), which takes no
    env step, so its checkpoint would have the previous chunk's env-step name."""
    n = math.ceil(total_ticks / chunk_ticks)
    return n - 1 if n > 1 and total_ticks - (n - 1) * chunk_ticks == 1 else n


def _crossed(before: int, after: int, every: int) -> bool:
    """Whether a multiple of ``every`` lies in (before, after]."""
    return every > 0 and after // every > before // every


def _run_facts(agent: Any, env: Any, program: SeedProgram) -> dict[str, Any]:
    import dataclasses

    spec = getattr(env, "spec", None)
    return {
        **build.describe_agent(agent),
        "env_spec": dataclasses.asdict(spec) if dataclasses.is_dataclass(spec) else {},
        "n_devices": program.n_devices,
    }
