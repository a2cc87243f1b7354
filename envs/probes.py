"""Probe envs with known answers (docs/design.md §5.4; backend ``"probe"``).

Fixed-length and non-terminating: every episode ends by the time limit only
(``done`` at ``t == T``, ``terminated`` never), so a correct agent bootstraps at the end
of every episode. Both probes have a 1-D continuous action in [-1, 1] and a constant
1-D observation ``[1.0]``; their default T is :data:`PROBE_EPISODE_LENGTH` agent steps
(override with ``episode_length``, in probe steps; with ``action_repeat`` the rewards of
the repeated steps are summed like on every backend).

* ``probe_constant_reward``: reward 1 every step, whatever the action. Since the
  observation never changes and the time limit is bootstrapped through, the value of
  every state is the infinite discounted sum V = sum_k gamma^k = 1 / (1 - gamma)
  (times ``action_repeat``). Checks discounting and time-limit bootstrapping.
* ``probe_reward_is_action``: reward = the action in agent units, clipped to [-1, 1]
  (the spec's bounds are [-1, 1], so env units are agent units). The optimal action is
  +1 everywhere, with value 1 / (1 - gamma). Checks that the actor/planner follows the
  reward's gradient in the action.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from envs.core import Backend, Env, EnvSpec, StaticFacts, agent_episode_length
from envs.errors import UnknownEnvError
from envs.wrappers import build_env

PROBE_EPISODE_LENGTH = 20
PROBE_ENVS = ("probe_constant_reward", "probe_reward_is_action")
# registry id -> static facts: 1-D observation and action, continuous, never terminating
PROBE_FACTS: dict[str, StaticFacts] = {
    i: StaticFacts(1, 1, False, False, PROBE_EPISODE_LENGTH) for i in PROBE_ENVS
}


def build(env_id: str, action_repeat: int = 1, episode_length: int | None = None) -> Env:
    """Build probe ``env_id`` (one of :data:`PROBE_ENVS`).

    Args:
      env_id: registry id.
      action_repeat: probe steps per agent step (rewards summed).
      episode_length: time limit in probe steps; None = :data:`PROBE_EPISODE_LENGTH`.

    Raises:
      UnknownEnvError: ``env_id`` is not a probe.
      ActionRepeatError: ``action_repeat`` is not an int >= 1.
      EpisodeLengthError: the time limit is not an int >= 1 or not divisible by the repeat.
    """
    if env_id not in PROBE_ENVS:
        raise UnknownEnvError(env_id, PROBE_ENVS)
    facts = PROBE_FACTS[env_id]
    limit = facts.default_episode_length if episode_length is None else episode_length
    spec = EnvSpec(
        env_id=env_id,
        backend="probe",
        obs_size=facts.obs_size,
        action_size=facts.action_size,
        discrete=facts.discrete,
        episode_length=agent_episode_length(limit, action_repeat, env_id),
        action_repeat=action_repeat,
        action_low=(-1.0,),
        action_high=(1.0,),
        can_terminate=facts.can_terminate,
    )
    constant = env_id == "probe_constant_reward"

    def raw_reset(key: jax.Array):
        del key
        return jnp.zeros((), jnp.int32), jnp.ones((1,), jnp.float32)

    def raw_step(inner: jax.Array, env_action: jax.Array, key: jax.Array):
        del key
        reward = jnp.ones((), jnp.float32) if constant else env_action[0]
        return inner + 1, jnp.ones((1,), jnp.float32), reward, jnp.zeros((), bool)

    return build_env(spec, raw_reset, raw_step)


# Probes have nothing to show (no renderer) and cost nothing to step.
BACKEND = Backend(name="probe", tasks=PROBE_FACTS, build=build)
