"""Offline multi-task TD-MPC2: CPU seconds per update (``agents/tdmpc2/offline.py``); not CI.

    .venv/bin/python benchmarks/tdmpc2_offline_speed.py --size 1 --batch 1024 --ticks 20

One seed through the launcher's seed program (the dataset as the shared argument) on a
synthetic dataset with the ``mt3_cpu`` task set's dims (60 episodes per task), chunks of
``--ticks`` updates; prints wall / CPU medians per update and the bytes (dataset, train
state per seed). The numbers back ``cpu_seconds_per_step`` of the multi-task entry.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from _timing import timed  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=60)
    args = parser.parse_args(argv)

    import jax
    import jax.numpy as jnp

    import envs
    from agents.tdmpc2.dataset import TaskInfo
    from agents.tdmpc2.multitask_config import MultiTaskConfig
    from agents.tdmpc2.offline import TDMPC2MultiTask, synthetic_dataset
    from launcher.program import SeedProgram, seed_keys

    ts = envs.make("mt3_cpu")
    infos = [TaskInfo.from_spec(ts.member_env(i).spec) for i in range(len(ts.names))]
    data = synthetic_dataset(infos, args.episodes)
    cfg = MultiTaskConfig(model_size=args.size, batch_size=args.batch)
    agent = TDMPC2MultiTask(cfg, ts, 10**6, data=data)
    prog = SeedProgram(agent, 1)
    init_keys, _ = seed_keys([0])
    holder = {"state": prog.init(prog.place(init_keys)), "t": 0}

    def chunk():
        t = holder["t"]
        ticks = jnp.arange(t, t + args.ticks, dtype=jnp.int32)
        holder["state"], m = prog.train(holder["state"], ticks)
        jax.block_until_ready(m)
        holder["t"] = t + args.ticks

    res = timed(chunk, warmup=1, repeats=args.repeats)
    out = {
        "size": args.size,
        "batch": args.batch,
        "ticks_per_chunk": args.ticks,
        "cpu_s_per_update": res["cpu_median_s"] / args.ticks,
        "wall_s_per_update": res["wall_median_s"] / args.ticks,
        "memory_bytes": agent.memory_bytes(),
        "backend": jax.default_backend(),
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
