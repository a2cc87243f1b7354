"""Per-task Q ranges of a trained offline multi-task TD-MPC2 run, against its shared
RunningScale (a bisection step of docs/VALIDATION.md §4; issue 11 measured it on the first
validation's pool).

    .venv/bin/python benchmarks/multitask_q_scale.py RUN_DIR [RUN_DIR ...] [--windows 8192]
    .venv/bin/python benchmarks/multitask_q_scale.py RUN_DIR --return-to-go [--tail 200]
    .venv/bin/python benchmarks/multitask_q_scale.py RUN_DIR [RUN_DIR ...] --losses [--step N]

For each run: restore its latest checkpoint (``--step N``: the latest at or before update N,
a point earlier in the run; every form takes it) read only, draw ``--windows`` windows from
its dataset with the trainer's sampler, and compute the quantity the policy loss's
RunningScale tracks (``agents/tdmpc2/update.py`` ``policy_loss``: the 5-95% percentile range
of ``Q(z_0, pi(z_0))``, members averaged, ``z_0`` the encoded first observation), once per
task and once over the whole batch. Seed 0's state; the policy noise is N(0, 1) as in
training. Prints one JSON object per run. The ratio ``pooled / task`` is the factor by
which the shared scale shrinks that task's Q term in the policy loss, against a scale of
its own.

``--return-to-go`` asks instead how far the values have converged (issue 32's diagnosis,
docs/VALIDATION.md §4.1): per task, ``Q(z_t, a_t)`` (members 0 and 1 averaged, no dropout)
on the dataset's own transitions against their discounted return-to-go
``G_t = sum_k gamma^k r_{t+1+k}`` under the task's discount, for the rows with at least
``--tail`` rows after them (so that the return cut at the episode's end is nearly the
infinite one: ``gamma^200 = 0.13`` at 0.99). Prints the means, their ratio, 5/95% points
and the Pearson correlation.

``--losses``: per task, the update's own losses (consistency, reward, value, policy, policy
entropy) on up to 1,024 windows drawn from that task's episodes only, at the latest
checkpoint: does a pooled model fit each task's data as its one-task model does?
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np

from agents.tdmpc2.buffer import gather_windows
from agents.tdmpc2.offline import sample_windows
from agents.tdmpc2.update import draw_update_noise, update
from agents.tdmpc2.world_model import TASK_EMB
from launcher.store.restore import restore_run


def q_ranges(run_dir: str, windows: int, seed: int = 0, at_most: int | None = None) -> dict:
    restored = restore_run(run_dir, purpose="measure", at_most=at_most)
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
    scale = np.asarray(train.q_scale)  # [] or, with q_scale_per_task (T49), one per task
    out["q_scale (state)"] = float(scale) if scale.ndim == 0 else scale.tolist()
    for i, name in enumerate(agent.tasks.names):
        r = spread(q[ids == i])
        r["pooled / task"] = out["pooled"]["range"] / max(r["range"], 1.0)
        out[name] = r
    return out


def return_to_go(reward: np.ndarray, gamma: float) -> np.ndarray:
    """``G [E, L]`` of ``reward [E, L]`` (row t's reward arrives with row t, so
    ``G_t = r_{t+1} + gamma G_{t+1}``, ``G_{L-1} = 0``), in float64."""
    g = np.zeros(reward.shape, np.float64)
    for t in range(reward.shape[1] - 2, -1, -1):
        g[:, t] = reward[:, t + 1] + gamma * g[:, t + 1]
    return g


def q_against_returns(run_dir: str, tail: int = 200, at_most: int | None = None) -> dict:
    """``--return-to-go`` (module docstring) for the latest checkpoint of ``run_dir``."""
    restored = restore_run(run_dir, purpose="measure", at_most=at_most)
    agent = restored.agent
    train = jax.tree.map(lambda x: np.asarray(x)[0], jax.device_get(restored.state.train))
    params, wm = train.params, agent.wm
    data = agent.shared_inputs()
    obs, action, reward, task, length = map(
        np.asarray, (data.obs, data.action, data.reward, data.task, data.length)
    )
    out = {"run": run_dir, "updates": int(restored.meta["timestep"])}
    for i, name in enumerate(agent.tasks.names):
        eps = np.flatnonzero(task == i)
        if not eps.size:
            continue
        ctx1 = agent.tasks.context(jnp.asarray(i, jnp.int32))
        rows = int(length[eps[0]]) + 1 - tail  # every episode of a task has its length
        g = return_to_go(reward[eps], float(ctx1.discount))[:, :rows].reshape(-1)
        o = obs[eps, :rows].reshape(-1, obs.shape[-1])
        a = action[eps, :rows].reshape(-1, action.shape[-1])
        ctx = agent.tasks.context(jnp.full((o.shape[0],), i, jnp.int32))
        z = wm.encode(params, jnp.asarray(o), task=ctx)
        emb = {TASK_EMB: params[TASK_EMB]}
        pair = jnp.asarray([0, 1])
        q = wm.q_value({"qs": params["qs"], **emb}, z, jnp.asarray(a), pair, None, "avg", ctx)
        q = np.asarray(q).reshape(-1)
        out[name] = {
            "discount": float(ctx1.discount),
            "rows": int(g.size),
            "return_to_go_mean": float(g.mean()),
            "q_mean": float(q.mean()),
            "q / return_to_go": float(q.mean() / g.mean()),
            "return_to_go_p5_p95": [float(x) for x in np.percentile(g, [5, 95])],
            "q_p5_p95": [float(x) for x in np.percentile(q, [5, 95])],
            "pearson_r": float(np.corrcoef(g, q)[0, 1]),
        }
    return out


def task_losses(run_dir: str, windows: int, seed: int = 0, at_most: int | None = None) -> dict:
    """``--losses`` (module docstring): per task, the update's losses on ``windows`` windows of
    that task's episodes only (uniform episode, uniform start, as the trainer samples), at
    the latest checkpoint; the new state is discarded."""
    restored = restore_run(run_dir, purpose="measure", at_most=at_most)
    agent = restored.agent
    state = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[0]), restored.state.train)
    wm, data, h = agent.wm, agent.shared_inputs(), agent.cfg.horizon
    step = jax.jit(lambda st, b, n, t: update(wm, wm.cfg, st, b, n, task=t)[1])
    task, length = np.asarray(data.task), np.asarray(data.length)
    out = {"run": run_dir, "updates": int(restored.meta["timestep"]), "windows": windows}
    for i, name in enumerate(agent.tasks.names):
        k_ep, k_start, k_noise = jax.random.split(jax.random.fold_in(jax.random.key(seed), i), 3)
        eps = jnp.asarray(np.flatnonzero(task == i))
        ep = eps[jax.random.randint(k_ep, (windows,), 0, eps.shape[0])]
        start = jax.random.randint(k_start, (windows,), 0, jnp.asarray(length)[ep] - h + 1)
        batch = gather_windows(data, ep, start, h)
        noise = draw_update_noise(k_noise, wm.cfg, agent.tasks.action_max)
        ctx = agent.tasks.context(jnp.full((windows,), i, jnp.int32))
        m = step(state, batch, noise, ctx)
        keys = ("consistency_loss", "reward_loss", "value_loss", "pi_loss", "pi_entropy")
        out[name] = {k: float(m[k]) for k in keys}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--windows", type=int, default=8192)
    p.add_argument("--return-to-go", action="store_true", help="Q against the data's returns")
    p.add_argument("--tail", type=int, default=200, help="rows kept after each measured row")
    p.add_argument("--losses", action="store_true", help="the update's losses, per task")
    p.add_argument("--step", type=int, help="the latest checkpoint at or before this update")
    args = p.parse_args()
    for run_dir in args.run_dirs:
        if args.return_to_go:
            out = q_against_returns(run_dir, args.tail, at_most=args.step)
        elif args.losses:
            out = task_losses(run_dir, min(args.windows, 1024), at_most=args.step)
        else:
            out = q_ranges(run_dir, args.windows, at_most=args.step)
        print(json.dumps(out, indent=1), flush=True)


if __name__ == "__main__":
    main()
