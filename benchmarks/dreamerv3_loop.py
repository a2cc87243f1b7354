"""DreamerV3 whole-loop throughput: rows/s and updates/s of ``DreamerV3.train``, and the share
of a chunk's time spent outside the training step (collector, policy, replay add, batch
sampling, write-back).

    .venv/bin/python benchmarks/dreamerv3_loop.py [--sizes 1m 12m] [--ticks 4] [--reps 3]
        [--env walker_walk] [--core N] [--out loop.json]

The paper protocol's agent (16 envs, train ratio 512: 8 updates per tick after the gate,
batch 16 x 64) on ``--env`` (Playground walker_walk, action repeat 2). The state is first
trained through the gate (one update at tick 64) by the chunk program itself on consecutive
windows of ``--ticks`` ticks, then the next window, wholly past the gate, is timed
``--reps`` times from that same state (``train`` is pure), and so is ``train_step`` alone
on one batch of that replay. Outside share =
``1 - n_updates x step / chunk`` on process CPU time. One thread (``XLA_FLAGS``), pinned to
``--core``. Bytes per seed: replay ring (latents included) and train state, at this run's
size and at the paper protocol's 250K rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from launcher.loop.malloc import reexec_with_fast_malloc  # noqa: E402

reexec_with_fast_malloc()  # as the launcher does (launcher/loop/malloc.py)
XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
os.environ["XLA_FLAGS"] = XLA_FLAGS  # before jax starts its backend

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _machine import pin  # noqa: E402
from _timing import timed  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)

import envs  # noqa: E402
from agents.dreamerv3 import train as dv3  # noqa: E402
from agents.dreamerv3.agent import DreamerV3  # noqa: E402
from agents.dreamerv3.config import DreamerV3Config  # noqa: E402

PAPER_ROWS = 250_000


def block(tree) -> None:
    jax.block_until_ready(jax.tree.leaves(tree))


def bench_size(size: str, args) -> dict:
    env = envs.make(args.env, action_repeat=2)
    cfg = DreamerV3Config(model_size=size)
    gate_tick, _ = DreamerV3(cfg, env, 1).schedule.gate
    rows = cfg.n_envs * (gate_tick + 1 + 2 * args.ticks)
    agent = DreamerV3(cfg, env, total_env_steps=rows)
    paper = DreamerV3(cfg, env, total_env_steps=PAPER_ROWS)
    state = jax.jit(agent.init)(jax.random.key(0))
    # One program for the whole benchmark: the chunk of --ticks ticks, called on
    # consecutive windows until the timed window lies past the gate (a second length
    # would be a second compile of the whole loop, minutes here).
    window = jnp.arange(args.ticks, dtype=jnp.int32)
    t = time.perf_counter()
    chunk_fn = jax.jit(agent.train).lower(state, window).compile()
    compile_s = time.perf_counter() - t
    t, start = time.perf_counter(), 0
    while start <= gate_tick:
        state, _ = chunk_fn(state, window + start)
        start += args.ticks
    block(state)
    warm_s = time.perf_counter() - t
    ticks = window + start
    n_updates = sum(int(agent.schedule.n_updates(i)) for i in ticks)
    chunk = timed(lambda: block(chunk_fn(state, ticks)), warmup=0, repeats=args.reps)

    nets = agent.nets
    _, batch, _ = agent.replay.sample(state.replay, jax.random.key(1), cfg.batch_size)
    noise = dv3.draw_train_noise(nets, jax.random.key(2), cfg.batch_size, cfg.batch_length)
    step_fn = jax.jit(dv3.train_step, static_argnums=0)
    block(step_fn(nets, state.train, batch, noise))
    step = timed(
        lambda: block(step_fn(nets, state.train, batch, noise)), warmup=0, repeats=args.reps
    )
    c_chunk, c_step = chunk["cpu_median_s"], step["cpu_median_s"]
    return {
        "size": size,
        "env": args.env,
        "ticks": args.ticks,
        "rows": cfg.n_envs * args.ticks,
        "updates": n_updates,
        "warm_through_gate_wall_s": warm_s,
        "chunk_compile_wall_s": compile_s,
        "chunk": chunk,
        "train_step": step,
        "rows_per_s_cpu": cfg.n_envs * args.ticks / c_chunk,
        "updates_per_s_cpu": n_updates / c_chunk,
        "outside_share_cpu": 1.0 - n_updates * c_step / c_chunk,
        "bytes_per_seed_this_run": agent.memory_bytes(),
        "bytes_per_seed_paper_protocol": paper.memory_bytes(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", nargs="+", default=["1m", "12m"])
    p.add_argument("--ticks", type=int, default=4)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--env", default="walker_walk")
    p.add_argument("--core", type=int, default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if args.core is not None:
        pin([args.core])
    results = []
    for size in args.sizes:
        r = bench_size(size, args)
        results.append(r)
        print(
            f"{size}: {r['rows']} rows, {r['updates']} updates in "
            f"{r['chunk']['cpu_median_s']:.1f} s CPU (wall {r['chunk']['wall_median_s']:.1f}); "
            f"train step {r['train_step']['cpu_median_s']:.2f} s CPU; "
            f"rows/s {r['rows_per_s_cpu']:.2f}, updates/s {r['updates_per_s_cpu']:.3f}; "
            f"outside the train step {100 * r['outside_share_cpu']:.1f}%; "
            f"bytes/seed paper {r['bytes_per_seed_paper_protocol']}",
            flush=True,
        )
    cpu = statistics.median([r["chunk"]["cpu_median_s"] for r in results])
    print(json.dumps({"median_chunk_cpu_s": cpu}))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"xla_flags": XLA_FLAGS, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
