"""Env ids -> (backend, builder), and :func:`make` (docs/design.md §5.1).

Ids are snake_case, the way users type DMC / TD-MPC2 tasks (``walker_walk``,
``cup_catch``); gymnax classic control and brax envs keep their usual short names
(``pendulum``, ``cartpole``, ``ant``, ``halfcheetah``). The tables are static, so
listing ids imports no simulator; a backend is imported when one of its envs is built.

Each backend module declares its tasks (:class:`envs.core.Backend`, registered by its path
in :data:`BACKEND_MODULES`); the built-in ids carry their :class:`envs.core.StaticFacts`,
so :func:`check_args` validates a call to :func:`make` without building anything;
:func:`envs.facts` is built on it.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import re

from envs.core import (
    Backend,
    Builder,
    Env,
    EnvSpec,
    StaticFacts,
    agent_episode_length,
    check_action_repeat,
    check_episode_length,
)
from envs.errors import EnvError, UnknownEnvError


def check_obs_mode(env_id: str, obs: object, modes: tuple[str, ...]) -> None:
    """Hold that observation mode ``obs`` is one of the backend's ``modes`` (issue 47).

    Raises:
      ValueError: otherwise, naming the modes it offers.
    """
    if obs not in modes:
        raise ValueError(f"{env_id}: obs={obs!r} is not offered; its observation modes are {modes}")


# The backends, in registration order (their ids are listed in this order): each module ends
# with ``BACKEND = envs.core.Backend(...)``, which declares everything the project reads
# about it (docs/design.md §5.5). A new backend is one module and one line here.
BACKEND_MODULES = (
    "envs.gymnax_backend",
    "envs.minatar_backend",
    "envs.craftax_backend",
    "envs.playground_backend",
    "envs.brax_backend",
    "envs.probes",
    "envs.task_sets",  # after its members' backends: a set's facts are its members'
)


@dataclasses.dataclass(frozen=True)
class EnvEntry:
    """One registered env: its backend, ``builder(env_id, action_repeat, episode_length)``
    and, if known without building it, its static facts."""

    backend: str
    builder: Builder | None = None  # None: the backend's ``build``
    facts: StaticFacts | None = None  # None: known only by building the env

    def build(
        self, env_id: str, action_repeat: int, episode_length: int | None, obs: str = "vector"
    ) -> Env:
        builder = self.builder or _BACKENDS[self.backend].build
        if obs == "vector":  # builders without modes keep their three arguments
            return builder(env_id, action_repeat, episode_length)
        return builder(env_id, action_repeat, episode_length, obs=obs)


_BACKENDS: dict[str, Backend] = {}
_REGISTRY: dict[str, EnvEntry] = {}


def register(
    env_id: str,
    backend: str,
    builder: Builder | None = None,
    facts: StaticFacts | None = None,
) -> None:
    """Register ``env_id``.

    Args:
      env_id: the new id.
      backend: a registered backend's name (:func:`backends`; its action-repeat limits apply).
      builder: ``builder(env_id, action_repeat, episode_length) -> Env``; None = the
        backend's ``build``.
      facts: the env's static facts, if known; without them :func:`envs.facts` builds
        the env, and :func:`make` checks the time limit's divisibility only in the build.

    Raises:
      ValueError: the id is taken or the backend is unknown.
    """
    if env_id in _REGISTRY:
        raise ValueError(f"env id {env_id!r} is already registered ({_REGISTRY[env_id]})")
    if backend not in _BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; backends are {tuple(_BACKENDS)}")
    _REGISTRY[env_id] = EnvEntry(backend, builder, facts)


def register_backend(backend: Backend) -> None:
    """Register ``backend`` and every task it declares (:class:`envs.core.Backend`).

    Raises:
      ValueError: the backend's name or one of its ids is taken.
    """
    if backend.name in _BACKENDS:
        raise ValueError(f"backend {backend.name!r} is already registered")
    tasks = backend.tasks
    if callable(tasks):  # derived from the envs registered before (task sets)
        tasks = tasks(lambda i: _REGISTRY[i].facts)
    _BACKENDS[backend.name] = backend
    for env_id, row in tasks.items():
        register(env_id, backend.name, facts=row)


def backends() -> dict[str, Backend]:
    """The registered backends by name, in registration order (a copy)."""
    return dict(_BACKENDS)


for _module in BACKEND_MODULES:
    register_backend(importlib.import_module(_module).BACKEND)


def list_envs(backend: str | None = None) -> list[str]:
    """All registered ids (of one backend if given), in registration order."""
    return [i for i, e in _REGISTRY.items() if backend is None or e.backend == backend]


def backend_of(env_id: str) -> str:
    """The backend of ``env_id`` (UnknownEnvError naming close ids if unknown)."""
    return entry_of(env_id).backend


def _normalise(name: str) -> str:
    """``'WalkerWalk'``, ``'walker-walk'`` -> ``'walker_walk'``."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    return re.sub(r"[-\s]+", "_", name).lower()


