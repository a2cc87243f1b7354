"""A user's own env, built by a factory outside the project (docs/design.md §5.5).

    # my_pkg/envs.py, anywhere on PYTHONPATH: no edit of this project
    def make_env(action_repeat: int, episode_length: int | None) -> envs.Env: ...

    python -m launcher env=custom env.factory=my_pkg.envs:make_env [env.id=my_env]

:func:`make` imports the factory (``package.module:function``), calls it with the launch's
``action_repeat`` and ``episode_length`` (the time limit in backend steps; None = the env's
own) and holds what it returns to the env protocol of :mod:`envs.core` before any agent
sees it:

* an object with ``spec`` (an :class:`envs.core.EnvSpec`), ``reset(key)`` and
  ``step(state, action)``; :func:`envs.wrappers.build_env` makes one from raw functions, with
  the action mapping, the repeat and the time limit of the built-in envs;
* its spec: positive sizes and time limit, the repeat asked for, the time limit asked for
  (when one is), and for continuous actions finite bounds, one pair per action, low < high;
* its functions, traced abstractly (``jax.eval_shape``: nothing compiled or run):
  ``reset(key)`` returns an :class:`envs.core.EnvState` with ``obs`` [obs_size] float32 and
  scalar ``reward`` / ``done`` / ``terminated`` / ``t``; ``step(state, action)`` on an
  [action_size] float32 action returns a state of the same structure, shapes and dtypes.

The env is renamed to the config's ``env.id`` (``custom`` unless given) and its backend to
:data:`NAME`: its facts (:func:`facts`) are read off the built spec, as for an env
registered without static facts. A failed check raises :class:`CustomEnvError` with one
line saying what to fix (``field`` names the config key: ``factory`` or ``id``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any, NoReturn

import jax
import jax.numpy as jnp

from envs.bounds import check_bounds
from envs.core import Env, EnvSpec, EnvState
from envs.errors import EnvError, is_positive_int
from envs.facts import EnvFacts
from envs.registry import list_envs

NAME = "custom"  # the backend of a user's env (EnvSpec.backend, EnvFacts.backend)
SIGNATURE = "function(action_repeat, episode_length) -> envs.Env"


class CustomEnvError(EnvError):
    """A user's env that cannot be built or breaks the env protocol.

    Attributes:
      field: the config key at fault (``"factory"`` or ``"id"``).
    """

    def __init__(self, env_id: str | None, message: str, field: str = "factory"):
        super().__init__(env_id, message)
        self.field = field


def load(path: str) -> Callable[..., Any]:
    """The factory at ``path`` (``package.module:function``).

    Raises:
      CustomEnvError: a malformed path, a module that does not import, a missing or
        uncallable attribute, or a function that does not take ``action_repeat`` and
        ``episode_length``.
    """
    module_name, sep, attr = str(path).partition(":")
    if not (sep and module_name and attr):
        raise CustomEnvError(None, f"{path!r} is not package.module:function ({SIGNATURE})")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise CustomEnvError(
            None,
            f"cannot import {module_name!r} ({err}); put the folder that holds its package "
            "on PYTHONPATH",
        ) from None
    except Exception as err:  # noqa: BLE001 - the user's module failed: one line, not a trace
        raise CustomEnvError(
            None, f"importing {module_name!r} raised {type(err).__name__}: {_first_line(err)}"
        ) from None
    if not hasattr(module, attr):
        names = sorted(n for n, v in vars(module).items() if callable(v) and n[0] != "_")
        raise CustomEnvError(
            None,
            f"{module_name!r} has no attribute {attr!r}; its functions: {', '.join(names)}",
        )
    factory = getattr(module, attr)
    if not callable(factory):
        raise CustomEnvError(None, f"{path} is a {type(factory).__name__}, not a {SIGNATURE}")
    try:
        inspect.signature(factory).bind(action_repeat=1, episode_length=None)
    except TypeError:
        raise CustomEnvError(
            None, f"{path} must take action_repeat= and episode_length= ({SIGNATURE})"
        ) from None
    except ValueError:  # no signature to read (a builtin): its call will tell
        pass
    return factory


def make(
    path: str, action_repeat: int = 1, episode_length: int | None = None, name: str = NAME
) -> Env:
    """The user's env from the factory at ``path``, checked (module docstring) and named
    ``name``. Cached on the arguments: the same arguments return the same object, so
    jitted functions over it are traced once.

    Raises:
      CustomEnvError: ``name`` is a registered id, or a check fails.
      ActionRepeatError, EpisodeLengthError: the factory's own refusal of these arguments.
    """
    if name in list_envs():
        raise CustomEnvError(
            name,
            f"{name!r} is a built-in env; your env (env.factory) needs a name of its own: "
            "env=custom, or env.id=<your name>",
            field="id",
        )
    return _make(path, action_repeat, episode_length, name)


def facts(
    path: str, action_repeat: int = 1, episode_length: int | None = None, name: str = NAME
) -> EnvFacts:
    """The :class:`envs.facts.EnvFacts` of :func:`make` (builds it, cached)."""
    return EnvFacts.from_spec(make(path, action_repeat, episode_length, name).spec)


@functools.cache
def _make(path: str, action_repeat: int, episode_length: int | None, name: str) -> Env:
    factory = load(path)
    try:
        env = factory(action_repeat=action_repeat, episode_length=episode_length)
    except EnvError:
        raise
    except ValueError as err:  # the factory's own refusal: one line, naming it
        raise CustomEnvError(name, f"{path} refused: {_first_line(err)}") from None
    where = f"{path} returned"
    spec = getattr(env, "spec", None)
    if not (
        isinstance(spec, EnvSpec) and callable(getattr(env, "reset", None)) and callable(env.step)
    ):
        raise CustomEnvError(
            name,
            f"{where} a {type(env).__name__}, not an env: it needs spec (an envs.EnvSpec), "
            "reset(key) and step(state, action), e.g. envs.build_env(spec, reset, step)",
        )
    check_spec(spec, action_repeat, episode_length, where)
    spec = dataclasses.replace(spec, env_id=name, backend=NAME)
    built = Env(spec=spec, reset=env.reset, step=env.step)
    check_functions(built, where)
    return built


def check_spec(
    spec: EnvSpec, action_repeat: int, episode_length: int | None, where: str = "the env"
) -> None:
    """Hold a spec to the facts the launcher and the agents read (module docstring).

    Raises:
      CustomEnvError: the first fact that does not hold.
    """

    def fail(problem: str) -> NoReturn:
        raise CustomEnvError(spec.env_id, f"{where} an env whose {problem}")

    for key in ("obs_size", "action_size", "episode_length", "action_repeat"):
        if not is_positive_int(getattr(spec, key)):
            fail(f"spec.{key} is {getattr(spec, key)!r}, not an int >= 1")
    for key in ("discrete", "can_terminate"):
        if not isinstance(getattr(spec, key), bool):
            fail(f"spec.{key} is {getattr(spec, key)!r}, not a bool")
    if spec.action_repeat != action_repeat:
        fail(
            f"spec.action_repeat is {spec.action_repeat}, but the launch asks for "
            f"{action_repeat} (build it with the action_repeat given)"
        )
    if episode_length is not None and spec.episode_length * action_repeat != episode_length:
        fail(
            f"time limit is {spec.episode_length} agent steps x {action_repeat}, but the launch "
            f"asks for {episode_length} backend steps (build it with the episode_length given)"
        )
    if spec.discrete:
        return
    low, high = spec.action_low, spec.action_high
    if low is None or high is None:
        fail("actions are continuous but spec.action_low / action_high are not set")
    if len(low) != spec.action_size or len(high) != spec.action_size:
        fail(f"action bounds have {len(low)} / {len(high)} values for {spec.action_size} actions")
    try:
        check_bounds(tuple(low), tuple(high))
    except (ValueError, TypeError) as err:
        fail(f"action bounds are bad: {_first_line(err)}")


def check_functions(env: Env, where: str = "the env") -> None:
    """Trace ``reset`` and one ``step`` abstractly (``jax.eval_shape``) and hold their
    states to the spec (module docstring).

    Raises:
      CustomEnvError: a function fails to trace or returns the wrong structure or shapes.
    """
    spec = env.spec

    def fail(problem: str) -> NoReturn:
        raise CustomEnvError(spec.env_id, f"{where} an env whose {problem}")

    try:
        state = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    except Exception as err:  # noqa: BLE001 - the user's function: one line, not a trace
        fail(f"reset(key) fails: {type(err).__name__}: {_first_line(err)}")
    check_state(state, spec, "reset(key)", fail)
    action = jax.ShapeDtypeStruct((spec.action_size,), jnp.float32)
    try:
        after = jax.eval_shape(env.step, state, action)
    except Exception as err:  # noqa: BLE001 - the user's function: one line, not a trace
        fail(
            f"step(state, action) fails on a [{spec.action_size}] float32 action: "
            f"{type(err).__name__}: {_first_line(err)}"
        )
    check_state(after, spec, "step(state, action)", fail)
    if jax.tree.structure(after.inner) != jax.tree.structure(state.inner) or any(
        (a.shape, a.dtype) != (b.shape, b.dtype)
        for a, b in zip(jax.tree.leaves(after.inner), jax.tree.leaves(state.inner), strict=True)
    ):
        fail("step(state, action) changes the structure, shapes or dtypes of state.inner")


def check_state(state: Any, spec: EnvSpec, call: str, fail: Callable[[str], NoReturn]) -> None:
    """Hold an abstract :class:`EnvState` to the spec's sizes (``fail(problem)`` if not)."""
    if not isinstance(state, EnvState):
        fail(f"{call} returns a {type(state).__name__}, not an envs.EnvState")
    want = {
        "obs": ((spec.obs_size,), jnp.float32),
        "reward": ((), jnp.float32),
        "done": ((), jnp.bool_),
        "terminated": ((), jnp.bool_),
        "t": ((), jnp.int32),
    }
    for key, (shape, dtype) in want.items():
        got = getattr(state, key)
        if (tuple(got.shape), got.dtype) != (shape, jnp.dtype(dtype)):
            fail(
                f"{call} returns {key} {got.dtype.name}{list(got.shape)}, not "
                f"{jnp.dtype(dtype).name}{list(shape)} (spec.obs_size={spec.obs_size})"
            )


def _first_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return lines[0] if lines else type(err).__name__
