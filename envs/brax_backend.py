"""brax 0.14.2 envs adapted to :class:`envs.core.Env` (docs/design.md §5.1).

* Physics pipeline: :data:`DEFAULT_PIPELINE` (see its comment for the measurement that
  chose it; deviation E27). ``brax.envs.get_environment`` itself takes < 1 s with any
  pipeline on CPU; the cost is the XLA compile of reset/step.
* Time limit (default 1000 env steps, brax's ``create`` default) and action repeat are
  ours (:mod:`envs.wrappers`): rewards summed, the repeat does not stop on termination
  (E22). brax's ``done`` is a true termination (unhealthy / fallen pole): ``ant``,
  ``hopper``, ``humanoid``, ``walker2d``, ``inverted_pendulum`` and
  ``inverted_double_pendulum`` have ``can_terminate=True``.
* Bounds: brax envs take actions in [-1, 1]. ``humanoid``, ``humanoidstandup``,
  ``inverted_pendulum`` and ``pusher`` rescale [-1, 1] to their ctrlrange inside
  ``step``; the others' ctrlrange is [-1, 1]. The spec therefore records [-1, 1] for the
  former and the ctrlrange for the latter (equal to [-1, 1] in brax 0.14.2).
* Not registered: ``fast`` (brax's test double) and ``swimmer``: it supports only the
  ``'generalized'`` pipeline, whose fluid model calls ``jnp.clip(a_min=...)``, an
  argument jax 0.10 removed (TypeError when traced). Playground's ``swimmer_swimmer6``
  is the DMC swimmer.
"""

from __future__ import annotations

from typing import Any

import jax

from envs.core import Backend, Env, EnvSpec, StaticFacts, agent_episode_length
from envs.wrappers import build_env

DEFAULT_EPISODE_LENGTH = 1000

# registry id -> static facts, read off each env built with brax 0.14.2 (sizes are the
# same on every pipeline); can_terminate is ours: brax's done is a true termination.
BRAX_FACTS: dict[str, StaticFacts] = {
    # StaticFacts(obs_size, action_size, discrete, can_terminate, default_episode_length)
    "ant": StaticFacts(27, 8, False, True, DEFAULT_EPISODE_LENGTH),
    "halfcheetah": StaticFacts(17, 6, False, False, DEFAULT_EPISODE_LENGTH),
    "hopper": StaticFacts(11, 3, False, True, DEFAULT_EPISODE_LENGTH),
    "humanoid": StaticFacts(244, 17, False, True, DEFAULT_EPISODE_LENGTH),
    "humanoidstandup": StaticFacts(244, 17, False, False, DEFAULT_EPISODE_LENGTH),
    "inverted_pendulum": StaticFacts(4, 1, False, True, DEFAULT_EPISODE_LENGTH),
    "inverted_double_pendulum": StaticFacts(8, 1, False, True, DEFAULT_EPISODE_LENGTH),
    "pusher": StaticFacts(23, 7, False, False, DEFAULT_EPISODE_LENGTH),
    "reacher": StaticFacts(11, 2, False, False, DEFAULT_EPISODE_LENGTH),
    "walker2d": StaticFacts(17, 6, False, True, DEFAULT_EPISODE_LENGTH),
}

# registry id -> can_terminate (a view of BRAX_FACTS)
BRAX_ENVS: dict[str, bool] = {i: f.can_terminate for i, f in BRAX_FACTS.items()}

# Envs whose step maps a [-1, 1] action to the actuators' ctrlrange itself.
_RESCALE_INSIDE = frozenset({"humanoid", "humanoidstandup", "inverted_pendulum", "pusher"})

# Pipeline choice, measured on the 2-core CPU (reset + 200 random steps under jit, one env):
# 'spring' ran 3-10x faster than 'generalized' and 'mjx' and compiled no slower, but it
# swaps the physics for a spring approximation; 'mjx' is MuJoCo's own physics (what Gym's
# MuJoCo tasks run) at 2-4k steps/s (docs/deviations.md, E27).
DEFAULT_PIPELINE = "spring"
_PIPELINE_OVERRIDES: dict[str, str] = {}


def pipeline_for(env_id: str) -> str:
    """The brax physics pipeline ``env_id`` is built with."""
    return _PIPELINE_OVERRIDES.get(env_id, DEFAULT_PIPELINE)


def build(
    env_id: str,
    action_repeat: int = 1,
    episode_length: int | None = None,
    pipeline: str | None = None,
) -> Env:
    """Build brax env ``env_id`` (a key of :data:`BRAX_ENVS`).

    Args:
      env_id: registry id (= brax name).
      action_repeat: env steps per agent step (rewards summed).
      episode_length: time limit in env steps; None = 1000.
      pipeline: brax physics pipeline; None = :func:`pipeline_for`.

    Raises:
      ActionRepeatError: ``action_repeat`` is not an int >= 1.
      EpisodeLengthError: the time limit is not an int >= 1 or not divisible by the repeat.
    """
    limit = DEFAULT_EPISODE_LENGTH if episode_length is None else episode_length
    agent_limit = agent_episode_length(limit, action_repeat, env_id)
    from brax import envs as brax_envs

    pipeline = pipeline or pipeline_for(env_id)
    env = brax_envs.get_environment(env_id, backend=pipeline)
    size = int(env.action_size)
    if env_id in _RESCALE_INSIDE:
        low, high = (-1.0,) * size, (1.0,) * size
    else:
        ctrl = env.sys.actuator.ctrl_range
        low = tuple(float(x) for x in ctrl[:, 0])
        high = tuple(float(x) for x in ctrl[:, 1])
    # brax's ``observation_size`` runs a reset op by op (seconds); trace it instead.
    obs = jax.eval_shape(env.reset, jax.random.PRNGKey(0)).obs
    spec = EnvSpec(
        env_id=env_id,
        backend="brax",
        obs_size=int(obs.shape[-1]),
        action_size=size,
        discrete=False,
        episode_length=agent_limit,
        action_repeat=action_repeat,
        action_low=low,
        action_high=high,
        can_terminate=BRAX_FACTS[env_id].can_terminate,
    )

    def raw_reset(key):
        state = env.reset(key)
        return state, state.obs

    def raw_step(state, env_action, key):
        del key  # brax envs are deterministic given the state
        state = env.step(state, env_action)
        return state, state.obs, state.reward, state.done > 0

    return build_env(spec, raw_reset, raw_step)


def renderer(env_id: str, action_repeat: int, size: tuple[int, int]) -> Any:
    """MuJoCo's renderer on the env's ``sys.mj_model`` (:func:`envs.render.mujoco_renderer`)."""
    from brax import envs as brax_envs

    from envs.render import mujoco_renderer

    env = brax_envs.get_environment(env_id, backend=pipeline_for(env_id))
    return mujoco_renderer(env_id, env.sys.mj_model, _keep, float(env.dt) * action_repeat, size)


def _keep(inner: Any) -> dict[str, Any]:
    """What a frame reads of a brax state: generalized positions and velocities."""
    return {"qpos": inner.pipeline_state.q, "qvel": inner.pipeline_state.qd}


BACKEND = Backend(
    name="brax",
    tasks=BRAX_FACTS,
    build=build,
    renderer=renderer,
    mujoco_gl=True,
    frame_cpu_s=1e-3,  # as playground's MJX step (docs/PERFORMANCE.md, "Environments")
)
