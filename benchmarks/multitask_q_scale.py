"""Per-task Q ranges of a trained offline multi-task TD-MPC2 run, against its shared
RunningScale (issue 11's diagnosis, docs/VALIDATION.md §4.1).

    .venv/bin/python benchmarks/multitask_q_scale.py RUN_DIR [RUN_DIR ...] [--windows 8192]

For each run: restore its latest checkpoint (read only), draw ``--windows`` windows from
its dataset with the trainer's sampler, and compute the quantity the policy loss's
RunningScale tracks (``agents/tdmpc2/update.py`` ``policy_loss``: the 5-95% percentile range
of ``Q(z_0, pi(z_0))``, members averaged, ``z_0`` the encoded first observation), once per
task and once over the whole batch. Seed 0's state; the policy noise is N(0, 1) as in
training. Prints one JSON object per run. The ratio ``pooled / task`` is the factor by
which the shared scale shrinks that task's Q term in the policy loss, against a scale of
its own.
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np

from agents.tdmpc2.offline import sample_windows
from agents.tdmpc2.world_model import TASK_EMB
from launcher.restore import restore_run


def q_ranges(run_dir: str, windows: int, seed: int = 0) -> dict:
    restored = restore_run(run_dir, purpose="measure")
    agent = restored.agent
    train = jax.tree.map(lambda x: np.asarray(x)[0], jax.device_get(restored.state.train))
    params, wm = train.params, agent.wm
    k_batch, k_eps = jax.random.split(jax.random.key(seed))
    batch, ids = sample_windows(agent.shared_inputs(), k_batch, windows, agent.cfg.horizon)
    task = agent.tasks.context(ids)
    emb = {TASK_EMB: params[TASK_EMB]}
    z = wm.encode(params, batch.obs[0], task=task)
    eps = jax.random.normal(k_eps, (windows, agent.tasks.action_max), jnp.float32)
    _, a, _, _ = wm.pi({"pi": params["pi"], **emb}, z, eps, task=task)
    q = wm.q_value({"qs": params["qs"], **emb}, z, a, jnp.asarray([0, 1]), reduce="avg", task=task)
    q, ids = np.asarray(q)[:, 0], np.asarray(ids)

    def spread(x: np.ndarray) -> dict:
        p5, p95 = np.percentile(x, [5, 95])
        return {"n": int(x.size), "p5": float(p5), "p95": float(p95), "range": float(p95 - p5)}

    out = {"run": run_dir, "updates": int(restored.meta["timestep"])}
    out["pooled"] = spread(q)
    out["q_scale (state)"] = float(train.q_scale)
    for i, name in enumerate(agent.tasks.names):
        r = spread(q[ids == i])
        r["pooled / task"] = out["pooled"]["range"] / max(r["range"], 1.0)
        out[name] = r
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--windows", type=int, default=8192)
    args = p.parse_args()
    for run_dir in args.run_dirs:
        print(json.dumps(q_ranges(run_dir, args.windows), indent=1), flush=True)


if __name__ == "__main__":
    main()
