"""The env and the agent of a RunSpec, and the one env-compatibility check.

Env facts come from :func:`envs.facts` (static tables: nothing is built; a user's own env,
``env.factory``, is built and checked by :mod:`envs.custom`); its typed errors carry the
argument at fault, which names the config key (``env.id``, ``env.action_repeat``,
``env.episode_length``, ``env.factory``). Whether the agent can run the env is
decided by the agent's :class:`agent_api.EnvRequirements` from those facts, here and
nowhere else in the launcher.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from agent_api import Agent, AgentEntry
from launcher.config.schema import EnvSpecConfig, RunSpec
from launcher.errors import ConfigError
from launcher.loop.callbacks import Callbacks

MakeEnv = Callable[[str, int, "int | None"], Any]


def default_make_env(
    env_id: str, action_repeat: int, episode_length: int | None, obs: str = "vector"
) -> Any:
    """``envs.make`` (imported on first use)."""
    import envs

    return envs.make(env_id, action_repeat=action_repeat, episode_length=episode_length, obs=obs)


def custom_make_env(factory: str) -> MakeEnv:
    """``envs.custom.make`` of a user's factory (``env.factory``), as a :data:`MakeEnv`."""

    def make(env_id: str, action_repeat: int, episode_length: int | None) -> Any:
        from envs import custom

        return custom.make(factory, action_repeat, episode_length, name=env_id)

    return make


def env_facts(env: EnvSpecConfig) -> Any:
    """:func:`envs.facts` of the configured env (a user's own env, ``env.factory``: built
    and checked by :mod:`envs.custom`); ConfigError naming the key at fault."""
    import envs

    try:
        if env.factory is not None:
            from envs import custom

            return custom.facts(env.factory, env.action_repeat, env.episode_length, env.id)
        return envs.facts(env.id, env.action_repeat, env.episode_length, env.obs)
    except envs.EnvError as err:
        raise ConfigError(f"env.{err.field}: {err}") from None
    except ValueError as err:  # an observation mode the env does not offer
        raise ConfigError(f"env.obs: {err}") from None


def compatible_envs(entry: AgentEntry) -> list[str]:
    """The registered env ids the agent can run (at their default settings)."""
    import envs

    return [i for i in envs.list_envs() if not entry.requirements.problems(envs.facts(i))]


def check_compatible(entry: AgentEntry, facts: Any) -> None:
    """Refuse an env (its facts or spec) the agent cannot run, listing the ones it can."""
    problems = entry.requirements.problems(facts)
    if not problems:
        return
    others = " or ".join(f"agent={name}" for name in agents_that_run(facts, entry.name))
    instead = f"run it with {others}, or " if others else ""
    raise ConfigError(
        f"env={facts.env_id}: {' and '.join(problems)}, and agent={entry.name} needs "
        f"{entry.requirements.needs()}; {instead}choose env= one of: "
        f"{', '.join(compatible_envs(entry))}"
    )


def agents_that_run(facts: Any, besides: str) -> list[str]:
    """The other agents of the config tree (``conf/agent``) that can run an env with these
    facts (issue 44 item 8: a discrete env refused by one agent names the one that runs it). An
    agent whose entry does not load is left out; the refusal is built either way."""
    from launcher.config.compose import compose, group_options, job_config
    from launcher.config.validate import load_entry

    names = []
    for option in group_options("agent"):
        try:
            other = load_entry(job_config(compose([f"agent={option}"]))["agent"])
        except Exception:  # noqa: BLE001 - a courtesy in a refusal: never mask the refusal
            continue
        if other.name != besides and not other.requirements.problems(facts):
            names.append(other.name)
    return names


def precheck(spec: RunSpec) -> Any:
    """Every env check of a launch, from static facts, and the callbacks' imports,
    before anything is created. Returns the facts."""
    facts = env_facts(spec.env)
    check_compatible(spec.entry, facts)
    # Import the hooks now: an unimportable one is refused before Hydra makes the run dir.
    Callbacks.build(spec.callbacks)
    return facts


def make_env(spec: RunSpec, make: MakeEnv | None = None) -> Any:
    """The env of ``spec``, checked against the agent (ConfigError on failure)."""
    if make is None:
        precheck(spec)
        make = default_make_env if spec.env.factory is None else custom_make_env(spec.env.factory)
        if spec.env.obs != "vector":  # envs.make's mode; injected builders keep 3 arguments
            make = functools.partial(default_make_env, obs=spec.env.obs)
            _ensure_gl(spec)
    try:
        env = make(spec.env.id, spec.env.action_repeat, spec.env.episode_length)
    except ValueError as err:  # an injected builder's own refusal
        raise ConfigError(f"env: {err}") from None
    check_compatible(spec.entry, env.spec)
    return env


def _ensure_gl(spec: RunSpec) -> None:
    """An image env drawn by MuJoCo's renderer (playground, envs.pixels) needs OpenGL, chosen
    before mujoco is imported (ConfigError when none starts)."""
    import envs

    if envs.backends()[envs.backend_of(spec.env.id)].mujoco_gl:
        from launcher.tools.gl import ensure_mujoco_gl

        ensure_mujoco_gl(f"env={spec.env.id} env.obs={spec.env.obs}")


def make_agent(spec: RunSpec, env: Any, total_env_steps: int | None = None) -> Agent:
    """The agent of ``spec`` on ``env`` for a run of ``total_env_steps`` (default: the
    protocol's ``n_timesteps``; it sizes the replay, docs/design.md §9.4)."""
    total = spec.protocol.n_timesteps if total_env_steps is None else total_env_steps
    try:
        return spec.entry.make(spec.agent, env, total)
    except ValueError as err:
        raise ConfigError(f"agent={spec.agent_name} on env={spec.env.id}: {err}") from None


def describe_agent(agent: Any) -> dict[str, Any]:
    """The agent's resolved config and bytes per seed, when it exposes them."""
    import dataclasses

    cfg = getattr(agent, "cfg", None)
    out: dict[str, Any] = {
        "resolved_agent": dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else {}
    }
    memory = getattr(agent, "memory_bytes", None)
    if callable(memory):
        try:
            out["memory_bytes_per_seed"] = {k: int(v) for k, v in memory().items()}
        except Exception as err:  # noqa: BLE001 - informative only
            out["memory_bytes_per_seed"] = f"unavailable: {err}"
    return out
