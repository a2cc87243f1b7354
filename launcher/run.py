"""The run loop: seed-vmapped, jitted once, chunked on the host, checkpointed, resumable.

    state = vmap(agent.init)(seed keys)                     (or the latest checkpoint)
    for each chunk c of log_frequency env steps:
        state, metrics = jit(vmap(agent.train, in_axes=(0, None)))(state, ticks of c)
        -> per-seed metrics JSONL + W&B -> evaluation on its schedule -> checkpoint

The tick array is *unbatched* (``in_axes=(0, None)``) and holds absolute tick indices,
``(c-1)*C + arange(C)``; every chunk has the same length C, so the train function is
compiled once (a shorter last chunk, when the run length is not a multiple, compiles
once more). A resumed run restores the state and continues the ticks at the saved
offset: it is bit-identical to an uninterrupted one on CPU (tested).

With several local devices the seed axis is sharded over them (``jax.sharding``; the
largest device count that divides the number of seeds), seeds being independent.

Replay capacity: the agent is built with ``total_env_steps = protocol.n_timesteps``, so
every launch sizes the replay from the run's total length (design §5.6). A
``+resume=force`` launch that changes ``n_timesteps`` restores the checkpoint with the
shapes it was saved with and zero-pads the leaves whose leading (per-seed) axis grew
(the replay ring: a ring sized for a shorter run has not wrapped, so zero-padding it is
exactly the longer run's ring).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from launcher import build
from launcher.agents import AGENTS, AgentEntry
from launcher.callbacks import Callbacks
from launcher.checkpoint import Checkpointer
from launcher.config import RunSpec
from launcher.errors import ConfigError
from launcher.rundir import RunDir
from launcher.wandb_logger import WandbRuns

log = logging.getLogger(__name__)

TIMING_KEYS = ("time/steps_per_second", "time/chunk_seconds")


# ------------------------------------------------------------------ the program
class SeedProgram:
    """The agent's ``init`` / ``train`` / ``evaluate``, vmapped over seeds and jitted.

    Attributes:
      n_devices: devices the seed axis is sharded over (1 = no sharding).
      seed_sharding: the sharding of every seed-batched array (None if unsharded).
    """

    def __init__(self, agent: Any, n_seeds: int, shard: bool = True) -> None:
        self.agent = agent
        self.traces = {"init": 0, "train": 0, "evaluate": 0}
        devices = jax.local_devices()
        count = len(devices) if shard else 1
        self.n_devices = max(d for d in range(1, count + 1) if n_seeds % d == 0)
        init = jax.vmap(self._counted("init", agent.init))
        train = jax.vmap(self._counted("train", agent.train), in_axes=(0, None))
        evaluate = jax.vmap(self._counted("evaluate", agent.evaluate))
        if self.n_devices > 1:
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            mesh = Mesh(np.asarray(devices[: self.n_devices]), ("seed",))
            seeded = NamedSharding(mesh, PartitionSpec("seed"))
            whole = NamedSharding(mesh, PartitionSpec())
            self.seed_sharding: Any = seeded
            self.init = jax.jit(init, in_shardings=seeded, out_shardings=seeded)
            self.train = jax.jit(
                train, in_shardings=(seeded, whole), out_shardings=(seeded, seeded)
            )
            self.evaluate = jax.jit(
                evaluate, in_shardings=(seeded, seeded), out_shardings=(seeded, seeded)
            )
        else:
            self.seed_sharding = None
            self.init = jax.jit(init)
            self.train = jax.jit(train)
            self.evaluate = jax.jit(evaluate)

    def _counted(self, name: str, fn: Any) -> Any:
        """``fn`` that counts its traces (each trace of a jitted function is a compile)."""

        def traced(*args: Any) -> Any:
            self.traces[name] += 1
            return fn(*args)

        traced.__name__ = traced.__qualname__ = name  # names the compiled program
        return traced

    def place(self, x: Any) -> Any:
        """Put a seed-batched host array / pytree on the devices."""
        if self.seed_sharding is None:
            return jax.device_put(x)
        return jax.device_put(x, self.seed_sharding)

    def abstract(self, keys: jax.Array, agent: Any | None = None) -> Any:
        """Shape/dtype/sharding structs of the initial state (of ``agent``, default ours)."""
        init = jax.vmap((agent or self.agent).init)
        shapes = jax.eval_shape(init, keys)
        sharding = self.seed_sharding or jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        return jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), shapes
        )

    def compiles(self) -> dict[str, int]:
        """How many times each jitted function was traced, hence compiled (the
        no-recompilation test). ``abstract`` traces ``init`` once more, uncompiled."""
        return dict(self.traces)


def seed_keys(seeds: Sequence[int]) -> tuple[jax.Array, jax.Array]:
    """(init keys, eval keys), raw uint32 ``[n_seeds, 2]``, from the seeds alone."""
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    pairs = jax.vmap(jax.random.split)(keys)
    return pairs[:, 0], pairs[:, 1]


def adopt(state: Any, target: Any) -> Any:
    """``state`` carried into the shapes of ``target`` (abstract): equal shapes kept,
    leaves whose first per-seed axis grew are zero-padded at its end (the replay ring of
    a shorter run). Raises ConfigError for any other change."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(state)
    targets = jax.tree.leaves(target)
    out = []
    for (path, x), t in zip(flat, targets, strict=True):
        if x.shape == t.shape:
            out.append(x)
            continue
        grows = (
            x.ndim == len(t.shape) >= 2
            and x.shape[0] == t.shape[0]
            and x.shape[2:] == t.shape[2:]
            and t.shape[1] > x.shape[1]
        )
        if not grows:
            raise ConfigError(
                f"protocol.n_timesteps: cannot carry the checkpoint's state leaf "
                f"{jax.tree_util.keystr(path)} of shape {x.shape} into {t.shape}"
            )
        widths = [(0, 0), (0, t.shape[1] - x.shape[1])] + [(0, 0)] * (x.ndim - 2)
        out.append(jnp.pad(x, widths))
    state = jax.tree.unflatten(treedef, out)
    return jax.tree.map(lambda x, t: jax.device_put(x, t.sharding), state, target)


