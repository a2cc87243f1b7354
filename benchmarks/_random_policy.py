"""The uniform-random policy's episode returns on an env: the launcher's random policy (the
row collector's seed phase: continuous actions uniform in [-1, 1] in agent units, discrete
ones a uniform index as a one-hot), ``episodes`` episodes vmapped in one ``lax.scan`` at the
env's time limit; rewards after an episode's first ``done`` are not counted.

Used for the random-policy levels of ``envs/returns.py`` (``benchmarks/random_returns.py``)
and the multi-task validation's random scores (``benchmarks/multitask_validation.py``): a
study's helper, kept out of the ``envs`` package, which holds only what runs use. Imported
as ``_random_policy`` (benchmarks/ is ``sys.path[0]`` when a benchmark runs as a script).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def random_returns(env: Any, episodes: int, key: jax.Array) -> jax.Array:
    """``[episodes]`` returns of the uniform-random policy on a built ``env``."""
    spec = env.spec

    def act(k: jax.Array) -> jax.Array:
        if spec.discrete:
            idx = jax.random.randint(k, (), 0, spec.action_size)
            return jax.nn.one_hot(idx, spec.action_size, dtype=jnp.float32)
        return jax.random.uniform(k, (spec.action_size,), minval=-1.0, maxval=1.0)

    def episode(k: jax.Array) -> jax.Array:
        k_reset, k_act = jax.random.split(k)

        def body(carry, k_step):
            state, total, alive = carry
            state = env.step(state, act(k_step))
            total = total + jnp.where(alive, state.reward, 0.0)
            return (state, total, alive & ~state.done), None

        init = (env.reset(k_reset), jnp.zeros(()), jnp.ones((), bool))
        steps = jax.random.split(k_act, spec.episode_length)
        (_, total, _), _ = jax.lax.scan(body, init, steps)
        return total

    return jax.jit(jax.vmap(episode))(jax.random.split(key, episodes))


def random_episodes(env: Any, episodes: int, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``([episodes] returns, [episodes, K] bool achievement sets)`` of the uniform-random
    policy on a built ``env`` with achievements (``spec.achievements``, K of them): each
    episode's ``EnvState.unlocked`` OR-ed over its steps up to the one that ends it, the
    per-episode sets the Crafter score pools. The same policy as :func:`random_returns`,
    stepped as one batch in a ``lax.while_loop`` that stops once every episode has ended
    (or at the time limit): Craftax's limit is 10,000 steps, a random episode a few hundred."""
    spec = env.spec
    k_reset, k_act = jax.random.split(key)

    def act(k: jax.Array) -> jax.Array:
        return jax.nn.one_hot(jax.random.randint(k, (), 0, spec.action_size), spec.action_size)

    step = jax.vmap(lambda s, k: env.step(s, act(k)))

    def cond(carry):
        t, _, _, alive, _ = carry
        return (t < spec.episode_length) & jnp.any(alive)

    def body(carry):
        t, state, total, alive, sets = carry
        state = step(state, jax.random.split(jax.random.fold_in(k_act, t), episodes))
        total = total + jnp.where(alive, state.reward, 0.0)
        sets = sets | (state.unlocked & alive[:, None])  # the ending step counts
        return t + 1, state, total, alive & ~state.done, sets

    init = (
        jnp.zeros((), jnp.int32),
        jax.vmap(env.reset)(jax.random.split(k_reset, episodes)),
        jnp.zeros((episodes,)),
        jnp.ones((episodes,), bool),
        jnp.zeros((episodes, len(spec.achievements)), bool),
    )
    _, _, total, _, sets = jax.jit(lambda c: jax.lax.while_loop(cond, body, c))(init)
    return total, sets
