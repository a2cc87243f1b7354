"""Env ids -> (backend, builder), and :func:`make` (design §5.1).

Ids are snake_case, the way users type DMC / TD-MPC2 tasks (``walker_walk``,
``cup_catch``); gymnax classic control and brax envs keep their usual short names
(``pendulum``, ``cartpole``, ``ant``, ``halfcheetah``). The tables are static, so
listing ids imports no simulator; a backend is imported when one of its envs is built.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import re
from collections.abc import Callable

from envs.brax_backend import BRAX_ENVS
from envs.core import BACKENDS, Env, EnvSpec
from envs.gymnax_backend import GYMNAX_ENVS
from envs.playground_backend import PLAYGROUND_ENVS
from envs.probes import PROBE_ENVS

Builder = Callable[[str, int, int | None], Env]

_BACKEND_MODULES = {
    "gymnax": "envs.gymnax_backend",
    "brax": "envs.brax_backend",
    "playground": "envs.playground_backend",
    "probe": "envs.probes",
}


@dataclasses.dataclass(frozen=True)
class EnvEntry:
    """One registered env: its backend and ``builder(env_id, action_repeat, episode_length)``."""

    backend: str
    builder: Builder | None = None  # None: the backend module's ``build``

    def build(self, env_id: str, action_repeat: int, episode_length: int | None) -> Env:
        builder = self.builder
        if builder is None:
            builder = importlib.import_module(_BACKEND_MODULES[self.backend]).build
        return builder(env_id, action_repeat, episode_length)


_REGISTRY: dict[str, EnvEntry] = {}


def register(env_id: str, backend: str, builder: Builder | None = None) -> None:
    """Register ``env_id``; raises ValueError if taken or the backend is unknown."""
    if env_id in _REGISTRY:
        raise ValueError(f"env id {env_id!r} is already registered ({_REGISTRY[env_id]})")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; backends are {BACKENDS}")
    _REGISTRY[env_id] = EnvEntry(backend, builder)


for _id in GYMNAX_ENVS:
    register(_id, "gymnax")
for _id in PLAYGROUND_ENVS:
    register(_id, "playground")
for _id in BRAX_ENVS:
    register(_id, "brax")
for _id in PROBE_ENVS:
    register(_id, "probe")


def list_envs(backend: str | None = None) -> list[str]:
    """All registered ids (of one backend if given), in registration order."""
    return [i for i, e in _REGISTRY.items() if backend is None or e.backend == backend]


def backend_of(env_id: str) -> str:
    """The backend of ``env_id`` (ValueError naming close ids if unknown)."""
    return _entry(env_id).backend


def _normalise(name: str) -> str:
    """``'WalkerWalk'``, ``'walker-walk'`` -> ``'walker_walk'``."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    return re.sub(r"[-\s]+", "_", name).lower()


def _entry(env_id: str) -> EnvEntry:
    if env_id in _REGISTRY:
        return _REGISTRY[env_id]
    ids = list(_REGISTRY)
    close = difflib.get_close_matches(_normalise(env_id), ids, n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"unknown env id {env_id!r}{hint} (envs.list_envs() lists all {len(ids)})")


def _is_positive_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def _check_repeat(action_repeat: int) -> None:
    if not _is_positive_int(action_repeat):
        raise ValueError(
            f"action_repeat must be an int >= 1, got {action_repeat!r}; "
            "use 1 for no repeat (2 is the DMC protocol of both papers)"
        )


def make(env_id: str, action_repeat: int = 1, episode_length: int | None = None) -> Env:
    """Build env ``env_id`` (design §5.1).

    Args:
      env_id: a registered id (:func:`list_envs`).
      action_repeat: backend steps per agent step (>= 1; gymnax: only 1).
      episode_length: the time limit in *backend* steps; None = the backend's default
        (gymnax: the env's ``max_steps_in_episode``; playground, brax: 1000; probes: 20).
        ``spec.episode_length`` is T = episode_length // action_repeat agent steps.

    Returns:
      The :class:`envs.core.Env`. Builds are cached on the arguments: the same arguments
      return the same object, so jitted functions over it are traced once.

    Raises:
      ValueError: unknown id (naming the closest ids), action_repeat < 1, a repeat that
        does not divide the time limit, or a repeat the backend does not support.
    """
    entry = _entry(env_id)
    _check_repeat(action_repeat)
    if episode_length is not None and not _is_positive_int(episode_length):
        raise ValueError(f"episode_length must be an int >= 1 or None, got {episode_length!r}")
    return _make_cached(env_id, entry, action_repeat, episode_length)


@functools.cache
def _make_cached(
    env_id: str, entry: EnvEntry, action_repeat: int, episode_length: int | None
) -> Env:
    try:
        return entry.build(env_id, action_repeat, episode_length)
    except ValueError as err:  # name the env in errors raised by the backend
        message = str(err)
        if message.startswith(env_id):
            raise
        raise ValueError(f"{env_id}: {message}") from None


def spec_of(env_id: str, action_repeat: int = 1, episode_length: int | None = None) -> EnvSpec:
    """The spec of ``make(env_id, action_repeat, episode_length)`` (builds it, cached)."""
    return make(env_id, action_repeat, episode_length).spec
