"""The uniform-random policy's episode return per env: the ``random`` levels of
``envs/returns.py`` (the learning-curve report draws them).

    .venv/bin/python benchmarks/random_returns.py [--envs pendulum acrobot] [--episodes 100]

The policy is the launcher's random one (the row collector's seed phase): continuous
actions uniform in [-1, 1] in agent units, discrete ones a uniform index as a one-hot.
Each env runs ``--episodes`` episodes vmapped in one jitted ``lax.scan`` at its default
time limit; rewards after an episode's first ``done`` are not counted. Prints one line
per env: the mean return, its standard error and the min..max. DMC tasks take their
papers' action repeat (2); the others 1.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MUJOCO_GL", "disable")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import envs  # noqa: E402

GYMNAX = ["pendulum", "cartpole", "acrobot", "mountain_car", "mountain_car_continuous"]


def random_returns(env_id: str, episodes: int, seed: int = 0) -> np.ndarray:
    """[episodes] returns of the random policy on ``env_id`` (default time limit)."""
    repeat = 2 if envs.backend_of(env_id) == "playground" else 1
    env = envs.make(env_id, action_repeat=repeat)
    spec = env.spec

    def act(key: jax.Array) -> jax.Array:
        if spec.discrete:
            idx = jax.random.randint(key, (), 0, spec.action_size)
            return jax.nn.one_hot(idx, spec.action_size, dtype=jnp.float32)
        return jax.random.uniform(key, (spec.action_size,), minval=-1.0, maxval=1.0)

    def episode(key: jax.Array) -> jax.Array:
        k_reset, k_act = jax.random.split(key)

        def body(carry, k):
            state, total, alive = carry
            state = env.step(state, act(k))
            total = total + jnp.where(alive, state.reward, 0.0)
            return (state, total, alive & ~state.done), None

        init = (env.reset(k_reset), jnp.zeros(()), jnp.ones((), bool))
        (_, total, _), _ = jax.lax.scan(body, init, jax.random.split(k_act, spec.episode_length))
        return total

    keys = jax.random.split(jax.random.key(seed), episodes)
    return np.asarray(jax.jit(jax.vmap(episode))(keys))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=GYMNAX)
    parser.add_argument("--episodes", type=int, default=100)
    args = parser.parse_args()
    for env_id in args.envs:
        r = random_returns(env_id, args.episodes)
        sem = r.std(ddof=1) / np.sqrt(len(r)) if len(r) > 1 else float("nan")
        print(
            f"{env_id}: random {r.mean():.1f} +- {sem:.1f} "
            f"(min {r.min():.1f}, max {r.max():.1f}; {len(r)} episodes)"
        )


if __name__ == "__main__":
    main()
