"""The CPU multi-task validation (issue 11; docs/VALIDATION.md): sources -> export -> pool
-> offline TD-MPC2 -> per-task evaluation against the sources.

Stages (run dirs under ``--root``, default ``runs/mt_val``; the exported datasets and the
random returns under ``--data``, default ``benchmarks/data/mt3_cpu``, committed so that a
later session trains offline without rerunning the sources)::

    python benchmarks/multitask_validation.py sources --task pendulum     # one source run
    python benchmarks/multitask_validation.py export                      # --data/<task>
    python benchmarks/multitask_validation.py random                # --data/random_returns.json
    python benchmarks/multitask_validation.py offline                     # pool + offline run
    python benchmarks/multitask_validation.py report                      # the verdict
    python benchmarks/multitask_validation.py baseline --task cartpole_balance  # diagnosis

Sources: single-task TD-MPC2 at size 1 (the learning-check preset: the reference's
planner, batch 256), one seed each, through the launcher, with buffer_size >= the run so
the export is the full history (every episode from step 0). Tasks of different dims:
gymnax pendulum (obs 3, act 1, T 200), playground cartpole_balance (obs 5, act 1, T 500 at
repeat 2) and playground reacher_easy (obs 6, act 2, T 500 at repeat 2).

Acceptance, fixed before the run (ACCEPTANCE below): on at least 2 of the 3 tasks the
offline model's eval return (10 eval-mode episodes) reaches half of its source's final
eval return, both measured above a uniform-random policy's return on that task:
``(R_offline - R_random) / (R_source - R_random) >= 0.5``. (The issue states ">= 0.5x the
source's return"; pendulum's returns are negative, so the ratio is taken above the random
policy, which for the DMC tasks, where random scores near 0, is the issue's ratio.)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SOURCES = {
    # name: (env, agent steps, eval every)
    "pendulum": ("pendulum", 6_000, 3_000),
    "cartpole_balance": ("cartpole_balance", 5_000, 5_000),
    "reacher_easy": ("reacher_easy", 6_000, 3_000),
}
ACCEPTANCE = {"fraction": 0.5, "tasks_needed": 2, "eval_episodes": 10}
TASK_SET = "mt3_cpu"  # envs.task_sets: the three sources in task-id order
# One evaluation (10 episodes of each task: 1,200 ticks of 10 planner decisions) is
# estimated at ~36 min on the 2-core box (a source's 10 episodes of 500 ticks took ~15 min),
# the cost of ~4,000 updates: only the final one is run (the acceptance reads the last
# evaluation). Checkpoints every 1,000 updates: a run cut short resumes with the same command.
OFFLINE = {
    "updates": 6_000,
    "eval_every": 6_000,
    "checkpoint_every": 1_000,
    "model_size": "tdmpc2_1",
    "seed": 0,
}


def offline_command(root: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "launcher",
        "agent=tdmpc2_multitask",
        f"env={TASK_SET}",
        "protocol=offline",
        f"model_size={OFFLINE['model_size']}",
        f"protocol.seeds=[{OFFLINE['seed']}]",
        f"protocol.n_timesteps={OFFLINE['updates']}",
        "protocol.log_frequency=500",
        f"protocol.eval_frequency={OFFLINE['eval_every']}",
        f"protocol.checkpoint_frequency={OFFLINE['checkpoint_every']}",
        f"protocol.eval_episodes={ACCEPTANCE['eval_episodes']}",
        "protocol.eval_at_start=false",
        f"agent.dataset={(root / 'pool').resolve()}",
        f"hydra.run.dir={root / 'offline'}",
    ]


# The diagnosis of a task the pool missed (run after the acceptance, never changing it): the
# same offline trainer on that task's data alone (agent.tasks=[task]: a one-task model). The
# evaluation at 1,000 updates sees about the pooled run's share of that task's windows
# (cartpole_balance: 10 of 52 episodes x 6,000 updates ~ 1,150); 3,000 sees ~2.6x more.
BASELINE = {"updates": 3_000, "eval_every": 1_000, "checkpoint_every": 1_000}


def baseline_command(root: Path, task: str) -> list[str]:
    cmd = offline_command(root)
    plan = {
        "protocol.n_timesteps": BASELINE["updates"],
        "protocol.eval_frequency": BASELINE["eval_every"],
        "protocol.checkpoint_frequency": BASELINE["checkpoint_every"],
        "hydra.run.dir": root / f"baseline_{task}",
    }
    cmd = [a for a in cmd if a.split("=", 1)[0] not in plan]
    return [*cmd, *(f"{k}={v}" for k, v in plan.items()), f"agent.tasks=[{task}]"]


def random_returns(episodes: int, seed: int = 0) -> dict[str, float]:
    """Each task's mean return under uniform random actions (``episodes`` fresh episodes)."""
    import jax
    import numpy as np

    import envs
    from envs.row_collector import RowCollector

    out = {}
    task_set = envs.make(TASK_SET)
    for i, name in enumerate(task_set.names):
        env = task_set.member_env(i)
        col = RowCollector(env, episodes, "static")

        @jax.jit
        def episode_returns(key, col=col, T=env.spec.episode_length):
            state = col.init(key)

            def tick(s, t):
                s, _, stats = col.tick(s, t, jax.random.fold_in(key, t), None, True)
                return s, stats.returns

            return jax.lax.scan(tick, state, jax.numpy.arange(T + 1))[1].sum(0)

        out[name] = float(np.mean(episode_returns(jax.random.PRNGKey(seed))))
    return out


