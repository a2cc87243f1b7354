"""Smoke demo: ``python -m envs.demo`` (``make run`` until the launcher exists).

Builds gymnax ``pendulum`` and Playground ``cartpole_balance``, runs one random-policy
episode of each in one jitted ``lax.scan``, and prints the return, the compile time and
the steps per second of a second (compiled) run. About 1-2 min on a 2-core CPU, most of
it the MJX compile.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("MUJOCO_GL", "disable")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import envs  # noqa: E402


def random_episode_fn(env: envs.Env):
    """key -> (return [], final t [], dones in the episode []): one episode, random actions."""
    spec = env.spec

    def act(key: jax.Array) -> jax.Array:
        if spec.discrete:
            idx = jax.random.randint(key, (), 0, spec.action_size)
            return jax.nn.one_hot(idx, spec.action_size, dtype=jnp.float32)
        return jax.random.uniform(key, (spec.action_size,), minval=-1.0, maxval=1.0)

    def run(key: jax.Array):
        k_reset, k_act = jax.random.split(key)
        state = env.reset(k_reset)

        def body(state, k):
            state = env.step(state, act(k))
            return state, state.reward

        state, rewards = jax.lax.scan(body, state, jax.random.split(k_act, spec.episode_length))
        return rewards.sum(), state.t, state.done

    return run


def demo(env_id: str, action_repeat: int = 1, seed: int = 0) -> dict:
    """Run one random episode of ``env_id``; returns the numbers it prints."""
    t0 = time.perf_counter()
    env = envs.make(env_id, action_repeat=action_repeat)
    build_s = time.perf_counter() - t0
    fn = jax.jit(random_episode_fn(env))
    t0 = time.perf_counter()
    ret, t, done = jax.block_until_ready(fn(jax.random.PRNGKey(seed)))
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ret2, _, _ = jax.block_until_ready(fn(jax.random.PRNGKey(seed + 1)))
    run_s = time.perf_counter() - t0
    spec = env.spec
    steps = spec.episode_length
    out = {
        "env_id": env_id,
        "backend": spec.backend,
        "obs_size": spec.obs_size,
        "action_size": spec.action_size,
        "T": steps,
        "return": float(ret),
        "return_2": float(ret2),
        "done_at_T": bool(done) and int(t) == steps,
        "build_s": build_s,
        "compile_s": compile_s,
        "steps_per_s": steps * spec.action_repeat / run_s,
    }
    print(
        f"{env_id:>18s} [{spec.backend}] obs {spec.obs_size} act {spec.action_size} "
        f"T={steps}: return {out['return']:9.2f} (2nd episode {out['return_2']:9.2f}), "
        f"build {build_s:5.1f} s, compile+run {compile_s:5.1f} s, "
        f"{out['steps_per_s']:9.0f} env steps/s"
    )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env_ids", nargs="*", default=["pendulum", "cartpole_balance"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; {len(envs.list_envs())} envs")
    for env_id in args.env_ids:
        demo(env_id, seed=args.seed)


if __name__ == "__main__":
    main()
