"""The env protocol: the interface every env is adapted to, and what a backend declares.

The one place the protocol is defined (docs/design.md §5.1, §5.5). An :class:`Env` is a
frozen bundle of static facts (:class:`EnvSpec`) and two pure functions over one
(unbatched) environment:

    reset(key)            -> EnvState
    step(state, action)   -> EnvState

``action`` is always in *agent units*: a float vector of size ``spec.action_size``.
Continuous actions lie in [-1, 1] and are mapped to the backend's finite Box bounds
by :func:`envs.bounds.to_env_action` (docs/design.md §5.1); discrete actions are one-hot
vectors (argmax taken). ``step`` applies ``spec.action_repeat`` backend steps and
enforces the time limit ``spec.episode_length`` (in agent steps). It never resets:
resets are the row collector's job (static mode) or the :mod:`envs.autoreset`
wrapper's (dynamic mode).

Batch with ``jax.vmap``; every field of :class:`EnvState` is per-env.

A *backend* is one module that ends with a :class:`Backend` declaration (``BACKEND``): its
tasks and their :class:`StaticFacts`, its builder, its action-repeat limits, the
``action_repeat`` of its ``env=<id>`` options, its renderer and its CPU cost per frame. Its
module path in :data:`envs.registry.BACKEND_MODULES` registers it: the registry, the
launcher's ``env=`` options (Hydra's ConfigStore), the video renderer and the CPU budget all
read the declaration. A user's own env needs no backend: a factory returning an :class:`Env`
(``env=custom env.factory=pkg.mod:make_env``, :mod:`envs.custom`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from envs.errors import ActionRepeatError, EpisodeLengthError, is_positive_int


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """Static facts of an environment, as the agent sees it.

    Attributes:
      env_id: registry id (``walker_walk``, ``pendulum``, ...).
      backend: the name of its :class:`Backend` (``envs.registry.backends()``); ``custom``
        for a user's own env (:mod:`envs.custom`).
      obs_size: size of the flat float32 observation vector.
      action_size: continuous action dim, or number of discrete actions.
      discrete: whether actions are one-hot over ``action_size`` choices.
      action_low, action_high: the backend's Box bounds (continuous only), per dim.
      episode_length: T, the time limit in *agent* steps (docs/design.md §3).
      action_repeat: backend steps per agent step.
      can_terminate: whether an episode may end before T (true termination).
      achievements: the names of the env's achievements in a fixed order (the order of
        ``EnvState.unlocked``); empty on envs without any (issue 46 contract).
      obs_mode: the observation mode it was built with (:data:`OBS_MODES`): ``vector`` =
        ``obs`` is ``[obs_size]`` float32; ``image`` = ``obs`` is a ``image_shape``
        (H, W, C) uint8 image and ``obs_size`` is 0 (no vector beside it; issue 47).
      image_shape: (H, W, C) of an ``image`` env's observation; None for ``vector``.
    """

    env_id: str
    backend: str
    obs_size: int
    action_size: int
    discrete: bool
    episode_length: int
    action_repeat: int = 1
    action_low: tuple[float, ...] | None = None
    action_high: tuple[float, ...] | None = None
    can_terminate: bool = False
    achievements: tuple[str, ...] = ()
    obs_mode: str = "vector"
    image_shape: tuple[int, int, int] | None = None

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """The shape of one env's ``EnvState.obs``: ``(obs_size,)`` or ``image_shape``."""
        return (self.obs_size,) if self.image_shape is None else self.image_shape

    @property
    def obs_dtype(self) -> Any:
        """The dtype of ``EnvState.obs``: float32 vectors, uint8 images."""
        return jnp.float32 if self.image_shape is None else jnp.uint8


# The observation modes a backend may offer (Backend.obs_modes; envs.make(obs=...)): every env
# has ``vector``; ``image`` is the same game observed as a uint8 image (issue 47).
OBS_MODES = ("vector", "image")


