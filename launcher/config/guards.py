"""Checks that stop a launch before it wastes hours or writes something wrong.

* :func:`check_cpu_budget`: on a machine without an accelerator, a launch whose
  estimated wall time exceeds :data:`CPU_HOURS_LIMIT` is refused (exit 2) unless
  confirmed with ``+allow_long_cpu_run=true``. The estimate (:mod:`launcher.config.cpu_budget`)
  is the agent's model of what a seed costs under the composed config
  (:attr:`agent_api.AgentTables.cpu_cost`) plus evaluations, env steps and compile, the
  seeds spread over the cores.
* :func:`check_metrics` / :func:`nonfinite_leaves`: a non-finite loss or parameter, or a
  loss past ``+max_abs_loss``, stops the run before the chunk is checkpointed.
* :class:`RunLock`: one launch per run directory at a time.

The run directory's path is checked by :func:`launcher.store.rundir.check_path`.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from agent_api.backend import accelerated
from launcher.config import cpu_budget
from launcher.config.schema import RunSpec
from launcher.errors import ConfigError, RunStopped

CPU_HOURS_LIMIT = 4.0
# Metrics that may be NaN by contract (no episode ended in the chunk; agent_api/__init__.py).
MAY_BE_NAN = ("Train/episodic mean reward",)


# ------------------------------------------------------------------- CPU time
def estimate_cpu_seconds(spec: RunSpec, cores: int | None = None) -> tuple[float, float, bool]:
    """(wall seconds, CPU seconds per agent step per seed, exact?) of a launch on ``cores``
    CPU cores (default: this machine's); :func:`launcher.config.cpu_budget.estimate`."""
    est = cpu_budget.estimate(spec, cores)
    return est.wall_s, est.per_step_s, est.exact


_usable_cores = cpu_budget.usable_cores


def cpu_sized_command(spec: RunSpec) -> str | None:
    """The command of the agent's CPU-sized run that learns (its
    ``AgentTables.cpu_sized``), e.g. ``python -m launcher agent=NAME env=pendulum
    protocol=quick``; None when the agent names none."""
    tables = getattr(spec.entry, "tables", None)  # a test's spec may carry no entry
    if tables is None or not tables.cpu_sized:
        return None
    return " ".join(["python -m launcher", f"agent={spec.agent_name}", *tables.cpu_sized])


def check_cpu_budget(spec: RunSpec, backend: str | None = None) -> None:
    """Refuse a launch estimated to take more than :data:`CPU_HOURS_LIMIT` hours on CPU
    (never a dry run: it runs nothing). The refusal names the estimate and what it is made
    of, then what a CPU user should run: first the agent's CPU-sized run that learns
    (:func:`cpu_sized_command`; unless ``protocol=quick`` is the protocol in use), then
    this run shortened to the length that fits (too short for the paper protocols to show
    learning, issue 44), then the confirmation."""
    if spec.control.allow_long_cpu_run or spec.control.dry_run:
        return
    if accelerated(backend):  # backend None: jax.default_backend()
        return
    est = cpu_budget.estimate(spec)
    limit = CPU_HOURS_LIMIT * 3600
    if est.wall_s <= limit:
        return
    bound = "" if est.exact else "at least "
    options = []
    command = cpu_sized_command(spec)
    if command and spec.protocol.name != "quick":
        options.append(
            f"for a CPU, run {command} instead (a small model whose return climbs within minutes)"
        )
    fits = cpu_budget.fitting_steps(spec, limit)
    if fits:
        options.append(
            f"shorten this run to protocol.n_timesteps={fits} (about {CPU_HOURS_LIMIT:g} "
            "hours or less)"
        )
    options.append("add +allow_long_cpu_run=true to start it anyway")
    raise ConfigError(
        f"protocol={spec.protocol.name}: this machine has no accelerator, and "
        f"{spec.protocol.n_timesteps:,} steps x {len(spec.protocol.seeds)} seed(s) of "
        f"agent={spec.agent_name} would take {bound}{_duration(est.wall_s)} on its CPU "
        f"({est.basis()}); {'; or '.join(options)}"
    )


def _duration(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:,.1f} hours" if hours < 48 else f"{hours / 24:,.0f} days"


# ------------------------------------------------------------------- run dirs
class RunLock:
    """An exclusive ``flock`` on the run directory itself (no file is created; released
    by the kernel when the process dies, ``kill -9`` included)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise ConfigError(
                    f"run dir {self.path} is in use by another launch (locked); wait for it "
                    "to finish or choose another hydra.run.dir"
                ) from None
            raise
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


# ------------------------------------------------------------------- training
def check_metrics(
    metrics: Mapping[str, np.ndarray],
    chunk: int,
    max_abs_loss: float | None = None,
    idle: np.ndarray | None = None,
) -> None:
    """Stop (RunStopped) on a non-finite float metric (but :data:`MAY_BE_NAN`) or a loss
    (a metric whose name contains ``loss``) past ``max_abs_loss``.

    ``idle`` (bool ``[seeds]``) marks the seeds whose chunk ran no update: their
    ``Train/`` metrics are means over zero updates, NaN by contract
    (``agent_api.Agent.train``), so a NaN there is allowed (an infinity is not)."""
    for key, value in metrics.items():
        value = np.asarray(value)
        if key in MAY_BE_NAN or not np.issubdtype(value.dtype, np.floating):
            continue
        bad = ~np.isfinite(value)
        if idle is not None and key.startswith("Train/"):
            excused = np.isnan(value) & np.reshape(idle, idle.shape + (1,) * (value.ndim - 1))
            bad &= ~excused
        if bad.any():
            raise RunStopped(
                f"chunk {chunk}: metric {key!r} is not finite ({_seeds(bad)}); the run stops "
                "here and its last checkpoint is kept (lower the learning rate?)"
            )
        if max_abs_loss is not None and "loss" in key.lower():
            big = np.abs(value) > max_abs_loss
            if big.any():
                raise RunStopped(
                    f"chunk {chunk}: metric {key!r} = {float(np.max(np.abs(value))):.4g} "
                    f"exceeds max_abs_loss={max_abs_loss:g} ({_seeds(big)}); the run stops "
                    "here and its last checkpoint is kept"
                )


def _seeds(mask: np.ndarray) -> str:
    where = np.flatnonzero(np.asarray(mask).reshape(mask.shape[0], -1).any(axis=1))
    return f"seed index {', '.join(str(int(i)) for i in where)}"


def nonfinite_leaves(state: Any) -> list[str]:
    """Paths of the floating-point leaves of ``state`` holding a NaN or an infinity."""
    import jax
    import jax.numpy as jnp

    flat, _ = jax.tree_util.tree_flatten_with_path(state)
    floats = [(p, x) for p, x in flat if jnp.issubdtype(x.dtype, jnp.inexact)]
    ok = jax.device_get(_all_finite([x for _, x in floats]))
    return [jax.tree_util.keystr(p) for (p, _), good in zip(floats, ok, strict=True) if not good]


def _all_finite(leaves: list[Any]) -> list[Any]:
    return _finite_program()(leaves)


@functools.cache
def _finite_program() -> Any:
    """One jitted per-leaf finiteness test (traced once per state structure)."""
    import jax
    import jax.numpy as jnp

    return jax.jit(lambda xs: [jnp.all(jnp.isfinite(x)) for x in xs])


def check_state(state: Any, chunk: int) -> None:
    """Stop (RunStopped) when a parameter or any float state leaf is not finite."""
    bad = nonfinite_leaves(state)
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise RunStopped(
            f"chunk {chunk}: state leaf {', '.join(bad[:3])}{more} is not finite; the run "
            "stops here and its last checkpoint is kept"
        )


def check_chunk(
    agent: Any,
    metrics: Mapping[str, Any],
    state: Any,
    chunk: int,
    spec: RunSpec,
    updates_before: np.ndarray,
) -> None:
    """The agent's own check, then the finiteness and divergence guards (RunStopped).
    ``updates_before``: each seed's ``Train/n_updates`` before the chunk (a seed that
    ran no update may report NaN update means, agent_api.Agent.train)."""
    try:
        agent.check(metrics)
    except ValueError as err:
        raise RunStopped(f"chunk {chunk}: env={spec.env.id}: {err}") from None
    idle = np.asarray(metrics["Train/n_updates"]) == updates_before
    check_metrics(metrics, chunk, spec.control.max_abs_loss, idle)
    check_state(state, chunk)
