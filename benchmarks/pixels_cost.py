"""Host rendering cost of the Playground DMC image observations (``obs="image"``, E30).

    .venv/bin/python benchmarks/pixels_cost.py [--env cartpole_balance] [--n-envs 1 16]
        [--ticks 50] [--repeats 5]

For each batch size, jitted programs run ``--ticks`` iterations inside one ``lax.scan``:

* ``render``: only the seam, ``vmap(host_pixels(...))`` of stored states (one callback a
  tick: the transfer to the host, ``mj_forward`` and the OpenGL draw of every env);
* ``vector`` / ``image``: ``vmap(env.step)`` at action repeat 2 in each observation mode;
  their difference is what images add to an env step.

Reported: the median over ``--repeats`` timed calls after compiling, in ms per env step, with
``MUJOCO_GL`` (the renderer) and the machine's load average beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("MUJOCO_GL", "osmesa")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import envs  # noqa: E402
from envs.pixels import IMAGE_SIZE, camera_of, host_pixels  # noqa: E402
from envs.playground_backend import PLAYGROUND_ENVS, _keep, load_raw  # noqa: E402


def step_program(env, n: int, ticks: int):
    """Jitted scan of ``ticks`` vmapped steps from a batched reset state."""

    @jax.jit
    def run(key):
        state = jax.vmap(env.reset)(jax.random.split(key, n))

        def body(state, k):
            a = jax.random.uniform(k, (n, env.spec.action_size), minval=-1.0, maxval=1.0)
            state = jax.vmap(env.step)(state, a)
            return state, state.obs.reshape(n, -1)[:, 0].astype(jnp.float32)

        state, obs = jax.lax.scan(body, state, jax.random.split(key, ticks))
        return obs.sum()

    return run


def render_program(env_id: str, states, ticks: int):
    """Jitted scan drawing the same batch of states ``ticks`` times (the seam alone)."""
    pixels = host_pixels(load_raw(PLAYGROUND_ENVS[env_id])[0].mj_model, camera_of(env_id))
    kept = jax.vmap(_keep)(states.inner)

    @jax.jit
    def run(kept):
        def body(c, t):
            # a new state every tick: a loop-invariant callback would be hoisted out of the scan
            moved = {**kept, "qpos": kept["qpos"] + 1e-3 * t}
            return c + jax.vmap(pixels)(moved)[:, 0, 0, 0].sum(dtype=jnp.int32), None

        return jax.lax.scan(body, jnp.zeros((), jnp.int32), jnp.arange(ticks))[0]

    return lambda key: run(kept)


def timed(fn, key, repeats: int) -> float:
    jax.block_until_ready(fn(key))  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(key))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="cartpole_balance")
    p.add_argument("--n-envs", type=int, nargs="+", default=[1, 16])
    p.add_argument("--ticks", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    vector = envs.make(args.env, action_repeat=2)
    image = envs.make(args.env, action_repeat=2, obs="image")
    print(f"{args.env} {IMAGE_SIZE} MUJOCO_GL={os.environ['MUJOCO_GL']} load {os.getloadavg()}")
    key = jax.random.key(0)
    for n in args.n_envs:
        per = args.ticks * n / 1e3  # seconds -> ms per env step
        states = jax.jit(jax.vmap(vector.reset))(jax.random.split(key, n))
        render = timed(render_program(args.env, states, args.ticks), key, args.repeats) / per
        vec = timed(step_program(vector, n, args.ticks), key, args.repeats) / per
        img = timed(step_program(image, n, args.ticks), key, args.repeats) / per
        print(
            f"n_envs {n}: render {render:.3f} ms/env step; env step vector {vec:.3f}, image "
            f"{img:.3f} (+{img - vec:.3f}) ms/env step; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