# ---------------------------------------------------------------------- metrics
def to_host(metrics: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Device metrics (leading seed axis) -> numpy."""
    return {k: np.asarray(v) for k, v in jax.device_get(dict(metrics)).items()}


def per_seed_rows(
    metrics: Mapping[str, np.ndarray], n_seeds: int, base: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """One JSON-ready row per seed: scalars as numbers, arrays as lists."""
    rows = []
    for i in range(n_seeds):
        row = dict(base)
        for key, value in metrics.items():
            value = np.asarray(value)
            item = value[i] if value.ndim >= 1 and value.shape[0] == n_seeds else value
            row[key] = item.item() if np.ndim(item) == 0 else np.asarray(item).tolist()
        rows.append(row)
    return rows


def _mean(metrics: Mapping[str, np.ndarray], key: str) -> float | None:
    if key not in metrics:
        return None
    value = np.asarray(metrics[key], dtype=np.float64)
    return float(np.nanmean(value)) if np.isfinite(value).any() else None


class Progress:
    """tqdm bar over env steps: steps/s, latest train and eval returns, ETA."""

    def __init__(self, total: int, initial: int, enabled: bool, name: str) -> None:
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total,
                initial=initial,
                unit="step",
                desc=name,
                file=sys.stderr,
                dynamic_ncols=True,
                smoothing=0.3,
            )
        self.train: float | None = None
        self.eval: float | None = None

    def update(self, steps: int, sps: float) -> None:
        if self.bar is None:
            return
        parts = [f"{sps:,.0f} steps/s"]
        if self.train is not None:
            parts.append(f"train {self.train:.1f}")
        if self.eval is not None:
            parts.append(f"eval {self.eval:.1f}")
        self.bar.set_postfix_str(" | ".join(parts), refresh=False)
        self.bar.update(steps)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ----------------------------------------------------------------------- result
@dataclasses.dataclass
class RunResult:
    """What a launch did and where its outputs are."""

    run_dir: Path
    spec: RunSpec
    n_chunks: int
    chunks_done: int
    resumed_from: int | None
    stopped_early: bool
    final_train: list[dict[str, Any]]
    final_eval: list[dict[str, Any]]
    metrics_files: list[Path]
    plot: Path | None
    wandb_dirs: list[str]
    compiles: dict[str, int]
    n_devices: int
    state: Any = dataclasses.field(repr=False, default=None)


def summary(result: RunResult) -> str:
    """The closing lines printed by ``python -m launcher``."""
    spec = result.spec
    lines = [
        f"run dir:      {result.run_dir}",
        f"chunks:       {result.chunks_done}/{result.n_chunks}"
        + (f" (resumed after chunk {result.resumed_from})" if result.resumed_from else "")
        + (" (stopped early; relaunch to continue)" if result.stopped_early else ""),
        f"metrics:      {result.run_dir / 'metrics'} (seed_<s>.jsonl)",
    ]
    if result.plot is not None:
        lines.append(f"curves:       {result.plot}")
    if result.wandb_dirs:
        lines.append(f"W&B {spec.logger.mode}:  {', '.join(result.wandb_dirs)}")
        if spec.logger.mode == "offline":
            lines.append(
                f"              upload: wandb sync {result.run_dir / 'wandb'}/offline-run-*"
            )
    for name, rows in (("train", result.final_train), ("eval", result.final_eval)):
        key = f"{name.capitalize()}/episodic mean reward"
        values = [r.get(key) for r in rows]
        if any(v is not None for v in values):
            shown = ", ".join(
                f"seed {s}: {v:.1f}" if v is not None else f"seed {s}: n/a"
                for s, v in zip(spec.protocol.seeds, values, strict=False)
            )
            lines.append(f"final {name}:  {shown}")
    return "\n".join(lines)


# ------------------------------------------------------------------------ run
def run(
    spec: RunSpec,
    run_dir: Path | str,
    *,
    agents: Mapping[str, AgentEntry] = AGENTS,
    make_env: build.MakeEnv | None = None,
    plot: bool = True,
) -> RunResult:
    """Train ``spec`` in ``run_dir``, resuming from its latest complete checkpoint.

    Args:
      spec: the validated run.
      run_dir: the run directory (created if new).
      agents: the agent registry (tests pass their own).
      make_env: ``(id, action_repeat, episode_length) -> Env``; default ``envs.make``.
      plot: write ``plots/learning_curves.png`` at the end.

    Raises:
      ConfigError: before anything is written: an env the agent cannot run, a run dir
        holding another config, a callback that cannot be imported, no readable
        checkpoint in a run dir that has some; during the run: terminations reported
        by the agent's metrics check (the checkpoints saved so far are kept).
    """
    entry = agents[spec.agent_name]
    env = build.make_env(spec, make_env)
    agent = build.make_agent(spec, env, agents=agents)
    callbacks = Callbacks.build(spec.callbacks)
    rd = RunDir(run_dir)
    stored = rd.check_config(spec)

    p = spec.protocol
    seeds = list(p.seeds)
    chunk_ticks = int(agent.ticks_for(p.log_frequency))
    total_ticks = int(agent.ticks_for(p.n_timesteps))
    n_chunks = math.ceil(total_ticks / chunk_ticks)
    program = SeedProgram(agent, len(seeds), p.shard_seeds)
    init_keys, eval_keys = (program.place(k) for k in seed_keys(seeds))
    target = program.abstract(init_keys)

    rd.path.mkdir(parents=True, exist_ok=True)
    ckpt = Checkpointer(rd.checkpoints, p.keep_checkpoints, rd.corrupt)

    def abstract_for(meta: Mapping[str, Any]) -> Any:
        n_old = int(meta.get("n_timesteps", p.n_timesteps))
        if n_old == p.n_timesteps:
            return target
        return program.abstract(init_keys, build.make_agent(spec, env, n_old, agents))

    try:
        restored = ckpt.restore_latest(abstract_for)
        if restored is not None:
            state, meta = restored
            if int(meta.get("n_timesteps", p.n_timesteps)) != p.n_timesteps:
                state = adopt(state, target)
            start = int(meta["chunk"])
            if int(meta["tick"]) > total_ticks:
                raise ConfigError(
                    f"protocol.n_timesteps: the run in {rd.path} has already taken "
                    f"{meta['timestep']} env steps, more than n_timesteps={p.n_timesteps}"
                )
            steps_done = int(meta["timestep"])
            wandb_ids = {int(k): v for k, v in meta["wandb_ids"].items()}
            rd.truncate_metrics(seeds, start)
            log.info("resuming %s after chunk %d (timestep %d)", rd.path, start, steps_done)
        else:
            state = program.init(init_keys)
            if callbacks.pretrain:
                state = program.place(callbacks.run_pretrain(state, spec))
            start, steps_done = 0, 0
            wandb_ids = rd.read_wandb_ids() or WandbRuns.new_ids(seeds, spec.logger.mode)
            rd.truncate_metrics(seeds, -1)
        if stored is None or stored.get("config_hash") != spec.config_hash:
            rd.write_run(spec, _run_facts(agent, env, program))
        rd.write_wandb_ids(wandb_ids)
    except BaseException:
        ckpt.close()
        raise

    try:
        wb = WandbRuns(spec.logger, spec.run_name, seeds, wandb_ids, spec.config, rd.path)
    except BaseException:
        ckpt.close()
        raise
    bar = Progress(p.n_timesteps, steps_done, spec.logger.progress, spec.run_name)
    evaluating = p.eval_frequency > 0
    final_train: list[dict[str, Any]] = []
    final_eval: list[dict[str, Any]] = []
    stopped = False
    chunk = start
    wandb_dirs = wb.offline_dirs()

    def record(rows: list[dict[str, Any]]) -> None:
        for seed, row in zip(seeds, rows, strict=True):
            rd.append_metrics(seed, [row])
        wb.log(rows)

    def evaluate(state: Any, chunk: int, steps: int) -> tuple[Any, list[dict[str, Any]]]:
        state, em = program.evaluate(state, eval_keys)
        em = callbacks.run_eval_metrics(to_host(em), chunk)
        rows = per_seed_rows(em, len(seeds), {"kind": "eval", "chunk": chunk, "timestep": steps})
        record(rows)
        bar.eval = _mean(em, "Eval/episodic mean reward")
        return state, rows

    try:
        if restored is None and evaluating and p.eval_at_start:
            state, final_eval = evaluate(state, 0, 0)
        for chunk in range(start + 1, n_chunks + 1):
            t0, t1 = (chunk - 1) * chunk_ticks, min(chunk * chunk_ticks, total_ticks)
            clock = time.perf_counter()
            state, metrics = program.train(state, jnp.arange(t0, t1, dtype=jnp.int32))
            metrics = to_host(metrics)
            seconds = time.perf_counter() - clock
            try:
                entry.check_metrics(metrics)
            except ValueError as err:
                raise ConfigError(f"env={spec.env.id}: {err}") from None
            steps = int(np.max(metrics["timestep"]))
            sps = (steps - steps_done) / max(seconds, 1e-9)
            metrics = callbacks.run_post_update(metrics, chunk)
            timing = {"time/steps_per_second": sps, "time/chunk_seconds": seconds}
            final_train = per_seed_rows(
                metrics, len(seeds), {"kind": "train", "chunk": chunk, **timing}
            )
            record(final_train)
            bar.train = _mean(metrics, "Train/episodic mean reward")

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
                ckpt.save(chunk, state, meta)
            bar.update(steps - steps_done, sps)
            steps_done = steps
            if stop and not last:
                stopped = True
                break
    finally:
        ckpt.close()
        wb.finish()
        bar.close()

    plot_path = None
    if plot:
        try:
            from launcher.report import plot_run

            plot_path = plot_run(rd.path)
        except Exception as err:  # noqa: BLE001 - the curves are a courtesy
            log.warning("could not plot the learning curves: %s", err)
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
        plot=plot_path,
        wandb_dirs=wandb_dirs,
        compiles=program.compiles(),
        n_devices=program.n_devices,
        state=state,
    )


def _crossed(before: int, after: int, every: int) -> bool:
    """Whether a multiple of ``every`` lies in (before, after]."""
    return every > 0 and after // every > before // every


def _run_facts(agent: Any, env: Any, program: SeedProgram) -> dict[str, Any]:
    spec = getattr(env, "spec", None)
    facts: dict[str, Any] = {
        "resolved_agent": build.resolved_agent_config(agent),
        "env_spec": dataclasses.asdict(spec) if dataclasses.is_dataclass(spec) else {},
        "n_devices": program.n_devices,
    }
    memory = getattr(agent, "memory_bytes", None)
    if callable(memory):
        try:
            facts["memory_bytes_per_seed"] = {k: int(v) for k, v in memory().items()}
        except Exception as err:  # noqa: BLE001 - informative only
            facts["memory_bytes_per_seed"] = f"unavailable: {err}"
    return facts
