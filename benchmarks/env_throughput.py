"""Env steps/s of the row collector against raw vmapped ``env.step``.

    .venv/bin/python benchmarks/env_throughput.py [--envs walker_walk pendulum] [--games]
        [--n-envs 1 16 64] [--ticks 1000] [--repeats 5] [--json out.json]

``--games`` adds issue 46's game envs (:data:`GAMES`: the four MinAtar games, Craftax-Classic
and Craftax, symbolic).

For each env and batch size, two jitted programs run ``--ticks`` iterations inside one
``lax.scan``:

* raw: draw uniform actions, ``vmap(env.step)`` (no resets, no rows);
* collector: ``RowCollector.tick`` with random actions (rows emitted as scan outputs), in
  static mode (the hold tick's reset every T + 1 ticks), or in dynamic mode (DreamerV3's:
  auto-reset at each env's own episode end) for envs that can terminate; env steps counted
  by the collector (held ticks do not step).

Reported: compile time (first call), the median over ``--repeats`` timed calls, env
steps/s of each, and the collector's overhead per env step. Noisy shared machines vary
2-4x between runs: compare the ratio, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp

import envs
from envs.row_collector import RowCollector


def raw_program(env, n: int, ticks: int):
    """Jitted scan of ``ticks`` vmapped steps from a batched reset state."""
    A = env.spec.action_size

    @jax.jit
    def run(key):
        state = jax.vmap(env.reset)(jax.random.split(key, n))

        def body(state, k):
            a = jax.random.uniform(k, (n, A), minval=-1.0, maxval=1.0)
            state = jax.vmap(env.step)(state, a)
            return state, state.obs

        state, obs = jax.lax.scan(body, state, jax.random.split(key, ticks))
        return obs.sum(), jnp.asarray(ticks * n, jnp.int32)

    return run


# issue 46's game envs (``--games``)
GAMES = (
    "breakout_minatar",
    "asterix_minatar",
    "freeway_minatar",
    "space_invaders_minatar",
    "craftax_classic",
    "craftax",
)


def collector_program(env, n: int, ticks: int):
    """Jitted scan of ``ticks`` collector ticks (random actions): static mode, or dynamic
    mode on an env that can terminate. Returns (checksum, env steps taken)."""
    mode = "dynamic" if env.spec.can_terminate else "static"
    col = RowCollector(env, n, mode)

    @jax.jit
    def run(key):
        state = col.init(key)

        def body(state, x):
            i, k = x
            state, row, _ = col.tick(state, i, k, None, True)
            return state, row.obs

        xs = (jnp.arange(ticks), jax.random.split(key, ticks))
        state, obs = jax.lax.scan(body, state, xs)
        return obs.sum(), state.env_steps

    return run  # env_steps: hold ticks do not step


def measure(run, repeats: int) -> dict:
    """``run(key) -> (checksum, env steps)``: compile time, then the median over ``repeats``
    calls of the time and of the env steps per second (steps vary per key in dynamic mode)."""
    t0 = time.perf_counter()
    jax.block_until_ready(run(jax.random.key(0)))
    compile_s = time.perf_counter() - t0
    times, rates = [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        _, steps = jax.block_until_ready(run(jax.random.key(r + 1)))
        times.append(time.perf_counter() - t0)
        rates.append(int(steps) / times[-1])
    return {
        "compile_s": compile_s,
        "median_s": statistics.median(times),
        "steps": int(steps),
        "steps_per_s": statistics.median(rates),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", nargs="+", default=["pendulum", "walker_walk"])
    p.add_argument("--games", action="store_true", help="add the game envs (GAMES)")
    p.add_argument("--n-envs", nargs="+", type=int, default=[1, 16, 64])
    p.add_argument("--ticks", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; ticks={args.ticks}")
    header = "| env | n_envs | raw steps/s | collector steps/s | overhead | compile raw / col (s) |"
    print(header + "\n|---|---|---|---|---|---|")
    results = []
    for env_id in args.envs + [g for g in GAMES if args.games and g not in args.envs]:
        env = envs.make(env_id)
        for n in args.n_envs:
            raw = measure(raw_program(env, n, args.ticks), args.repeats)
            col = measure(collector_program(env, n, args.ticks), args.repeats)
            overhead = raw["steps_per_s"] / col["steps_per_s"] - 1.0
            results.append({"env": env_id, "n_envs": n, "raw": raw, "collector": col})
            print(
                f"| {env_id} | {n} | {raw['steps_per_s']:,.0f} | {col['steps_per_s']:,.0f} | "
                f"{overhead:+.1%} | {raw['compile_s']:.1f} / {col['compile_s']:.1f} |",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