def entry_of(env_id: str) -> EnvEntry:
    """The registry entry of ``env_id``.

    Raises:
      UnknownEnvError: ``env_id`` is not registered (naming up to 5 close ids).
    """
    if isinstance(env_id, str) and env_id in _REGISTRY:
        return _REGISTRY[env_id]
    ids = list(_REGISTRY)
    name = _normalise(env_id) if isinstance(env_id, str) else ""
    close = difflib.get_close_matches(name, ids, n=5, cutoff=0.5)
    raise UnknownEnvError(env_id, tuple(close), len(ids))


def check_args(
    env_id: str, action_repeat: int = 1, episode_length: int | None = None
) -> tuple[EnvEntry, int | None]:
    """Validate the arguments of :func:`make` without building the env.

    Checks, in order: the id is registered; ``action_repeat`` is an int >= 1 that the
    backend supports (gymnax: only 1); ``episode_length`` is None or an int >= 1; the
    time limit (``episode_length``, or the env's default) is divisible by the repeat.
    The last check needs the default from the entry's static facts when
    ``episode_length`` is None; an entry without them leaves it to its build.

    Returns:
      (the entry, the time limit in backend steps, or None if unknown without a build).

    Raises:
      UnknownEnvError, ActionRepeatError, EpisodeLengthError: the first check that fails.
    """
    entry = entry_of(env_id)
    check_action_repeat(
        action_repeat, env_id, _BACKENDS[entry.backend].action_repeats, entry.backend
    )
    check_episode_length(episode_length, env_id)
    limit = episode_length
    if limit is None and entry.facts is not None:
        limit = entry.facts.default_episode_length
    if limit is not None:
        agent_episode_length(limit, action_repeat, env_id)
    return entry, limit


def make(
    env_id: str, action_repeat: int = 1, episode_length: int | None = None, obs: str = "vector"
) -> Env:
    """Build env ``env_id`` (docs/design.md §5.1).

    Args:
      env_id: a registered id (:func:`list_envs`).
      action_repeat: backend steps per agent step (>= 1; gymnax: only 1).
      episode_length: the time limit in *backend* steps; None = the backend's default
        (gymnax: the env's ``max_steps_in_episode``; playground, brax: 1000; probes: 20).
        ``spec.episode_length`` is T = episode_length // action_repeat agent steps.
      obs: the observation mode (``envs.core.OBS_MODES``): ``vector`` (every env), or
        ``image`` where the backend offers it (``Backend.obs_modes``: MinAtar's grid and
        Craftax-Classic's pixels as uint8 images; issue 47).

    Returns:
      The :class:`envs.core.Env`. Builds are cached on the arguments: the same arguments
      return the same object, so jitted functions over it are traced once.

    Raises:
      UnknownEnvError: unknown id (naming the closest ids).
      ActionRepeatError: action_repeat is not an int >= 1, or the backend does not
        support it (gymnax: only 1).
      EpisodeLengthError: episode_length is not None or an int >= 1, or the time limit
        is not divisible by the repeat.
      (all three are :class:`envs.errors.EnvError`, a ValueError; see :func:`check_args`)
    """
    entry, _ = check_args(env_id, action_repeat, episode_length)
    check_obs_mode(env_id, obs, _BACKENDS[entry.backend].obs_modes)
    return _make_cached(env_id, entry, action_repeat, episode_length, obs)


@functools.cache
def _make_cached(
    env_id: str, entry: EnvEntry, action_repeat: int, episode_length: int | None, obs: str
) -> Env:
    try:
        return entry.build(env_id, action_repeat, episode_length, obs)
    except EnvError:  # typed: already names the env
        raise
    except ValueError as err:  # name the env in errors raised by the backend
        message = str(err)
        if message.startswith(env_id):
            raise
        raise ValueError(f"{env_id}: {message}") from None


def spec_of(env_id: str, action_repeat: int = 1, episode_length: int | None = None) -> EnvSpec:
    """The spec of ``make(env_id, action_repeat, episode_length)`` (builds it, cached)."""
    return make(env_id, action_repeat, episode_length).spec
