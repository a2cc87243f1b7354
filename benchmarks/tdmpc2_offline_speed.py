"""Offline multi-task TD-MPC2: CPU seconds per update (``agents/tdmpc2/offline.py``); not CI.

    .venv/bin/python benchmarks/tdmpc2_offline_speed.py --size 1 --batch 1024 --ticks 20 \
        [--ref REF_CHECKOUT --ref-python REF_VENV_PYTHON]

One seed through the launcher's seed program (the dataset as the shared argument) on a
synthetic dataset with the ``mt3_cpu`` task set's dims (60 episodes per task), chunks of
``--ticks`` updates; prints wall / CPU medians per update and the bytes (dataset, train
state per seed). The numbers back ``cpu_seconds_per_step`` of the multi-task entry.

``--ref`` / ``--ref-python`` (a nicklashansen/tdmpc2 extract at 5f6fade and a torch venv,
docs/PERFORMANCE.md "Reference checkouts"): also the reference's multi-task ``update()`` at
the same task dims, size, batch and task_dim, one thread, in a subprocess
(``_tdmpc2_ref_timer.py --multitask``), after ours. Ours is through the seed program (dataset
sampling included); the reference's buffer hands over fresh random tensors, so its figure has
no sampling in it. Run under ``taskset -c 0``: the subprocess inherits the pinning.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import _refs  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)
from _timing import timed  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--ref", default="", help="reference checkout (5f6fade); '' = ours only")
    parser.add_argument("--ref-python", default="", help="the reference venv's python")
    args = parser.parse_args(argv)
    if args.ref or args.ref_python:
        _refs.require(_refs.TDMPC2, args.ref, args.ref_python, "leaving out --ref")

    import jax
    import jax.numpy as jnp

    import envs
    from agents.tdmpc2.dataset import TaskInfo
    from agents.tdmpc2.multitask_config import MultiTaskConfig
    from agents.tdmpc2.offline import TDMPC2MultiTask, synthetic_dataset
    from launcher.loop.program import SeedProgram, seed_keys

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
    if args.ref:
        tasks = [[i.name, i.obs_dim, i.action_dim, i.episode_length] for i in infos]
        out["reference"] = reference_update(args, tasks, cfg.task_dim)
        sec = out["reference"]["update"]["cpu_median_s"]
        out["ratio_ref_over_ours_cpu"] = sec / out["cpu_s_per_update"]
    print(json.dumps(out, indent=1))
    return 0


def reference_update(args, tasks: list, task_dim: int) -> dict:
    """The reference's multi-task ``update()`` timed in its venv (one JSON line back)."""
    from launcher.loop.malloc import glibc_env

    root = pathlib.Path(__file__).resolve().parent.parent
    spec = json.dumps({"tasks": tasks, "task_dim": task_dim})
    cmd = [args.ref_python, str(root / "benchmarks" / "_tdmpc2_ref_timer.py"), "--ref", args.ref]
    cmd += ["--size", str(args.size), "--batch", str(args.batch), "--threads", "1"]
    cmd += ["--repeats", str(args.repeats), "--multitask", spec]
    # the reference as its own scripts run it: glibc's malloc (launcher/loop/malloc.py undone)
    env = {**glibc_env(os.environ), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env, check=False)
    if p.returncode:
        raise SystemExit(f"reference timer exited {p.returncode}:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    from launcher.loop.malloc import reexec_with_fast_malloc

    reexec_with_fast_malloc()  # as the launcher runs ours (launcher/loop/malloc.py)
    sys.exit(main())
