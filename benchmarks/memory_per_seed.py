"""Bytes per seed at the paper protocols, and how many seeds fit on one accelerator.

    .venv/bin/python benchmarks/memory_per_seed.py [--dv3-sizes 12m 50m 200m]
        [--td-sizes 5 19 48] [--dtypes float32 bfloat16] [--card-gib 80] [--out mem.json]

Per seed: the replay at the paper protocol (DreamerV3 DMC proprio: 250K rows, 16 envs;
TD-MPC2 DMC: 2M agent steps, one env; ``agent.memory_bytes()``), the train state (params,
optimizer, slow critic / target Q, normalisers) and the train step's working set: the
temporary buffers of its compiled program (``memory_analysis().temp_size_in_bytes``; DreamerV3
``train_step`` on B 16 x T 65 rows, TD-MPC2 ``update`` on the reference batch of 256), on this
process's backend. On CPU that is XLA:CPU's buffer assignment, an estimate of a GPU's (the
one H200 run measured the DreamerV3 12m float32 step's at 0.81 GB against 1.26 GiB here,
results/accelerator_gpu_20261204/). Seeds that fit = the card's memory times JAX's default
preallocated fraction (0.75, ``XLA_PYTHON_CLIENT_MEM_FRACTION``) over the per-seed total; the
seed axis shards or vmaps every term, so the total scales with seeds (vmapped, the working set
per seed shrinks slightly: 0.73 GB per seed at 16 seeds on the H200).
DreamerV3 at each ``--dtypes`` (``agent.compute_dtype``); TD-MPC2 is float32 only (its
reference has no bf16).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import envs  # noqa: E402
from agents.dreamerv3 import train as dv3  # noqa: E402
from agents.dreamerv3.agent import DreamerV3  # noqa: E402
from agents.dreamerv3.config import DreamerV3Config  # noqa: E402
from agents.tdmpc2.agent import TDMPC2  # noqa: E402
from agents.tdmpc2.config import TDMPC2Config  # noqa: E402
from agents.tdmpc2.train_state import init_train_state  # noqa: E402
from agents.tdmpc2.update import draw_update_noise, update  # noqa: E402

GIB = 2**30
DV3_ROWS, TD_STEPS, ENV = 250_000, 2_000_000, "walker_walk"
PREALLOCATED = 0.75  # JAX's default XLA_PYTHON_CLIENT_MEM_FRACTION on GPU


def temp_bytes(fn, *args) -> int:
    return int(jax.jit(fn).trace(*args).lower().compile().memory_analysis().temp_size_in_bytes)


def dreamerv3_row(size: str, dtype: str) -> dict:
    from dreamerv3_speed import make_batch  # benchmarks/ (a script's sys.path[0])

    cfg = DreamerV3Config(model_size=size, compute_dtype=dtype)
    agent = DreamerV3(cfg, envs.make(ENV), total_env_steps=DV3_ROWS)
    mem = agent.memory_bytes()
    nets, state = agent.nets, dv3.init_train_state(agent.nets, jax.random.key(0))
    batch = make_batch(nets, np.random.default_rng(0), 16, 64)
    noise = dv3.draw_train_noise(nets, jax.random.key(1), 16, 64)
    work = temp_bytes(functools.partial(dv3.train_step, nets), state, batch, noise)
    return {"agent": "dreamerv3", "size": size, "dtype": dtype, **mem, "working_set": work}


def tdmpc2_row(size: int) -> dict:
    from _tdmpc2_ours import ACT, random_batches  # benchmarks/ (walker dims)

    agent = TDMPC2(TDMPC2Config(model_size=size), envs.make(ENV), total_env_steps=TD_STEPS)
    mem = agent.memory_bytes()
    wm, cfg = agent.wm, agent.cfg
    state = init_train_state(wm, jax.random.key(0))
    batch = random_batches(jax.random.key(1), cfg, 1)[0]
    noise = draw_update_noise(jax.random.key(2), cfg, ACT)
    work = temp_bytes(functools.partial(update, wm, cfg), state, batch, noise)
    return {"agent": "tdmpc2", "size": f"{size}M", "dtype": "float32", **mem, "working_set": work}


def table(rows: list[dict], card_gib: float) -> str:
    out = [
        f"| agent, size, dtype | replay (GiB) | train state (GiB) | train working set (GiB) "
        f"| per seed (GiB) | seeds on a {card_gib:g} GiB card (75% preallocated) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        total = r["replay"] + r["train_state"] + r["working_set"]
        fit = math.floor(card_gib * GIB * PREALLOCATED / total)
        out.append(
            f"| {r['agent']} {r['size']} {r['dtype']} | {r['replay'] / GIB:.2f} "
            f"| {r['train_state'] / GIB:.3f} | {r['working_set'] / GIB:.2f} "
            f"| {total / GIB:.2f} | {fit} |"
        )
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dv3-sizes", nargs="*", default=["12m", "50m", "200m"])
    p.add_argument("--td-sizes", nargs="*", type=int, default=[5, 19, 48])
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    p.add_argument("--card-gib", type=float, default=80.0)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    rows = []
    for size in args.dv3_sizes:
        for dtype in args.dtypes:
            rows.append(dreamerv3_row(size, dtype))
            print(rows[-1], flush=True)
    for size in args.td_sizes:
        rows.append(tdmpc2_row(size))
        print(rows[-1], flush=True)
    print(f"\nbackend {jax.default_backend()}, jax {jax.__version__}\n")
    print(table(rows, args.card_gib))
    if args.out:
        pathlib.Path(args.out).write_text(
            json.dumps({"backend": jax.default_backend(), "rows": rows})
        )


if __name__ == "__main__":
    main()
