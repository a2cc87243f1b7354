"""How long a launch takes on a machine without an accelerator: the CPU budget's estimate
(:func:`launcher.config.guards.check_cpu_budget`) and a dry run's CPU figure.

The agent models what one seed costs under the composed config
(:attr:`agent_api.AgentTables.cpu_cost`, in its entry's optional ``tables``: its updates
and acting over the run's agent steps, one evaluation, its compile); the launcher adds
what it knows and the agent does not:

* how many evaluations the protocol runs (:func:`evaluations`),
* the env's stepping (the env frames of training and evaluation, at the CPU seconds per
  frame its backend declares: ``envs.core.Backend.frame_cpu_s``, :func:`frame_cpu_s`; plus
  a host-rendered image per agent step in ``env.obs=image``, :func:`image_cpu_s`),
* the compile (halved under ``protocol.fast_compile``, docs/launcher.md) and the launch's
  own start (:data:`LAUNCH_S`),
* the seeds spread over the cores this process may use.

An agent without ``cpu_cost`` (the tests' fake agent, the offline multi-task agent) is
estimated from its measured seconds per agent step (``cpu_seconds_per_step``): steps x
seeds x that figure, the largest measured preset's for an unmeasured one (a lower bound);
an agent without tables has no estimate (``no CPU figure``).
"""

from __future__ import annotations

import dataclasses
import math
import os

from agent_api import AgentTables, CpuCost
from launcher.config.schema import Protocol, RunSpec
from launcher.loop.build import env_facts

# CPU seconds of a launch besides the agent's programs: the interpreter and JAX import,
# the allocator re-exec (launcher/loop/malloc.py), the env build, W&B offline, checkpoints
# (benchmarks/cpu_estimate_check.py: a fake-agent smoke launch).
LAUNCH_S = 10.0
FAST_COMPILE = 0.5  # protocol.fast_compile: about half the compile time (docs/launcher.md)


@dataclasses.dataclass(frozen=True)
class CpuEstimate:
    """A launch's estimated time on this machine's CPU.

    Attributes:
      wall_s: wall seconds of the launch on ``cores`` cores.
      per_step_s: one seed's CPU seconds (training and evaluations) per agent step.
      exact: from the agent's model or its measured preset (else a lower bound).
      evaluations: evaluations the protocol runs.
      cost: the agent's model of one seed (None: the per-step figure).
      fixed_s: seconds paid once per launch (compile, start).
      source: where the figures come from.
    """

    wall_s: float
    per_step_s: float
    exact: bool
    evaluations: int = 0
    cost: CpuCost | None = None
    fixed_s: float = 0.0
    source: str = "measured"

    def basis(self) -> str:
        """What the estimate is made of, for the refusal and the dry run."""
        head = f"{self.per_step_s:.2g} s per step per seed"
        c = self.cost
        if c is None:
            return f"{head}, {self.source}"
        parts = [f"{c.updates:,} updates x {_s(c.update_s)}"]
        if c.acts:
            parts.append(f"{c.acts:,} acting calls x {_s(c.act_s)}")
        if self.evaluations:
            plural = "s" if self.evaluations != 1 else ""
            parts.append(f"{self.evaluations:,} evaluation{plural} x {_s(c.eval_s)}")
        model = c.source.split(":")[0] or "the agent's CPU model"
        return f"{head}: {' + '.join(parts)}, modelled from the config by {model}"


def _s(seconds: float) -> str:
    return f"{seconds:,.3g} s" if seconds < 100 else f"{seconds:,.0f} s"


def evaluations(p: Protocol) -> int:
    """Evaluations of a whole run: every ``eval_frequency`` steps and after the last chunk
    (once when that is a multiple), plus one at step 0 under ``eval_at_start``."""
    if p.eval_frequency <= 0:
        return 0
    return math.ceil(p.n_timesteps / p.eval_frequency) + int(p.eval_at_start)


def frame_cpu_s(backend: str) -> float:
    """CPU seconds per backend step of one env, as its backend declares (0 for a backend
    that declares none and for a user's own env: unknown, left out)."""
    import envs

    declared = envs.backends().get(backend)
    return declared.frame_cpu_s if declared is not None else 0.0


def image_cpu_s(backend: str, obs_mode: str) -> float:
    """CPU seconds per image observation of one env (a host render, once per agent step),
    as its backend declares; 0 for vector observations."""
    import envs

    declared = envs.backends().get(backend)
    return declared.image_cpu_s if declared is not None and obs_mode == "image" else 0.0


def usable_cores() -> int:
    """The cores this process may run on (``taskset`` / cgroup affinity), not the machine's."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity API (macOS)
        return os.cpu_count() or 1


def estimate(
    spec: RunSpec, cores: int | None = None, n_timesteps: int | None = None
) -> CpuEstimate:
    """The :class:`CpuEstimate` of ``spec`` on ``cores`` cores (default: this process's),
    for ``n_timesteps`` agent steps (default: the protocol's)."""
    p = spec.protocol
    if n_timesteps is not None:
        p = dataclasses.replace(p, n_timesteps=n_timesteps)
    seeds = len(p.seeds)
    parallel = max(1, min(seeds, cores or usable_cores()))
    tables = spec.entry.tables or AgentTables()
    if tables.cpu_cost is None:
        return _from_table(spec, p, seeds / parallel, tables)
    facts = env_facts(spec.env)
    cost = tables.cpu_cost(spec.agent, facts, p.n_timesteps)
    n_evals = evaluations(p)
    frames = p.n_timesteps + n_evals * spec.protocol.eval_episodes * facts.episode_length
    env_s = frames * (
        facts.action_repeat * frame_cpu_s(facts.backend)
        + image_cpu_s(facts.backend, facts.obs_mode)
    )
    seed_s = cost.train_s + n_evals * cost.eval_s + env_s
    fixed = cost.compile_s * (FAST_COMPILE if p.fast_compile else 1.0) + LAUNCH_S
    return CpuEstimate(
        wall_s=fixed + seed_s * seeds / parallel,
        per_step_s=seed_s / p.n_timesteps,
        exact=True,
        evaluations=n_evals,
        cost=cost,
        fixed_s=fixed,
        source=f"modelled from the config ({cost.source})" if cost.source else "modelled",
    )


def _from_table(spec: RunSpec, p: Protocol, rounds: float, tables: AgentTables) -> CpuEstimate:
    table = tables.cpu_seconds_per_step
    if not table:
        return CpuEstimate(0.0, 0.0, False, source="no CPU figure")
    size = getattr(spec.agent, "model_size", None)
    measured = size in table
    per_step = table[size] if measured else max(table.values())
    source = (
        "measured on CPU at this preset"
        if measured
        else "the largest measured preset's CPU figure: a lower bound"
    )
    return CpuEstimate(per_step * p.n_timesteps * rounds, per_step, measured, source=source)


def fitting_steps(spec: RunSpec, seconds: float, cores: int | None = None) -> int | None:
    """The most agent steps, a multiple of ``protocol.log_frequency`` and of the agent's
    ``n_envs`` (a run's steps must be whole ticks) below the protocol's, that the estimate
    puts within ``seconds``; None when not even one chunk fits."""
    n_envs = int(dict(spec.config.get("agent", {})).get("n_envs", 1) or 1)
    chunk = math.lcm(spec.protocol.log_frequency, n_envs)
    lo, hi = 0, spec.protocol.n_timesteps // chunk  # in chunks; hi does not fit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if estimate(spec, cores, mid * chunk).wall_s <= seconds:
            lo = mid
        else:
            hi = mid
    return lo * chunk if lo else None