def verdict(root: Path, data: Path) -> dict:
    """The acceptance of ACCEPTANCE on the runs under ``root`` (module docstring)."""
    from agents.tdmpc2.dataset import MultiTaskDataset
    from launcher.rundir import read_metrics

    rows = read_metrics(root / "offline" / "metrics" / f"seed_{OFFLINE['seed']}.jsonl")
    last = [r for r in rows if r.get("kind") == "eval"][-1]
    rand = json.loads((data / "random_returns.json").read_text())
    tasks = {}
    for name in rand:
        src = MultiTaskDataset.load(data / name, verify=False).source
        source = float(src["final_eval_return"]["0"])
        offline = float(last[f"Eval/{name}/episodic mean reward"])
        frac = (offline - rand[name]) / (source - rand[name])
        tasks[name] = {
            "source": source,
            "random": rand[name],
            "offline": offline,
            "fraction_above_random": frac,
            "held": frac >= ACCEPTANCE["fraction"],
        }
    held = sum(t["held"] for t in tasks.values())
    return {
        "acceptance": ACCEPTANCE,
        "offline": OFFLINE,
        "updates": last["timestep"],
        "tasks": tasks,
        "tasks_held": held,
        "passed": held >= ACCEPTANCE["tasks_needed"],
    }


def source_command(name: str, root: Path) -> list[str]:
    env, steps, every = SOURCES[name]
    return [
        sys.executable,
        "-m",
        "launcher",
        "agent=tdmpc2",
        f"env={env}",
        "protocol=learning_check",
        "protocol.seeds=[0]",
        f"protocol.n_timesteps={steps}",
        f"protocol.eval_frequency={every}",
        f"protocol.checkpoint_frequency={every}",
        f"agent.buffer_size={steps}",
        f"hydra.run.dir={root / 'sources' / name}",
    ]


def ensure_pool(root: Path, data: Path) -> None:
    """``root/pool``: the committed exports pooled in task-set order (written once)."""
    from agents.tdmpc2.dataset import MultiTaskDataset, pool_tasks

    if not (root / "pool").exists():
        pool = pool_tasks([MultiTaskDataset.load(data / n) for n in SOURCES])
        digest = pool.save(root / "pool")
        print(f"pool: {pool.num_episodes} episodes {pool.episodes_per_task()} sha256 {digest}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "stage", choices=["sources", "export", "random", "offline", "baseline", "report"]
    )
    parser.add_argument("--task", choices=sorted(SOURCES), action="append")
    parser.add_argument("--root", type=Path, default=Path("runs/mt_val"))
    parser.add_argument("--data", type=Path, default=Path("benchmarks/data/mt3_cpu"))
    args = parser.parse_args(argv)
    root, data = args.root, args.data
    tasks = args.task or list(SOURCES)
    if args.stage == "sources":
        for name in tasks:
            cmd = source_command(name, root)
            print(" ".join(cmd), flush=True)
            rc = subprocess.call(cmd)
            if rc:
                return rc
        return 0
    if args.stage == "export":
        from launcher.export import export_run

        for name in tasks:
            out = data / name
            if not out.exists():
                print(json.dumps(export_run(root / "sources" / name, out)))
        return 0
    if args.stage == "random":
        out = random_returns(ACCEPTANCE["eval_episodes"])
        (data / "random_returns.json").write_text(json.dumps(out, indent=1) + "\n")
        print(out)
        return 0
    if args.stage == "offline":
        ensure_pool(root, data)
        cmd = offline_command(root)
        print(" ".join(cmd), flush=True)
        return subprocess.call(cmd)
    if args.stage == "baseline":
        ensure_pool(root, data)
        for name in args.task or ["cartpole_balance", "reacher_easy"]:
            cmd = baseline_command(root, name)
            print(" ".join(cmd), flush=True)
            if rc := subprocess.call(cmd):
                return rc
        return 0
    result = verdict(root, data)
    (root / "verdict.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
