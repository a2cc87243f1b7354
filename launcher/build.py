"""Build the env and the agent of a RunSpec; the checks that need the env's facts.

Errors are :class:`ConfigError` naming the key: ``env.id`` (unknown, with the closest
ids), ``env.action_repeat`` / ``env.episode_length`` (not supported, not divisible) and
``env`` for an env the agent cannot run (discrete actions or terminations for TD-MPC2),
listing the envs it can run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from launcher.agents import AGENTS, AgentEntry
from launcher.config import RunSpec
from launcher.errors import ConfigError

MakeEnv = Callable[[str, int, "int | None"], Any]


def default_make_env(env_id: str, action_repeat: int, episode_length: int | None) -> Any:
    """``envs.make`` (imported on first use)."""
    import envs

    return envs.make(env_id, action_repeat=action_repeat, episode_length=episode_length)


def make_env(spec: RunSpec, make: MakeEnv | None = None) -> Any:
    """The env of ``spec`` (ConfigError naming the env key on failure)."""
    make = make or default_make_env
    env_cfg = spec.env
    try:
        return make(env_cfg.id, env_cfg.action_repeat, env_cfg.episode_length)
    except ValueError as err:
        text = str(err)
        if "unknown env" in text:
            key = "env.id"
        elif "repeat" in text:
            key = "env.action_repeat"
        elif "episode" in text or "divisible" in text:
            key = "env.episode_length"
        else:
            key = "env"
        raise ConfigError(f"{key}: {text}") from None


def env_facts(env_id: str) -> tuple[bool, bool]:
    """(discrete, can_terminate) of a registered env, building only the cheap ones."""
    import envs

    backend = envs.backend_of(env_id)
    if backend in ("playground", "probe"):
        return False, False
    if backend == "brax":
        from envs.brax_backend import BRAX_ENVS

        return False, bool(BRAX_ENVS[env_id])
    spec = envs.spec_of(env_id)
    return spec.discrete, spec.can_terminate


def compatible_envs(entry: AgentEntry) -> list[str]:
    """The registered env ids the agent can run."""
    import envs

    return [i for i in envs.list_envs() if entry.accepts(*env_facts(i))]


def check_env(entry: AgentEntry, env_spec: Any) -> None:
    """Refuse an env the agent cannot run, listing the ones it can."""
    if entry.accepts(env_spec.discrete, env_spec.can_terminate):
        return
    why = "has discrete actions" if env_spec.discrete and entry.continuous_only else "can terminate"
    needs = [
        word
        for word, flag in (
            ("continuous actions", entry.continuous_only),
            ("fixed-length episodes", entry.fixed_length_only),
        )
        if flag
    ]
    try:
        valid = ", ".join(compatible_envs(entry))
    except Exception:  # noqa: BLE001 - the listing is a courtesy
        valid = "(see envs.list_envs())"
    raise ConfigError(
        f"env={env_spec.env_id}: {why}, and agent={entry.name} needs "
        f"{' and '.join(needs)}; choose env= one of: {valid}"
    )


def make_agent(
    spec: RunSpec,
    env: Any,
    total_env_steps: int | None = None,
    agents: Mapping[str, AgentEntry] = AGENTS,
) -> Any:
    """The agent of ``spec`` on ``env`` for a run of ``total_env_steps`` (default: the
    protocol's ``n_timesteps``; it sizes the replay, design §5.6)."""
    entry = agents[spec.agent_name]
    check_env(entry, env.spec)
    total = spec.protocol.n_timesteps if total_env_steps is None else total_env_steps
    try:
        return entry.make(spec.agent, env, total)
    except ValueError as err:
        raise ConfigError(f"agent={spec.agent_name} on env={spec.env.id}: {err}") from None


def resolved_agent_config(agent: Any) -> dict[str, Any]:
    """The agent's config after it filled presets and env-derived values, if it has one."""
    cfg = getattr(agent, "cfg", None)
    return dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else {}


def precheck_env(spec: RunSpec, agents: Mapping[str, AgentEntry] = AGENTS) -> None:
    """The env checks of :func:`make_env` / :func:`check_env`, cheaply, before a launch
    creates its run directory: cheap envs (gymnax, probes) are built, the simulator
    envs (playground, brax) are checked from static facts."""
    import envs

    entry = agents[spec.agent_name]
    try:
        backend = envs.backend_of(spec.env.id)
    except ValueError as err:
        raise ConfigError(f"env.id: {err}") from None
    if backend in ("gymnax", "probe"):
        check_env(entry, make_env(spec).spec)
        return
    discrete, can_terminate = env_facts(spec.env.id)
    if not entry.accepts(discrete, can_terminate):
        check_env(entry, _Facts(spec.env.id, discrete, can_terminate))
    limit = spec.env.episode_length or 1000
    if limit % spec.env.action_repeat:
        raise ConfigError(
            f"env.episode_length: {limit} backend steps are not divisible by "
            f"env.action_repeat={spec.env.action_repeat}; choose a repeat that divides it"
        )


@dataclasses.dataclass(frozen=True)
class _Facts:
    env_id: str
    discrete: bool
    can_terminate: bool
