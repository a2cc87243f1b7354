"""Environments: one functional interface over gymnax, brax and MuJoCo Playground.

    env = envs.make("walker_walk", action_repeat=2)     # Env(spec, reset, step)
    state = env.reset(key)                                # EnvState
    state = env.step(state, action)                       # action in agent units
    envs.facts("walker_walk", action_repeat=2)            # EnvFacts; builds nothing

Bad arguments raise the typed errors of :mod:`envs.errors` (ValueErrors with a
``field``). See :mod:`envs.core` for the env protocol and a backend's declaration,
:mod:`envs.custom` for a user's own env (a factory, no project edit),
:mod:`envs.registry` for the ids, :mod:`envs.facts` for the static facts,
:mod:`envs.autoreset` for the fresh auto-reset (docs/design.md §5.2) and
:mod:`envs.bounds` for the action mapping (docs/design.md §5.1).
"""

from envs.autoreset import AutoResetEnv, autoreset, get_final_obs
from envs.bounds import to_agent_action, to_env_action
from envs.core import (
    Backend,
    Env,
    EnvSpec,
    EnvState,
    StaticFacts,
    agent_episode_length,
    initial_state,
)
from envs.errors import ActionRepeatError, EnvError, EpisodeLengthError, UnknownEnvError
from envs.facts import EnvFacts, facts
from envs.registry import (
    backend_of,
    backends,
    list_envs,
    make,
    register,
    register_backend,
    spec_of,
)
from envs.wrappers import build_env

__all__ = [
    "ActionRepeatError",
    "AutoResetEnv",
    "Backend",
    "Env",
    "EnvError",
    "EnvFacts",
    "EnvSpec",
    "EnvState",
    "EpisodeLengthError",
    "StaticFacts",
    "UnknownEnvError",
    "agent_episode_length",
    "autoreset",
    "backend_of",
    "backends",
    "build_env",
    "facts",
    "get_final_obs",
    "initial_state",
    "list_envs",
    "make",
    "register",
    "register_backend",
    "spec_of",
    "to_agent_action",
    "to_env_action",
]
