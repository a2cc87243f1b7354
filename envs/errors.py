"""Typed errors for bad arguments to :func:`envs.make` and :func:`envs.facts`.

Every error is an :class:`EnvError`, itself a :class:`ValueError` (callers that catch
ValueError keep working), and carries what it refers to as attributes plus ``field``:
the name of the argument at fault (``"id"``, ``"action_repeat"``, ``"episode_length"``),
so a caller can name its own config key without matching the message text.

This module holds messages only; the checks that raise these errors are in
:mod:`envs.core` (:func:`~envs.core.check_action_repeat`,
:func:`~envs.core.check_episode_length`, :func:`~envs.core.agent_episode_length`) and
:mod:`envs.registry` (unknown ids).
"""

from __future__ import annotations


def is_positive_int(x: object) -> bool:
    """Whether ``x`` is an int >= 1 (bools are not)."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def _prefix(env_id: str | None) -> str:
    return f"{env_id}: " if env_id is not None else ""


class EnvError(ValueError):
    """Base of the env argument errors.

    Attributes:
      env_id: the env the arguments were for (None when the check had no id).
      field: the argument at fault: ``"id"``, ``"action_repeat"`` or ``"episode_length"``.
    """

    field: str = ""

    def __init__(self, env_id: str | None, message: str):
        super().__init__(message)
        self.env_id = env_id


class UnknownEnvError(EnvError):
    """``env_id`` is not registered.

    Attributes:
      close: the registered ids closest to ``env_id`` (may be empty), best first.
      n_envs: how many ids are registered (None if not given).
    """

    field = "id"

    def __init__(self, env_id: str, close: tuple[str, ...] = (), n_envs: int | None = None):
        self.close = tuple(close)
        self.n_envs = n_envs
        hint = f"; did you mean {', '.join(self.close)}?" if self.close else ""
        count = f" (envs.list_envs() lists all {n_envs})" if n_envs is not None else ""
        super().__init__(env_id, f"unknown env id {env_id!r}{hint}{count}")


class ActionRepeatError(EnvError):
    """``action_repeat`` is not an int >= 1, or not one the env's backend supports.

    Attributes:
      action_repeat: the value given.
      supported: the repeats the backend supports (gymnax: ``(1,)``); None when the
        value is invalid on every backend (not an int >= 1).
      backend: the backend that limits the repeat (None if not given).
    """

    field = "action_repeat"

    def __init__(
        self,
        env_id: str | None,
        action_repeat: object,
        supported: tuple[int, ...] | None = None,
        backend: str | None = None,
    ):
        self.action_repeat = action_repeat
        self.supported = None if supported is None else tuple(supported)
        self.backend = backend
        if self.supported is None or not is_positive_int(action_repeat):
            message = (
                f"action_repeat must be an int >= 1, got {action_repeat!r}; "
                "use 1 for no repeat (2 is the DMC protocol of both papers)"
            )
        else:
            allowed = " or ".join(f"action_repeat={r}" for r in self.supported)
            message = (
                f"{backend or 'these'} envs support only {allowed}, got "
                f"action_repeat={action_repeat}"
            )
        super().__init__(env_id, _prefix(env_id) + message)


class EpisodeLengthError(EnvError):
    """The time limit is not an int >= 1, or not divisible by the action repeat.

    Attributes:
      episode_length: the time limit at fault, in backend steps: the value given, or
        the env's default when none was given (then the default does not divide).
      action_repeat: the repeat it was checked against.
    """

    field = "episode_length"

    def __init__(self, env_id: str | None, episode_length: object, action_repeat: int):
        self.episode_length = episode_length
        self.action_repeat = action_repeat
        if not is_positive_int(episode_length):
            message = _prefix(env_id) + (
                f"episode_length must be an int >= 1 or None, got {episode_length!r}"
            )
        else:  # starts with the number: callers prefix their own key ("env.episode_length: ")
            of = f" (the time limit of {env_id})" if env_id is not None else ""
            message = (
                f"{episode_length} backend steps{of} are not divisible by "
                f"action_repeat={action_repeat}; choose a repeat that divides it"
            )
        super().__init__(env_id, message)
