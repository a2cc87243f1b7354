"""The one restore path: a run's latest readable checkpoint, with the agent that saved it.

The run loop's resume (:mod:`launcher.loop.run`) and the tools that read a finished or
running run (``launcher.evaluate``, ``launcher.export``, ``launcher.evaluate --video``)
all restore through :func:`restore_latest`:

    target shapes  = the agent built for the run length the checkpoint was saved with
                     (its ``n_timesteps`` meta; the replay is sized by it)
    state, meta    = the newest checkpoint that reads back to its fingerprint; newer
                     unreadable ones skipped (moved aside only by a resume)

A resume then migrates the state to the launch's length (:func:`launcher.loop.run`); a reader
uses it as saved, with the saving agent (:func:`restore_run`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.config.schema import RunSpec
from launcher.errors import ConfigError
from launcher.loop import build
from launcher.store.rundir import RunDir

if TYPE_CHECKING:  # imported where used: reading this module imports no jax (the CLIs' --help)
    from launcher.loop.program import SeedProgram
    from launcher.store.checkpoint import Checkpointer


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A restored checkpoint: the seed-batched state (on the devices), its metadata and
    the agent that saved it (built for the run length ``saved_length``)."""

    state: Any
    meta: Mapping[str, Any]
    agent: Any
    saved_length: int


def saved_length(meta: Mapping[str, Any], spec: RunSpec) -> int:
    """The run length (env steps) a checkpoint was saved with; the spec's if unrecorded."""
    return int(meta.get("n_timesteps", spec.protocol.n_timesteps))


def restore_latest(
    ckpt: Checkpointer,
    spec: RunSpec,
    env: Any,
    program: SeedProgram,
    *,
    set_aside: bool,
    at_most: int | None = None,
) -> Checkpoint | None:
    """The latest checkpoint of ``ckpt`` that restores cleanly (None when there is none),
    with the shapes of the agent that saved it, placed as ``program`` places its seeds.

    ``set_aside``: move unreadable newer checkpoints to the corrupt directory (a resume,
    which must not meet them again); readers leave them. ConfigError when checkpoints
    exist but none restores (:meth:`Checkpointer.restore_latest`). ``at_most``: only the
    checkpoints saved at that env step or earlier."""
    from launcher.loop.program import seed_keys

    init_keys = program.place(seed_keys(list(spec.protocol.seeds))[0])
    agents: dict[int, Any] = {spec.protocol.n_timesteps: program.agent}
    targets: dict[int, Any] = {}
    used: list[int] = []

    def abstract_for(meta: Mapping[str, Any]) -> Any:
        length = saved_length(meta, spec)
        if length not in agents:
            agents[length] = build.make_agent(spec, env, length)
        if length not in targets:
            targets[length] = program.abstract(init_keys, agents[length])
        used.append(length)
        return targets[length]

    restored = ckpt.restore_latest(abstract_for, set_aside=set_aside, at_most=at_most)
    if restored is None:
        return None
    state, meta = restored
    return Checkpoint(state, meta, agents[used[-1]], used[-1])


# ------------------------------------------------------------------------ readers
@dataclasses.dataclass(frozen=True)
class RestoredRun:
    """A run's latest readable checkpoint, restored with the agent that saved it."""

    spec: Any
    agent: Any
    program: Any
    state: Any  # seed-batched, on the devices
    meta: Mapping[str, Any]
    seeds: list[int]
    env: Any = None  # the env the agent was built on


def restore_run(
    run_dir: Path | str,
    *,
    make_env: Any = None,
    edit: Callable[[dict[str, Any]], None] | None = None,
    purpose: str = "read",
    at_most: int | None = None,
) -> RestoredRun:
    """Rebuild ``run_dir``'s env and agent from its ``run.json`` (after ``edit`` of the
    stored config, if given) and restore its latest complete checkpoint, read only
    (unreadable ones are skipped, not moved). ConfigError for a missing run directory,
    run.json or checkpoint (``purpose`` names what the caller wanted to do). ``at_most``: the
    latest checkpoint saved at that env step or earlier (a point earlier in the run)."""
    from launcher.config.validate import resolve
    from launcher.loop.program import SeedProgram
    from launcher.store.checkpoint import Checkpointer

    rd = RunDir(run_dir)
    if not rd.path.is_dir():
        raise ConfigError(f"{rd.path}: no such run directory")
    stored = rd.read_run()
    if stored is None:
        raise ConfigError(f"{rd.path}: no run.json; not a run directory")
    config = copy.deepcopy(stored["config"])
    if edit is not None:
        edit(config)
    spec = resolve(config)
    env = build.make_env(spec, make_env)
    none = f"{rd.path}: no checkpoint to {purpose} yet (the run has not saved one)"
    if not rd.checkpoints.is_dir():
        raise ConfigError(none)
    p = spec.protocol
    ckpt = Checkpointer(rd.checkpoints, p.keep_checkpoints, rd.corrupt, create=False)
    try:
        steps = ckpt.steps()  # ascending
        if not steps:
            raise ConfigError(none)
        if at_most is not None and steps[0] > at_most:
            raise ConfigError(
                f"{rd.path}: no checkpoint at step {at_most} or earlier (saved: {steps})"
            )
        agent = build.make_agent(spec, env)
        program = SeedProgram(agent, len(p.seeds), p.shard_seeds, p.fast_compile)
        restored = restore_latest(ckpt, spec, env, program, set_aside=False, at_most=at_most)
    finally:
        ckpt.close()
    if restored is None:
        raise ConfigError(f"{rd.path}: no readable checkpoint")
    if restored.agent is not program.agent:  # saved with another run length
        program = SeedProgram(restored.agent, len(p.seeds), p.shard_seeds, p.fast_compile)
    seeds = list(p.seeds)
    return RestoredRun(spec, restored.agent, program, restored.state, restored.meta, seeds, env)
