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
commands are in docs/PERFORMANCE.md) and is judged from its run dir by
:mod:`analysis.learning_check` (the judge and the table; this script prints them):

    python -m launcher agent=dreamerv3 protocol=learning_check env=cartpole +allow_long_cpu_run=true
    python -m launcher agent=dreamerv3 protocol=learning_check env=pendulum \
        protocol.n_timesteps=20000 +allow_long_cpu_run=true
    .venv/bin/python benchmarks/learning_checks.py --judge cartpole runs/dreamerv3-cartpole-...
    .venv/bin/python benchmarks/learning_checks.py --table runs/dreamerv3-cartpole-...

Issue 46's checks on the games (``breakout_minatar``, ``craftax_classic``: ``protocol=quick``,
their commands and bars in docs/PERFORMANCE.md) are judged the same way.

``--table`` prints the run's per-evaluation rows as a Markdown table (eval and training
returns, the actor's entropy, chunk walls), the form docs/PERFORMANCE.md reports them in;
the checks' bars are in :mod:`analysis.learning_check`.

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
from analysis.learning_check import DREAMERV3_CHECKS, dreamerv3_table, judge_dreamerv3

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
