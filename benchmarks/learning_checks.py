"""CPU learning checks for TD-MPC2 (issue 3; not run by CI).

    .venv/bin/python benchmarks/learning_checks.py --check pendulum --seeds 2
    .venv/bin/python benchmarks/learning_checks.py --check cartpole_balance --seeds 2

* ``pendulum``: gymnax Pendulum-v1 (bounds [-2, 2] mapped), model size 1, 6,000 agent
  steps; pass = final eval return > -400 for every seed.
* ``cartpole_balance``: Playground CartpoleBalance, action repeat 2 (T = 500), model
  size 1, 10,000 agent steps; pass = final eval return > 800 for every seed.

Seeds are vmapped; training runs in chunks of whole episodes with an evaluation
(10 eval-mode episodes) after every ``--eval-every`` agent steps and at the end. Prints
one line per evaluation and a final JSON summary (``--json`` writes it to a file).
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

import envs
from agents.tdmpc2.agent import TDMPC2, check_no_terminations
from agents.tdmpc2.config import TDMPC2Config

CHECKS = {
    "pendulum": dict(env_id="pendulum", action_repeat=1, steps=6_000, threshold=-400.0),
    "cartpole_balance": dict(
        env_id="cartpole_balance", action_repeat=2, steps=10_000, threshold=800.0
    ),
}


def run_check(name: str, seeds: int, eval_every: int) -> dict:
    spec = CHECKS[name]
    env = envs.make(spec["env_id"], action_repeat=spec["action_repeat"])
    agent = TDMPC2(TDMPC2Config(model_size=1), env, total_env_steps=spec["steps"])
    T = env.spec.episode_length
    keys = jax.random.split(jax.random.key(0), seeds)
    state = jax.jit(jax.vmap(agent.init))(keys)
    train = jax.jit(jax.vmap(agent.train, in_axes=(0, None)))
    evaluate = jax.jit(jax.vmap(agent.evaluate, in_axes=(0, None)))
    eval_every = max(T, eval_every // T * T)  # whole episodes per chunk
    chunk = agent.ticks_for(eval_every)
    total = agent.ticks_for(spec["steps"])
    history, t0, tick = [], time.perf_counter(), 0
    print(
        f"{name}: T={T} gamma={agent.cfg.gamma:.3f} seed_steps={agent.cfg.seed_steps} "
        f"ticks={total} chunk={chunk} seeds={seeds}",
        flush=True,
    )
    while tick < total:
        n = min(chunk, total - tick)
        if n != chunk:  # a shorter last chunk compiles once more; keep it exact
            train_last = jax.jit(jax.vmap(agent.train, in_axes=(0, None)))
            state, metrics = train_last(state, jnp.arange(tick, tick + n))
        else:
            state, metrics = train(state, jnp.arange(tick, tick + n))
        tick += n
        check_no_terminations(metrics)
        state, ev = evaluate(state, jax.random.key(123))
        returns = np.asarray(ev["Eval/episodic mean reward"]).tolist()
        row = {
            "agent_steps": int(np.asarray(metrics["timestep"])[0]),
            "env_frames": int(np.asarray(metrics["env_frames"])[0]),
            "updates": int(np.asarray(metrics["Train/n_updates"])[0]),
            "train_return": np.asarray(metrics["Train/episodic mean reward"]).tolist(),
            "eval_return": returns,
            "wall_s": time.perf_counter() - t0,
        }
        history.append(row)
        print(json.dumps(row), flush=True)
    final = history[-1]["eval_return"]
    return {
        "check": name,
        "threshold": spec["threshold"],
        "final_eval_return": final,
        "passed": all(r > spec["threshold"] for r in final),
        "wall_s": time.perf_counter() - t0,
        "history": history,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", choices=[*CHECKS, "all"], default="all")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--eval-every", type=int, default=2_000)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    names = list(CHECKS) if args.check == "all" else [args.check]
    results = [run_check(n, args.seeds, args.eval_every) for n in names]
    for r in results:
        print(
            f"{r['check']}: final eval {r['final_eval_return']} "
            f"(> {r['threshold']}: {'PASS' if r['passed'] else 'FAIL'}) in {r['wall_s']:.0f} s"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