class StaticFacts(NamedTuple):
    """The facts of a registered env that hold for every build, known without building it.

    Each backend module keeps a table of these (measured by building each env once;
    the registry smoke test checks them against every built spec), so
    :func:`envs.facts` imports no simulator.

    Attributes:
      obs_size, action_size, discrete, can_terminate: as in :class:`EnvSpec`.
      default_episode_length: the time limit in *backend* steps when ``make`` is given
        ``episode_length=None``.
    """

    obs_size: int
    action_size: int
    discrete: bool
    can_terminate: bool
    default_episode_length: int


@struct.dataclass
class EnvState:
    """Per-env state after a reset or a step.

    Attributes:
      inner: the backend's own state pytree.
      obs: [obs_size] float32, the observation now.
      reward: [] float32, reward of the last agent step (summed over repeats), 0 after reset.
      done: [] bool, the episode ended on the last step (terminated or time limit).
      terminated: [] bool, the episode ended by a true termination (no bootstrap).
      t: [] int32, agent steps taken in this episode.
      key: PRNG key for the backend's own randomness (gymnax steps are stochastic).
      final_obs: [obs_size] float32 or None. None on plain envs. On an
        :func:`envs.autoreset.autoreset` env: after a step that ended the episode
        (``done``), the episode's final observation (``obs`` is then already the next
        episode's reset observation); otherwise equal to ``obs`` (deviation E20). Read it
        with :func:`envs.autoreset.get_final_obs`, which works for both.
      unlocked: [n_achievements] bool or None. The achievements (``spec.achievements``)
        unlocked on the last agent step (OR over its action repeats), all False after a
        reset; None on envs without achievements (their pytrees are unchanged). An
        :func:`envs.autoreset.autoreset` env keeps the ending step's value on the step that
        ended an episode, as it keeps its ``reward``: OR-ing ``unlocked`` over an episode's
        steps gives the episode's achievement set.
    """

    inner: Any
    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    terminated: jax.Array
    t: jax.Array
    key: jax.Array
    final_obs: jax.Array | None = None
    unlocked: jax.Array | None = None


@dataclasses.dataclass(frozen=True)
class Env:
    """A pure, unbatched environment: ``reset(key)`` and ``step(state, action)``."""

    spec: EnvSpec
    reset: Callable[[jax.Array], EnvState]
    step: Callable[[EnvState, jax.Array], EnvState]

    def __hash__(self) -> int:  # static argument to jit: identity of the spec + functions
        return hash((self.spec, self.reset, self.step))


@dataclasses.dataclass(frozen=True)
class ObservedEnv(Env):
    """An :class:`Env` whose observation is drawn from its state (an image rendered on the
    host, :mod:`envs.pixels`), with the draw apart, so :mod:`envs.autoreset` draws a reset
    frame only for the envs whose episode ended (under ``vmap`` both of its branches run).

    Attributes:
      reset_unobserved: ``reset`` without the draw: the same state with ``obs`` all zeros.
      observe: ``(inner, where) -> obs``: the observation of a state, zeros where ``where``
        ([] bool) is False (nothing drawn).
    """

    reset_unobserved: Callable[[jax.Array], EnvState] | None = None
    observe: Callable[[Any, jax.Array], jax.Array] | None = None


# builder(env_id, action_repeat, episode_length) -> Env: episode_length in backend steps, None
# for the backend's default; raises the typed errors of envs.errors for bad arguments.
Builder = Callable[[str, int, int | None], Any]
# tasks registered before a derived backend's (task sets) -> its own id -> StaticFacts table
DerivedTasks = Callable[[Callable[[str], StaticFacts]], Mapping[str, StaticFacts]]


