"""CPU learning checks for TD-MPC2 (issue 3) and DreamerV3 (issue 10); not run by CI.

    .venv/bin/python benchmarks/learning_checks.py --check pendulum --seeds 0 1
    .venv/bin/python benchmarks/learning_checks.py --check cartpole_balance --seeds 0 1

On a CPU, one process per seed pinned to its own core is as fast as vmapping the seeds and
lets the checks share cores (``taskset -c 0 ... --seeds 0 --json pend0.json``).

* ``pendulum``: gymnax Pendulum-v1 (bounds [-2, 2] mapped), model size 1, 6,000 agent
  steps; pass = final eval return > -400 for every seed.
* ``cartpole_balance``: Playground CartpoleBalance, action repeat 2 (T = 500), model
  size 1, 10,000 agent steps; pass = final eval return > 800 for every seed.

DreamerV3 (issue 10) runs through the launcher (chunked, checkpointed, resumable: at the
reference's train ratio each check takes about 3 h of a 2-core machine with the two seeds
sharded over its cores, ``XLA_FLAGS=--xla_force_host_platform_device_count=2``; the full
commands are in docs/PERFORMANCE.md) and is judged from its run dir:

    python -m launcher agent=dreamerv3 protocol=learning_check env=cartpole +allow_long_cpu_run=true
    python -m launcher agent=dreamerv3 protocol=learning_check env=pendulum \
        protocol.n_timesteps=20000 +allow_long_cpu_run=true
    .venv/bin/python benchmarks/learning_checks.py --judge cartpole runs/dreamerv3-cartpole-...
    .venv/bin/python benchmarks/learning_checks.py --table runs/dreamerv3-cartpole-...

``--table`` prints the run's per-evaluation rows as a Markdown table (eval and training
returns, the actor's entropy, chunk walls), the form docs/PERFORMANCE.md reports them in.

* ``cartpole`` (CartPole-v1): the mean eval return over [12k, 24k] rows, averaged over the
  seeds, >= 250 (the real reference: 312.7, its 5 seeds in [270, 347]; random: about 22).
* ``pendulum`` (Pendulum-v1): the last eval return at or before 20,000 rows > -400 for
  every seed.

Seed ``s`` starts from ``jax.random.key(s)``; the listed seeds are vmapped. Training runs
in chunks of whole episodes (``--chunk`` agent steps), printing the train return after
each; an evaluation (``eval_episodes`` = 10 eval-mode episodes per seed) follows every
``--eval-every`` agent steps (0: only at the end) and always the last chunk. A final JSON
summary is printed (``--json`` writes it to a file).
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

import envs
from agents.tdmpc2.agent import TDMPC2
from agents.tdmpc2.config import TDMPC2Config

CHECKS = {
    "pendulum": dict(env_id="pendulum", action_repeat=1, steps=6_000, threshold=-400.0),
    "cartpole_balance": dict(
        env_id="cartpole_balance", action_repeat=2, steps=10_000, threshold=800.0
    ),
}


def run_check(name: str, seeds: list[int], chunk_steps: int, eval_every: int) -> dict:
    spec = CHECKS[name]
    env = envs.make(spec["env_id"], action_repeat=spec["action_repeat"])
    agent = TDMPC2(TDMPC2Config(model_size=1), env, total_env_steps=spec["steps"])
    T = env.spec.episode_length
    keys = jnp.stack([jax.random.key(s) for s in seeds])
    state = jax.jit(jax.vmap(agent.init))(keys)
    train = jax.jit(jax.vmap(agent.train, in_axes=(0, None)))
    evaluate = jax.jit(jax.vmap(agent.evaluate, in_axes=(0, None)))
    chunk = agent.ticks_for(max(T, chunk_steps // T * T))  # whole episodes per chunk
    total = agent.ticks_for(spec["steps"])
    history, t0, tick, last_eval = [], time.perf_counter(), 0, 0
    print(
        f"{name}: T={T} gamma={agent.cfg.gamma:.3f} seed_steps={agent.cfg.seed_steps} "
        f"ticks={total} chunk={chunk} seeds={seeds}",
        flush=True,
    )
    while tick < total:
        n = min(chunk, total - tick)
        # a shorter last chunk is a new shape: jit retraces it once
        state, metrics = train(state, jnp.arange(tick, tick + n))
        tick += n
        agent.check(metrics)
        steps = int(np.asarray(metrics["timestep"])[0])
        row = {
            "agent_steps": steps,
            "env_frames": int(np.asarray(metrics["env_frames"])[0]),
            "updates": int(np.asarray(metrics["Train/n_updates"])[0]),
            "train_return": np.asarray(metrics["Train/episodic mean reward"]).tolist(),
        }
        if tick >= total or (eval_every > 0 and steps - last_eval >= eval_every):
            state, ev = evaluate(state, jax.random.key(123))
            row["eval_return"] = np.asarray(ev["Eval/episodic mean reward"]).tolist()
            last_eval = steps
        row["wall_s"] = round(time.perf_counter() - t0, 1)
        history.append(row)
        print(json.dumps(row), flush=True)
    final = history[-1]["eval_return"]
    return {
        "check": name,
        "seeds": seeds,
        "threshold": spec["threshold"],
        "final_eval_return": final,
        "passed": all(r > spec["threshold"] for r in final),
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time(),
        "history": history,
    }


DREAMERV3_CHECKS = {
    "cartpole": dict(window=(12_000, 24_000), threshold=250.0, every_seed=False),
    "pendulum": dict(window=(20_000, 20_000), threshold=-400.0, every_seed=True),
}


def _seed_rows(run_dir: str) -> dict[int, tuple[dict[int, dict], dict[int, dict]]]:
    """``{seed: (train rows by chunk, eval rows by chunk)}`` from ``metrics/seed_<s>.jsonl``
    (the launcher's reader: a cut last line is skipped)."""
    import pathlib

    from launcher.rundir import read_metrics

    out = {}
    for path in pathlib.Path(run_dir, "metrics").glob("seed_*.jsonl"):
        train, evals = {}, {}
        for row in read_metrics(path):
            {"train": train, "eval": evals}.get(row["kind"], {})[row["chunk"]] = row
        out[int(path.stem.split("_")[1])] = (train, evals)
    return dict(sorted(out.items()))


def judge_dreamerv3(name: str, run_dir: str) -> dict:
    """A DreamerV3 check's statistic from a launcher run dir's per-seed eval rows:
    ``cartpole`` the window mean averaged over seeds, ``pendulum`` every seed's last eval
    at or before the window's end."""
    spec = DREAMERV3_CHECKS[name]
    lo, hi = spec["window"]
    per_seed = {}
    for seed, (_, eval_rows) in _seed_rows(run_dir).items():
        evals = [
            (r["timestep"], r["Eval/episodic mean reward"]) for _, r in sorted(eval_rows.items())
        ]
        if spec["every_seed"]:
            kept = [v for t, v in evals if t <= hi]
            per_seed[f"seed_{seed}"] = kept[-1] if kept else float("nan")
        else:
            kept = [v for t, v in evals if lo <= t <= hi]
            per_seed[f"seed_{seed}"] = float(np.mean(kept)) if kept else float("nan")
        per_seed[f"seed_{seed}_curve"] = evals
    stats = [v for k, v in per_seed.items() if not k.endswith("_curve")]
    reached = [
        max((t for t, _ in c), default=0) for k, c in per_seed.items() if k.endswith("_curve")
    ]
    complete = bool(reached) and min(reached) >= hi
    if not complete:  # the window is not evaluated yet: no verdict (resume the run)
        passed = None
    elif spec["every_seed"]:
        passed = all(v > spec["threshold"] for v in stats)
    else:
        passed = bool(np.mean(stats) >= spec["threshold"])
    return {
        "check": name,
        "per_seed": per_seed,
        "threshold": spec["threshold"],
        "evaluated_up_to": min(reached, default=0),
        "complete": complete,
        "passed": passed,
    }


def dreamerv3_table(run_dir: str) -> str:
    """A Markdown table of a DreamerV3 launcher run, one column per evaluation: rows, updates
    per seed, each seed's eval return, training-episode return (blank where no training
    episode ended in the chunk) and actor entropy, and the chunk's wall time (seed 0's row:
    the seeds share one chunk)."""
    seeds = _seed_rows(run_dir)
    if not seeds:
        raise SystemExit(f"no metrics/seed_*.jsonl under {run_dir}: pass a launcher run dir")
    first_train, first_evals = next(iter(seeds.values()))
    chunks = sorted(first_evals)

    def line(label: str, cells: list[str]) -> str:
        return f"| {label} | " + " | ".join(cells) + " |"

    def num(value: float | None, fmt: str) -> str:
        return "" if value is None or value != value else format(value, fmt)

    lines = [
        line("rows", [f"{first_evals[c]['timestep']:,}" for c in chunks]),
        "|---" * (len(chunks) + 1) + "|",
        line("updates per seed", [f"{first_train[c]['Train/n_updates']:,}" for c in chunks]),
    ]
    for key, label, fmt in (
        ("Eval/episodic mean reward", "eval", ".1f"),
        ("Train/episodic mean reward", "training episodes", ".1f"),
        ("Train/ent/action/mean", "actor entropy", ".3f"),
    ):
        for seed, (train, evals) in seeds.items():
            rows = evals if key.startswith("Eval/") else train
            cells = [num(rows.get(c, {}).get(key), fmt) for c in chunks]
            lines.append(line(f"seed {seed}: {label}", cells))
    walls = [num(first_train.get(c, {}).get("time/chunk_seconds"), ",.0f") for c in chunks]
    lines.append(line("chunk wall (s)", walls))
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", choices=[*CHECKS, "all"], default="all")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--chunk", type=int, default=1_000, help="agent steps per train call")
    p.add_argument("--eval-every", type=int, default=0, help="agent steps; 0: at the end")
    p.add_argument("--json", default=None)
    p.add_argument(
        "--judge",
        nargs=2,
        metavar=("CHECK", "RUN_DIR"),
        default=None,
        help=f"judge a DreamerV3 launcher run: CHECK in {list(DREAMERV3_CHECKS)}",
    )
    p.add_argument("--table", metavar="RUN_DIR", default=None, help="a DreamerV3 run's table")
    args = p.parse_args()
    if args.table:
        print(dreamerv3_table(args.table))
        return
    if args.judge:
        print(json.dumps(judge_dreamerv3(*args.judge), indent=1))
        return
    names = list(CHECKS) if args.check == "all" else [args.check]
    results = [run_check(n, args.seeds, args.chunk, args.eval_every) for n in names]
    for r in results:
        print(
            f"{r['check']} seeds {r['seeds']}: final eval {r['final_eval_return']} "
            f"(> {r['threshold']}: {'PASS' if r['passed'] else 'FAIL'}) in {r['wall_s']:.0f} s"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
