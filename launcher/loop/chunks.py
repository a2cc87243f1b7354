"""The chunk loop of an accepted launch (:mod:`launcher.loop.run` accepts and opens it).

One chunk, in order (the fault points of :mod:`launcher.loop.faults` in brackets)::

    compile train for the chunk's tick count (once; "compiling" on the bar)
    state, metrics = train(state, ticks)      Ctrl-C check   [trained]
    agent.check + finiteness guards           (RunStopped)
    train rows -> every output (launcher.logger.loggers), in order:   [metrics]
        metrics JSONL, W&B (staged), TensorBoard, ...
    evaluation on its schedule -> eval rows                    [metrics] [evaluated]
    checkpoint on its schedule (and at a stop / the end)       [saving] [saved]
        -> the outputs flushed: W&B logs the rows the checkpoint covers (and, with
           logger.checkpoint_artifact, the checkpoint: launcher.logger.wandb_carry)
    progress bar
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from launcher.config import guards
from launcher.config.schema import RunSpec
from launcher.logger.loggers import RunOutputs
from launcher.loop import faults
from launcher.loop.callbacks import Callbacks
from launcher.loop.interrupts import CtrlC
from launcher.loop.program import SeedProgram
from launcher.loop.progress import Progress
from launcher.loop.rows import per_seed_rows, seed_mean, to_host
from launcher.store.checkpoint import Checkpointer
from launcher.store.rundir import RunDir

log = logging.getLogger("launcher.loop.run")  # its records kept the run loop's name (launcher.log)


@dataclasses.dataclass(frozen=True)
class Launch:
    """An accepted launch: what its chunks read (their changing state is the loop's).

    ``start``/``steps_done``: the chunk and env step restored from (0, 0 for a new run);
    ``resumed``: whether a checkpoint was restored."""

    spec: RunSpec
    rd: RunDir
    agent: Any
    program: SeedProgram
    callbacks: Callbacks
    loggers: RunOutputs
    eval_keys: Any
    chunk_ticks: int
    total_ticks: int
    n_chunks: int
    start: int
    steps_done: int
    resumed: bool

    @property
    def seeds(self) -> list[int]:
        return list(self.spec.protocol.seeds)

    def ticks(self, chunk: int) -> tuple[int, int]:
        """The absolute ticks ``[t0, t1)`` of ``chunk`` (the last one takes the rest)."""
        t1 = self.total_ticks if chunk == self.n_chunks else chunk * self.chunk_ticks
        return (chunk - 1) * self.chunk_ticks, t1


class ChunkLoop:
    """Trains ``launch``'s chunks from its start to the last one, or to a requested stop.

    After :meth:`run`: ``state``, ``chunk`` (the last chunk run), ``stopped``,
    ``final_train`` / ``final_eval`` (the last rows), ``compile_seconds``."""

    def __init__(self, launch: Launch, state: Any, ckpt: Checkpointer, bar: Progress) -> None:
        self.launch, self.state, self.ckpt, self.bar = launch, state, ckpt, bar
        self.chunk = launch.start
        self.steps_done = launch.steps_done
        self.stopped = False
        self.compile_seconds = 0.0
        self.final_train: list[dict[str, Any]] = []
        self.final_eval: list[dict[str, Any]] = []
        counters = to_host(jax.vmap(launch.agent.counters)(state))
        self.updates_before = np.asarray(counters["Train/n_updates"])

    def run(self, ctrl_c: CtrlC) -> None:
        """The evaluation at step 0 (a new run, when asked), then the chunks."""
        launch, p = self.launch, self.launch.spec.protocol
        if not launch.resumed and p.eval_frequency > 0 and p.eval_at_start:
            self.final_eval = self.evaluate(0, 0)
        for chunk in range(launch.start + 1, launch.n_chunks + 1):
            self.chunk = chunk
            if self.one_chunk(chunk, ctrl_c):
                self.stopped = True
                break

    def one_chunk(self, chunk: int, ctrl_c: CtrlC) -> bool:
        """Train, guard, record, evaluate, checkpoint ``chunk``; whether the run stops
        here before its end (``control.stop_after_chunks``)."""
        launch, p = self.launch, self.launch.spec.protocol
        t0, t1 = launch.ticks(chunk)
        metrics, seconds = self._train(chunk, t0, t1, ctrl_c)
        steps = int(np.max(metrics["timestep"]))
        sps = (steps - self.steps_done) / max(seconds, 1e-9)
        self._record_train(chunk, metrics, seconds, sps)
        last = chunk == launch.n_chunks
        after = launch.spec.control.stop_after_chunks
        stop = after is not None and chunk - launch.start >= after
        if p.eval_frequency > 0 and (last or _crossed(self.steps_done, steps, p.eval_frequency)):
            self.final_eval = self.evaluate(chunk, steps)
        if last or stop or _crossed(self.steps_done, steps, p.checkpoint_frequency):
            self._checkpoint(chunk, t1, steps)
        self.bar.update(steps - self.steps_done, sps)
        self.steps_done = steps
        return stop and not last

    def _train(self, chunk: int, t0: int, t1: int, ctrl_c: CtrlC) -> tuple[Any, float]:
        """The chunk's train call (compiled first if new), its Ctrl-C check and guards;
        the host metrics and the call's seconds."""
        launch = self.launch
        if not launch.program.is_compiled(t1 - t0):
            self.bar.phase("compiling")
            log.info("compiling train for chunks of %d ticks", t1 - t0)
            clock = time.perf_counter()
            launch.program.compile_train(self.state, t1 - t0)
            self.compile_seconds += time.perf_counter() - clock
            self.bar.phase(None)
        clock = time.perf_counter()
        ticks = jnp.arange(t0, t1, dtype=jnp.int32)
        self.state, metrics = launch.program.train(self.state, ticks)
        metrics = to_host(metrics)
        seconds = time.perf_counter() - clock
        ctrl_c.check()  # a Ctrl-C swallowed during the call stops here, unsaved
        faults.point("trained", chunk)
        guards.check_chunk(
            launch.agent, metrics, self.state, chunk, launch.spec, self.updates_before
        )
        self.updates_before = np.asarray(metrics["Train/n_updates"])
        return metrics, seconds

    def _record_train(self, chunk: int, metrics: Any, seconds: float, sps: float) -> None:
        """The chunk's train rows (after the post-update callbacks) to every log."""
        launch = self.launch
        metrics = launch.callbacks.run_post_update(metrics, chunk)
        timing = {"time/steps_per_second": sps, "time/chunk_seconds": seconds}
        extra = {"kind": "train", "chunk": chunk, **timing}
        self.final_train = per_seed_rows(metrics, len(launch.seeds), extra)
        self._record(self.final_train)
        self.bar.train = seed_mean(metrics, "Train/episodic mean reward")

    def _record(self, rows: list[dict[str, Any]]) -> None:
        """One row per seed to every output (the metrics files first)."""
        self.launch.loggers.write(rows)  # an output may hold them until the flush

    def evaluate(self, chunk: int, steps: int) -> list[dict[str, Any]]:
        """Evaluate the state (which the evaluation advances) and record the rows."""
        launch = self.launch
        self.state, em = launch.program.evaluate(self.state, launch.eval_keys)
        em = launch.callbacks.run_eval_metrics(to_host(em), chunk)
        extra = {"kind": "eval", "chunk": chunk, "timestep": steps}
        rows = per_seed_rows(em, len(launch.seeds), extra)
        self._record(rows)
        faults.point("evaluated", chunk)
        self.bar.eval = seed_mean(em, "Eval/episodic mean reward")
        return rows

    def _checkpoint(self, chunk: int, tick: int, steps: int) -> None:
        """Save the state after ``chunk`` (named by env step), then flush the outputs."""
        launch, p = self.launch, self.launch.spec.protocol
        meta = {
            "chunk": chunk,
            "tick": tick,
            "timestep": steps,
            "n_timesteps": p.n_timesteps,
            "chunk_ticks": launch.chunk_ticks,
            "config_hash": launch.spec.config_hash,
            "seeds": launch.seeds,
            **launch.loggers.meta(),  # the outputs' own (read back on resume)
        }
        self.ckpt.save(steps, self.state, meta)
        faults.point("saving", chunk)
        self.ckpt.wait()
        faults.point("saved", chunk)
        launch.loggers.flush(steps)
        log.info("chunk %d: checkpoint at env step %d", chunk, steps)


def _crossed(before: int, after: int, every: int) -> bool:
    """Whether a multiple of ``every`` lies in (before, after]."""
    return every > 0 and after // every > before // every
