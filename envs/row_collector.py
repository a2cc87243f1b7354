"""The row collector: one obs-aligned row per env per tick (docs/design.md §5.2).

Each tick emits, for every env, the row of the observation it is acting on:

    obs          observation acted on at this tick                      [n, O]
                 (an image env's: [n, H, W, C] uint8, issue 47)
    reward       reward received on entering ``obs`` (0 when is_first)   [n]
    is_first     ``obs`` is a reset observation                          [n]
    is_last      ``obs`` is the final observation of its episode          [n]
    is_terminal  the episode ended by a true termination                 [n]
    action       the raw agent action chosen at this tick, 0 if is_last  [n, A]
    extras       agent-defined per-row outputs (pytree, leading dim n)

then advances the envs: an env whose row is ``is_last`` is *held* (not stepped) and
emits its reset observation next tick; every other env is stepped with the action.
An episode of T agent steps is therefore T + 1 rows, exactly TD-MPC2's per-episode
layout and DreamerV3's replay convention.

Two reset modes (chosen by the agent, static in the collector):

* ``static``: fixed-length lockstep episodes. The hold tick is ``i mod (T+1) == T``
  for every env, on the absolute unbatched tick ``i``; on it all envs are reset with
  fresh keys inside a ``lax.cond`` that stays a real branch under the seed vmap
  (docs/design.md §2.4). ``is_last`` comes from the schedule; a ``done`` from the env on any
  other step is counted in ``n_offschedule_dones`` (an error for the agent to raise).
* ``dynamic``: data-dependent episode ends. The env is wrapped in the fresh
  auto-reset of :mod:`envs.autoreset` (deviation E20); an env that ends its episode
  emits its final observation as ``is_last`` next tick, is held on that tick via
  ``jnp.where`` on its state, and emits the auto-reset observation the tick after.

Counters (docs/design.md §3): ``env_steps`` counts agent env steps (held envs do not step),
``rows`` counts rows (n_envs per tick).

The policy is batched over envs: ``policy_fn(carry, obs[n, O], is_first[n], key) ->
(action[n, A], carry, extras)``. During a seed phase (a jnp bool computed by the
caller from the unbatched tick) actions are uniform random in agent units (U[-1, 1],
or a uniform one-hot for discrete envs) and the policy is not called.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from envs.autoreset import autoreset
from envs.core import Env, EnvState

PolicyFn = Callable[[Any, jax.Array, jax.Array, jax.Array], tuple[jax.Array, Any, Any]]
MODES = ("static", "dynamic")


@struct.dataclass
class Row:
    """One row per env (leading dim n_envs on every field); see the module docstring."""

    obs: jax.Array
    reward: jax.Array
    is_first: jax.Array
    is_last: jax.Array
    is_terminal: jax.Array
    action: jax.Array
    extras: Any


@struct.dataclass
class EpisodeStats:
    """Episodes that ended at this tick: ``done[n]`` marks envs whose row is_last;
    ``returns[n]`` / ``lengths[n]`` hold those episodes' return and length in agent
    steps (0 elsewhere)."""

    done: jax.Array
    returns: jax.Array
    lengths: jax.Array


@struct.dataclass
class RowCollectorState:
    """Collector state for n envs: the pending row (obs, reward, flags) of the next tick,
    the batched env state, the policy carry, counters and running episode sums."""

    env_state: EnvState
    obs: jax.Array  # [n, O]
    reward: jax.Array  # [n]
    is_first: jax.Array  # [n] bool
    is_last: jax.Array  # [n] bool
    is_terminal: jax.Array  # [n] bool
    policy_carry: Any
    ep_return: jax.Array  # [n] running return of the current episode
    ep_length: jax.Array  # [n] agent steps taken in the current episode
    env_steps: jax.Array  # [] int32, agent env steps over all envs
    rows: jax.Array  # [] int32, rows emitted over all envs
    n_offschedule_dones: jax.Array  # [] int32 (static mode)


@dataclasses.dataclass(frozen=True)
class RowCollector:
    """Static configuration of a collector over ``n_envs`` copies of ``env``.

    Use :meth:`init` once per seed and :meth:`tick` inside the agent's scan.
    """

    env: Env
    n_envs: int
    mode: str = "static"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown row-collector mode {self.mode!r}; expected one of {MODES}")
        if self.n_envs < 1:
            raise ValueError(f"n_envs must be >= 1, got {self.n_envs}")
        if self.mode == "dynamic":
            stepper = autoreset(self.env)
            if not getattr(stepper, "fresh_reset", True):
                warnings.warn(
                    f"{self.env.spec.env_id}: dynamic-mode auto-reset restarts every episode "
                    "from one cached initial state (deviation E20); build the env with "
                    "fresh resets for diverse initial states",
                    stacklevel=2,
                )
            object.__setattr__(self, "_stepper", stepper)
        else:
            object.__setattr__(self, "_stepper", self.env)

    @property
    def stepper(self) -> Env:
        """The env actually stepped: ``env`` (static) or its fresh auto-reset (dynamic)."""
        return self._stepper  # type: ignore[attr-defined]

    @property
    def ticks_per_episode(self) -> int:
        """T + 1 rows per episode (static mode)."""
        return self.env.spec.episode_length + 1

    def init(self, key: jax.Array, policy_carry: Any = None) -> RowCollectorState:
        """Reset all envs; the first row of every env is its reset observation."""
        env_state = jax.vmap(self.stepper.reset)(jax.random.split(key, self.n_envs))
        n = self.n_envs
        false = jnp.zeros((n,), bool)
        zero_i = jnp.zeros((), jnp.int32)
        return RowCollectorState(
            env_state=env_state,
            obs=env_state.obs,
            reward=jnp.zeros((n,), jnp.float32),
            is_first=jnp.ones((n,), bool),
            is_last=false,
            is_terminal=false,
            policy_carry=policy_carry,
            ep_return=jnp.zeros((n,), jnp.float32),
            ep_length=jnp.zeros((n,), jnp.int32),
            env_steps=zero_i,
            rows=zero_i,
            n_offschedule_dones=zero_i,
        )

    # ------------------------------------------------------------------ acting
    def random_action(self, key: jax.Array) -> jax.Array:
        """Uniform random actions in agent units, [n, A]."""
        spec = self.env.spec
        if spec.discrete:
            idx = jax.random.randint(key, (self.n_envs,), 0, spec.action_size)
            return jax.nn.one_hot(idx, spec.action_size, dtype=jnp.float32)
        return jax.random.uniform(
            key, (self.n_envs, spec.action_size), jnp.float32, minval=-1.0, maxval=1.0
        )

    def _act(
        self,
        state: RowCollectorState,
        key: jax.Array,
        policy_fn: PolicyFn | None,
        use_policy: jax.Array,
    ) -> tuple[jax.Array, Any, Any]:
        """Action [n, A], next carry and extras: the policy's, or random ones (carry kept,
        extras zero) when ``use_policy`` (unbatched bool) is false."""
        k_rand, k_pol = jax.random.split(key)
        if policy_fn is None:
            return self.random_action(k_rand), state.policy_carry, None

        def run_policy(_):
            return policy_fn(state.policy_carry, state.obs, state.is_first, k_pol)

        out_shape = jax.eval_shape(run_policy, None)

        def run_random(_):
            extras = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), out_shape[2])
            return self.random_action(k_rand), state.policy_carry, extras

        return jax.lax.cond(use_policy, run_policy, run_random, None)

    # -------------------------------------------------------------------- tick
    def tick(
        self,
        state: RowCollectorState,
        tick: jax.Array,
        key: jax.Array,
        policy_fn: PolicyFn | None = None,
        random_actions: jax.Array | bool = False,
    ) -> tuple[RowCollectorState, Row, EpisodeStats]:
        """Emit this tick's rows and advance the envs.

        Args:
          state: collector state (unbatched over seeds).
          tick: absolute tick index, an unbatched int scalar.
          key: PRNG key for this tick.
          policy_fn: batched policy; ``None`` means random actions always.
          random_actions: unbatched bool (seed phase); the policy is not called when true.
        Returns:
          (next state, rows of this tick, episodes that ended at this tick).
        """
        k_act, k_reset = jax.random.split(key)
        random_actions = jnp.asarray(random_actions, bool)
        if self.mode == "static":
            T = self.env.spec.episode_length
            phase = jnp.asarray(tick, jnp.int32) % (T + 1)
            hold = phase == T
            use_policy = ~random_actions & ~hold
        else:
            use_policy = ~random_actions
        action, carry, extras = self._act(state, k_act, policy_fn, use_policy)
        action = jnp.where(state.is_last[:, None], 0.0, action).astype(jnp.float32)
        row = Row(
            obs=state.obs,
            reward=state.reward,
            is_first=state.is_first,
            is_last=state.is_last,
            is_terminal=state.is_terminal,
            action=action,
            extras=extras,
        )
        stats = EpisodeStats(
            done=state.is_last,
            returns=jnp.where(state.is_last, state.ep_return, 0.0),
            lengths=jnp.where(state.is_last, state.ep_length, 0),
        )
        if self.mode == "static":
            nxt = self._advance_static(state, action, phase, k_reset)
        else:
            nxt = self._advance_dynamic(state, action)
        stepped = ~state.is_last
        nxt = nxt.replace(
            policy_carry=carry,
            ep_return=jnp.where(state.is_last, 0.0, state.ep_return + nxt.reward),
            ep_length=jnp.where(state.is_last, 0, state.ep_length + 1),
            env_steps=state.env_steps + jnp.sum(stepped, dtype=jnp.int32),
            rows=state.rows + self.n_envs,
        )
        return nxt, row, stats

    def _advance_static(
        self, state: RowCollectorState, action: jax.Array, phase: jax.Array, key: jax.Array
    ) -> RowCollectorState:
        """Static schedule: reset every env on the hold tick, else step every env."""
        T = self.env.spec.episode_length
        n = self.n_envs

        def reset_all(_):
            env_state = jax.vmap(self.env.reset)(jax.random.split(key, n))
            false = jnp.zeros((n,), bool)
            return state.replace(
                env_state=env_state,
                obs=env_state.obs,
                reward=jnp.zeros((n,), jnp.float32),
                is_first=jnp.ones((n,), bool),
                is_last=false,
                is_terminal=false,
            )

        def step_all(_):
            env_state = jax.vmap(self.env.step)(state.env_state, action)
            last = jnp.broadcast_to(phase == T - 1, (n,))
            off = jnp.sum(env_state.done & ~last, dtype=jnp.int32)
            return state.replace(
                env_state=env_state,
                obs=env_state.obs,
                reward=env_state.reward,
                is_first=jnp.zeros((n,), bool),
                is_last=last,
                is_terminal=last & env_state.terminated,
                n_offschedule_dones=state.n_offschedule_dones + off,
            )

        return jax.lax.cond(phase == T, reset_all, step_all, None)

    def _advance_dynamic(self, state: RowCollectorState, action: jax.Array) -> RowCollectorState:
        """Per-env: held envs (row is_last) keep their (already auto-reset) state and emit the
        reset obs; stepped envs emit the final obs when their episode ends."""
        stepped = jax.vmap(self.stepper.step)(state.env_state, action)
        held = state.is_last

        def keep_if_held(old, new):
            mask = held.reshape(held.shape + (1,) * (new.ndim - 1))
            return jnp.where(mask, old, new)

        env_state = jax.tree.map(keep_if_held, state.env_state, stepped)
        done = stepped.done & ~held
        per_env = (-1,) + (1,) * (stepped.obs.ndim - 1)  # [n] masks over [n, O] or images
        obs_after = jnp.where(done.reshape(per_env), stepped.final_obs, stepped.obs)
        return state.replace(
            env_state=env_state,
            obs=jnp.where(held.reshape(per_env), state.env_state.obs, obs_after),
            reward=jnp.where(held, 0.0, stepped.reward),
            is_first=held,
            is_last=done,
            is_terminal=done & stepped.terminated,
        )


def single_env_policy(
    policy_fn: PolicyFn,
) -> Callable[[Any, jax.Array, jax.Array, jax.Array], tuple[jax.Array, Any]]:
    """A batched row-collector policy as the policy of ONE env (a batch of one):
    ``(carry, obs [O], is_first [] bool, key) -> (action [A], carry)``; the carry keeps
    its batch axis of one, extras are dropped (agent_api's optional ``eval_policy``)."""

    def one(carry: Any, obs: jax.Array, is_first: jax.Array, key: jax.Array):
        action, carry, _ = policy_fn(carry, obs[None], jnp.reshape(is_first, (1,)), key)
        return action[0], carry

    return one