@dataclasses.dataclass(frozen=True)
class Backend:
    """What one backend module declares (as ``BACKEND``); registered by its module path in
    :data:`envs.registry.BACKEND_MODULES` (docs/design.md §5.5).

    Attributes:
      name: the backend's name (``EnvSpec.backend``).
      tasks: registry id -> :class:`StaticFacts`, measured by building each env once (the
        registry smoke test checks every row against the built spec); or, for a backend
        made of other envs (task sets), a function of the facts of the ids registered before.
      build: the :data:`Builder`. Import the simulator inside it, not at module level:
        listing ids and reading facts must import no simulator.
      action_repeats: the repeats it supports; None = every int >= 1.
      preset_action_repeat: ``env.action_repeat`` of its ``env=<id>`` launcher options (the
        DMC protocol of both papers: 2); ``envs.make``'s default stays 1.
      renderer: ``(env_id, action_repeat, (height, width)) -> envs.render.EnvRenderer`` for
        episode videos; None = nothing to show.
      mujoco_gl: the renderer draws with MuJoCo (it needs an OpenGL context, ``MUJOCO_GL``).
      frame_cpu_s: CPU seconds per backend step of one env (the launcher's CPU budget,
        docs/PERFORMANCE.md "Environments"); 0 where negligible.
      obs_modes: the observation modes its builder offers (:data:`OBS_MODES`); a mode other
        than ``vector`` reaches the builder as its keyword ``obs``.
      image_cpu_s: CPU seconds per image observation of one env in ``image`` mode (one per
        agent step), on top of ``frame_cpu_s``: a host render (:mod:`envs.pixels`); 0 where
        the image costs nothing beside the step.
    """

    name: str
    tasks: Mapping[str, StaticFacts] | DerivedTasks
    build: Builder
    action_repeats: tuple[int, ...] | None = None
    preset_action_repeat: int = 1
    renderer: Callable[[str, int, tuple[int, int]], Any] | None = None
    mujoco_gl: bool = False
    frame_cpu_s: float = 0.0
    obs_modes: tuple[str, ...] = ("vector",)
    image_cpu_s: float = 0.0


def initial_state(inner: Any, obs: jax.Array, key: jax.Array, image: bool = False) -> EnvState:
    """EnvState right after a reset: zero reward, not done, t = 0; ``obs`` flattened to
    float32, or kept as a uint8 image if ``image``."""
    obs = jnp.asarray(obs, jnp.uint8) if image else jnp.asarray(obs, jnp.float32).reshape(-1)
    return EnvState(
        inner=inner,
        obs=obs,
        reward=jnp.zeros((), jnp.float32),
        done=jnp.zeros((), bool),
        terminated=jnp.zeros((), bool),
        t=jnp.zeros((), jnp.int32),
        key=key,
    )


def check_action_repeat(
    action_repeat: object,
    env_id: str | None = None,
    supported: tuple[int, ...] | None = None,
    backend: str | None = None,
) -> None:
    """Hold that ``action_repeat`` is an int >= 1 and, if ``supported`` is given, in it.

    Raises:
      ActionRepeatError: otherwise (``supported`` and ``backend`` name the limit).
    """
    if not is_positive_int(action_repeat):
        raise ActionRepeatError(env_id, action_repeat, None, backend)
    if supported is not None and action_repeat not in supported:
        raise ActionRepeatError(env_id, action_repeat, supported, backend)


def check_episode_length(episode_length: object, env_id: str | None = None) -> None:
    """Hold that ``episode_length`` is None (the backend's default) or an int >= 1.

    Raises:
      EpisodeLengthError: otherwise.
    """
    if episode_length is not None and not is_positive_int(episode_length):
        raise EpisodeLengthError(env_id, episode_length, 1)


def agent_episode_length(
    backend_episode_length: int, action_repeat: int, env_id: str | None = None
) -> int:
    """T in agent steps from the backend's time limit in backend steps (docs/design.md §3).

    Args:
      backend_episode_length: the time limit in backend steps (an int >= 1).
      action_repeat: backend steps per agent step (an int >= 1).
      env_id: named in the errors, if given.

    Raises:
      ActionRepeatError: ``action_repeat`` is not an int >= 1.
      EpisodeLengthError: the limit is not an int >= 1, or not a multiple of the repeat.
    """
    check_action_repeat(action_repeat, env_id)
    if not is_positive_int(backend_episode_length) or backend_episode_length % action_repeat:
        raise EpisodeLengthError(env_id, backend_episode_length, action_repeat)
    return backend_episode_length // action_repeat
