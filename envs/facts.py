"""An env's static facts and the validation of its arguments, without building it.

    facts = envs.facts("walker_walk", action_repeat=2)    # imports no simulator
    facts.obs_size, facts.action_size, facts.episode_length  # 24, 6, 500

:func:`facts` runs the same checks as :func:`envs.make` (both call
:func:`envs.registry.check_args`) and raises the same typed errors
(:mod:`envs.errors`), then reads the answer off the backend modules' static tables
(``GYMNAX_FACTS``, ``PLAYGROUND_FACTS``, ``BRAX_FACTS``, ``PROBE_FACTS``). The registry
smoke test (tests/envs/test_registry.py) checks those tables against every built spec.

An env registered at runtime (:func:`envs.register`) without ``facts=`` has no table
row: :func:`facts` then builds it with :func:`envs.make` (cached) and reads its spec.
"""

from __future__ import annotations

import dataclasses
import functools

from envs.core import EnvSpec
from envs.registry import backends, check_args, check_obs_mode, make


@dataclasses.dataclass(frozen=True)
class EnvFacts:
    """The static facts of ``make(env_id, action_repeat, episode_length)``.

    Attributes:
      env_id, backend, obs_size, action_size, discrete, can_terminate: as in
        :class:`envs.core.EnvSpec`.
      episode_length: T, the time limit in *agent* steps (after the repeat), as
        ``EnvSpec.episode_length``.
      action_repeat: backend steps per agent step.
      backend_episode_length: the time limit in backend steps (T * action_repeat).
      obs_mode: the observation mode (``vector``, ``image``; :data:`envs.core.OBS_MODES`);
        an ``image`` env's ``obs_size`` is 0 (its image is ``EnvSpec.image_shape``).
      image_shape: ``EnvSpec.image_shape``, (H, W, C) of an ``image`` env, else None (what
        a cost model sizes an image agent by, e.g. agents/dreamerv3/cost.py).
    """

    env_id: str
    backend: str
    obs_size: int
    action_size: int
    discrete: bool
    can_terminate: bool
    episode_length: int
    action_repeat: int
    backend_episode_length: int
    obs_mode: str = "vector"
    image_shape: tuple[int, int, int] | None = None

    @classmethod
    def from_spec(cls, spec: EnvSpec) -> EnvFacts:
        """The facts of a built env's spec."""
        return cls(
            env_id=spec.env_id,
            backend=spec.backend,
            obs_size=spec.obs_size,
            action_size=spec.action_size,
            discrete=spec.discrete,
            can_terminate=spec.can_terminate,
            episode_length=spec.episode_length,
            action_repeat=spec.action_repeat,
            backend_episode_length=spec.episode_length * spec.action_repeat,
            obs_mode=spec.obs_mode,
            image_shape=spec.image_shape,
        )


def facts(
    env_id: str, action_repeat: int = 1, episode_length: int | None = None, obs: str = "vector"
) -> EnvFacts:
    """The facts of ``envs.make(env_id, action_repeat, episode_length, obs)``, without a build.

    Args:
      env_id: a registered id (:func:`envs.list_envs`).
      action_repeat: backend steps per agent step (>= 1; gymnax: only 1).
      episode_length: the time limit in backend steps; None = the env's default.
      obs: the observation mode (``envs.make``'s ``obs``).

    Returns:
      The :class:`EnvFacts`, equal to ``EnvFacts.from_spec(envs.make(...).spec)``. Read
      from static tables (no simulator imported) for every built-in id; an env
      registered without static facts is built (see the module docstring).

    Raises:
      UnknownEnvError: unknown id (naming the closest ids).
      ActionRepeatError: action_repeat is not an int >= 1 or not supported by the backend.
      EpisodeLengthError: episode_length is not None or an int >= 1, or the time limit
        is not divisible by the repeat.
    """
    entry, limit = check_args(env_id, action_repeat, episode_length)
    check_obs_mode(env_id, obs, backends()[entry.backend].obs_modes)
    row = entry.facts
    if obs != "vector":  # the tables hold no image shape: built once per process
        return _built_facts(env_id, action_repeat, episode_length, obs)
    if row is None or limit is None:
        return EnvFacts.from_spec(make(env_id, action_repeat, episode_length, obs).spec)
    return EnvFacts(
        env_id=env_id,
        backend=entry.backend,
        obs_size=row.obs_size if obs == "vector" else 0,  # an image env has no vector
        action_size=row.action_size,
        discrete=row.discrete,
        can_terminate=row.can_terminate,
        episode_length=limit // action_repeat,
        action_repeat=action_repeat,
        backend_episode_length=limit,
        obs_mode=obs,
    )


@functools.lru_cache(maxsize=64)
def _built_facts(env_id: str, action_repeat: int, episode_length: int | None, obs: str) -> EnvFacts:
    """The facts of a built env in a mode other than ``vector`` (its image shape is in no
    table); cached: building imports the simulator."""
    return EnvFacts.from_spec(make(env_id, action_repeat, episode_length, obs).spec)
