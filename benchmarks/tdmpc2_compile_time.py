"""Trace + lower and compile time of the whole TD-MPC2 ``train`` step (issue 3 goal: < 30 s).

    JAX_COMPILATION_CACHE_DIR= .venv/bin/python benchmarks/tdmpc2_compile_time.py
    JAX_COMPILATION_CACHE_DIR= taskset -c 0 .venv/bin/python benchmarks/tdmpc2_compile_time.py

The program is the seed-scaling one of ``tdmpc2_speed.py`` (size 1, pendulum with T = 4),
vmapped over 2 seeds and unbatched. Run it with the persistent cache off: a cache hit is
not a compile. XLA:CPU compiles on several threads, so pinning to one core changes it.
"""

import time

import jax
import jax.numpy as jnp

import envs
from agents.tdmpc2.agent import TDMPC2
from agents.tdmpc2.config import TDMPC2Config


def main() -> None:
    env = envs.make("pendulum", episode_length=4)
    agent = TDMPC2(TDMPC2Config(model_size=1, seed_steps=4), env, total_env_steps=10_000)
    state = jax.vmap(agent.init)(jax.random.split(jax.random.key(1), 2))
    for name, fn, args in [
        (
            "train(vmap 2 seeds)",
            jax.jit(jax.vmap(agent.train, in_axes=(0, None))),
            (state, jnp.arange(5)),
        ),
        (
            "train(unbatched)",
            jax.jit(agent.train),
            (jax.tree.map(lambda x: x[0], state), jnp.arange(5)),
        ),
    ]:
        t = time.perf_counter()
        low = fn.lower(*args)
        t1 = time.perf_counter()
        low.compile()
        t2 = time.perf_counter()
        print(name, f"trace+lower {t1 - t:.1f} s, compile {t2 - t1:.1f} s", flush=True)


if __name__ == "__main__":
    main()
