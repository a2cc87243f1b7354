"""gymnax 1.0.1 classic-control envs adapted to :class:`envs.core.Env` (design §5.1).

We call the env's raw ``step_env`` / ``reset_env`` (never gymnax's auto-resetting
``step``), so a step never resets, the time limit is ours (``spec.episode_length``, in
agent steps; gymnax's own ``max_steps_in_episode`` is set to the same value) and
``terminated`` is the env's true termination only. gymnax steps take a key: it is split
from ``EnvState.key`` by :func:`envs.wrappers.build_env`.

``action_repeat > 1`` raises ValueError: no paper uses it on these tasks (design §5.1).
"""

from __future__ import annotations

from envs.core import Env, EnvSpec, agent_episode_length
from envs.wrappers import build_env

# registry id -> (gymnax name, can_terminate)
GYMNAX_ENVS: dict[str, tuple[str, bool]] = {
    "pendulum": ("Pendulum-v1", False),
    "cartpole": ("CartPole-v1", True),
    "mountain_car_continuous": ("MountainCarContinuous-v0", True),
    "acrobot": ("Acrobot-v1", True),
    "mountain_car": ("MountainCar-v0", True),
}


def build(env_id: str, action_repeat: int = 1, episode_length: int | None = None) -> Env:
    """Build gymnax env ``env_id`` (a key of :data:`GYMNAX_ENVS`).

    Args:
      env_id: registry id.
      action_repeat: must be 1 (design §5.1).
      episode_length: time limit in env steps; None = gymnax's ``max_steps_in_episode``
        (Pendulum-v1 200, CartPole-v1 500, MountainCarContinuous-v0 999, ...).
    """
    if action_repeat != 1:
        raise ValueError(
            f"{env_id}: gymnax envs support only action_repeat=1 (design §5.1: no paper uses "
            f"a repeat on them), got action_repeat={action_repeat}"
        )
    import gymnax
    from gymnax.environments import spaces

    name, can_terminate = GYMNAX_ENVS[env_id]
    env, params = gymnax.make(name)
    limit = int(params.max_steps_in_episode) if episode_length is None else int(episode_length)
    params = params.replace(max_steps_in_episode=limit)
    space = env.action_space(params)
    obs_shape = env.observation_space(params).shape
    obs_size = 1
    for d in obs_shape:
        obs_size *= int(d)

    if isinstance(space, spaces.Discrete):
        discrete, action_size, low, high = True, int(space.n), None, None
    else:
        shape = tuple(space.shape) or (1,)
        action_size = 1
        for d in shape:
            action_size *= int(d)
        low = _per_dim(space.low, action_size)
        high = _per_dim(space.high, action_size)
        discrete = False

    spec = EnvSpec(
        env_id=env_id,
        backend="gymnax",
        obs_size=obs_size,
        action_size=action_size,
        discrete=discrete,
        episode_length=agent_episode_length(limit, action_repeat),
        action_repeat=action_repeat,
        action_low=low,
        action_high=high,
        can_terminate=can_terminate,
    )

    def raw_reset(key):
        obs, state = env.reset_env(key, params)
        return state, obs

    def raw_step(state, env_action, key):
        obs, state, reward, terminated, _ = env.step_env(key, state, env_action, params)
        return state, obs, reward, terminated

    return build_env(spec, raw_reset, raw_step)


def _per_dim(bound, size: int) -> tuple[float, ...]:
    import numpy as np

    values = np.broadcast_to(np.asarray(bound, np.float64), (size,))
    return tuple(float(v) for v in values)
