"""The sections of ``benchmarks/accelerator_check.py`` (see its docstring): one function per
section, ``(plan, found) -> {..., "timings", "rows"}``, and the chunk timer they share. Split
out of accelerator_check.py (by job, with ``_accelerator_plan.py``).

Import it only after accelerator_check.py has imported dreamerv3_speed / dreamerv3_loop and
restored the caller's ``XLA_FLAGS`` (their one-thread flags are set when they are imported);
then the imports below find them loaded and change nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import math
import time
from typing import Any

import dreamerv3_loop  # benchmarks/ is sys.path[0] when run as a script
import dreamerv3_speed
import jax
import jax.numpy as jnp
import numpy as np
from _accelerator_plan import Plan, dv3_published, row, tdmpc2_published
from _tdmpc2_ours import bench_plan, bench_update, make_cfg
from _tdmpc2_phases import phases_report
from _timing import timed

import envs
from agents.dreamerv3 import train as dv3
from agents.dreamerv3.agent import DreamerV3
from agents.dreamerv3.networks import Networks
from agents.tdmpc2.agent import TDMPC2
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.world_model import WorldModel

OBS, ACT = dreamerv3_speed.OBS, dreamerv3_speed.ACT  # walker dims
TD_PLANNER = {  # _tdmpc2_ours.planner_fields' args name -> TDMPC2Config field
    "batch": "batch_size",
    "horizon": "horizon",
    "samples": "num_samples",
    "pi_trajs": "num_pi_trajs",
    "elites": "num_elites",
    "iterations": "iterations",
}


# ------------------------------------------------------------------------------ helpers
def device_free_bytes() -> tuple[int, str]:
    """Free memory of the default device (``memory_stats``), else the host's MemAvailable."""
    stats = jax.devices()[0].memory_stats() or {}
    if "bytes_limit" in stats:
        return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0)), "device memory_stats"
    return dreamerv3_speed._mem_available(), "host MemAvailable"


def abstract_bytes(tree: Any) -> int:
    """Bytes of a tree of arrays or ``ShapeDtypeStruct`` (a PRNG key as its key data)."""
    total = 0
    for x in jax.tree.leaves(tree):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            total += math.prod(x.shape) * 8  # threefry: two uint32 words
        else:
            total += math.prod(x.shape) * np.dtype(x.dtype).itemsize
    return total


# One program each (eager dispatch compiles every primitive alone: seconds on a CPU).
init_state = jax.jit(dv3.init_train_state, static_argnums=0)
train_noise = jax.jit(dv3.draw_train_noise, static_argnums=(0, 2, 3))
copy_tree = jax.jit(lambda tree: jax.tree.map(jnp.copy, tree))


@jax.jit
def stack_trees(*trees: Any) -> Any:
    """The trees stacked leaf by leaf on a new leading (seed) axis."""
    return jax.tree.map(lambda *a: jnp.stack(a), *trees)


def clean(d: dict) -> dict:
    """``d`` without the compiled executable (``aot``'s result), JSON-ready."""
    return {k: v for k, v in d.items() if k != "compiled"}


# ------------------------------------------------------------------------------ sections
def dv3_train_step(
    cfg: Any, reps: int, image: tuple[int, int, int] | None = None
) -> tuple[Networks, Any, dict, dict]:
    """(nets, a train state, AOT analyses, timings) of DreamerV3's donated, chained
    ``train_step`` at ``cfg`` (dreamerv3_speed's construction); ``image``: on uint8 images
    of that shape instead of walker's vector."""
    nets = Networks(cfg, 0 if image else OBS, ACT, False, image_shape=image)
    B, T = cfg.batch_size, cfg.batch_length
    rng = np.random.default_rng(0)
    state = init_state(nets, jax.random.key(0))
    params = copy_tree(state.params)  # the chained train state gets donated
    data = [
        (
            dreamerv3_speed.make_batch(nets, rng, B, T),
            train_noise(nets, jax.random.key(1 + i), B, T),
        )
        for i in range(2)
    ]
    train = jax.jit(dv3.train_step, static_argnums=0, donate_argnums=1)
    t = dreamerv3_speed.aot(train, nets, state, *data[0])
    train_call = dreamerv3_speed.stepper(t["compiled"], {"state": state}, "state", data)
    tr = timed(train_call, 1, reps)
    print(
        f"  train step ({nets.dtype.name}) {tr['wall_median_s']:.4f} s, "
        f"compile {t['compile_s']:.1f} s",
        flush=True,
    )
    return nets, params, t, tr


def section_dv3_image_step(p: Plan, found: dict) -> dict:
    """DreamerV3 ``train_step`` and ``policy_step`` on ``p.dv3_image`` uint8 images (no
    vector; the CNN encoder and decoder, issue 47) at the config's compute dtype: what the
    image runs' accelerator figure (agents/dreamerv3/cost.py ``accelerator_cost``, a FLOP
    scaling of the vector chunk) is checked against; dot and convolution FLOPs."""
    cfg, image = p.dv3_cfg, p.dv3_image
    B, T, N = cfg.batch_size, cfg.batch_length, cfg.n_envs
    nets, params, t, tr = dv3_train_step(cfg, p.reps, image)
    rng = np.random.default_rng(1)
    carry, first = dv3.init_carry(nets, N), jnp.zeros((N,), bool)
    p_in = [
        (
            dreamerv3_speed.observations(nets, rng, (N,)),
            first,
            dv3.draw_policy_noise(nets, jax.random.key(20 + i), N),
        )
        for i in range(4)
    ]
    pol = jax.jit(dv3.policy_step, static_argnums=0)
    pc = dreamerv3_speed.aot(pol, nets, params, carry, *p_in[0])
    compiled = pc["compiled"]
    pol_call = dreamerv3_speed.stepper(
        lambda cr, *x: compiled(params, cr, *x), {"carry": carry}, "carry", p_in, chain=-1
    )
    po = timed(pol_call, 1, p.reps)
    print(f"  policy step {po['wall_median_s']:.5f} s, compile {pc['compile_s']:.1f} s", flush=True)
    shape, dt = "x".join(map(str, image)), nets.dtype.name
    label = f"{p.dv3_label}, {shape} image, B{B} x T{T + 1}"
    gflops = t["dot_flops"] / tr["wall_median_s"] / 1e9
    rows = [
        row(f"DreamerV3 {label}: train step ({dt})", tr["wall_median_s"], "s"),
        row(f"DreamerV3 {label}: train step FLOP rate ({dt})", gflops, "GFLOP/s"),
        row(f"DreamerV3 {label}: train step compile", t["compile_s"], "s"),
        row(f"DreamerV3 {p.dv3_label}, {shape}: policy step ({N} envs)", po["wall_median_s"], "s"),
        row(f"DreamerV3 {p.dv3_label}, {shape}: policy step compile", pc["compile_s"], "s"),
    ]
    if "dv3_train_wall_s" in found:  # dv3_step's vector step: what the FLOP scaling assumes
        ratio = tr["wall_median_s"] / found["dv3_train_wall_s"]
        rows.append(row(f"DreamerV3 {label}: image / vector train step time", ratio, "ratio"))
    return {
        "config": {"size": p.dv3_label, "image": list(image), "batch": B, "rows": T + 1},
        "train": {**clean(t), **tr},
        "policy": {**clean(pc), **po},
        "timings": {
            "train_step_s": tr["wall_median_s"],
            "train_compile_s": t["compile_s"],
            "policy_step_s": po["wall_median_s"],
            "policy_compile_s": pc["compile_s"],
        },
        "rows": rows,
    }


def section_dv3_step(p: Plan, found: dict) -> dict:
    """DreamerV3 ``train_step`` and ``policy_step`` (dreamerv3_speed's construction), at the
    config's compute dtype (``auto``: bfloat16 on accelerators), then the train step at the
    other one of float32 / bfloat16 (issue 42: the reference computes in bfloat16 there)."""
    cfg = p.dv3_cfg
    B, T, N = cfg.batch_size, cfg.batch_length, cfg.n_envs
    nets, params, t, tr = dv3_train_step(cfg, p.reps)
    other = "float32" if nets.dtype.name == "bfloat16" else "bfloat16"
    _, _, t2, tr2 = dv3_train_step(dataclasses.replace(cfg, compute_dtype=other), p.reps)
    rng = np.random.default_rng(1)

    carry = dv3.init_carry(nets, N)
    obs = jnp.asarray(rng.normal(size=(4, N, OBS)), jnp.float32)
    first = jnp.zeros((N,), bool)
    p_in = [
        (o, first, dv3.draw_policy_noise(nets, jax.random.key(20 + i), N))
        for i, o in enumerate(obs)
    ]
    pol = jax.jit(dv3.policy_step, static_argnums=0)
    pc = dreamerv3_speed.aot(pol, nets, params, carry, *p_in[0])
    compiled = pc["compiled"]
    pol_call = dreamerv3_speed.stepper(
        lambda cr, *x: compiled(params, cr, *x), {"carry": carry}, "carry", p_in, chain=-1
    )
    po = timed(pol_call, 1, p.reps)
    print(f"  policy step {po['wall_median_s']:.5f} s, compile {pc['compile_s']:.1f} s", flush=True)

    found["dv3_train_wall_s"] = tr["wall_median_s"]
    gflops = t["dot_flops"] / tr["wall_median_s"] / 1e9
    label = f"{p.dv3_label}, B{B} x T{T + 1}"
    dt, ratio = nets.dtype.name, tr2["wall_median_s"] / tr["wall_median_s"]
    return {
        "config": {
            "size": p.dv3_label,
            "batch": B,
            "rows": T + 1,
            "policy_envs": N,
            "compute_dtype": dt,
        },
        "train": {**clean(t), **tr},
        f"train_{other}": {**clean(t2), **tr2},
        "policy": {**clean(pc), **po},
        "timings": {
            "train_step_s": tr["wall_median_s"],
            "train_compile_s": t["compile_s"],
            f"train_step_{other}_s": tr2["wall_median_s"],
            "policy_step_s": po["wall_median_s"],
            "policy_compile_s": pc["compile_s"],
        },
        "rows": [
            row(f"DreamerV3 {label}: train step ({dt})", tr["wall_median_s"], "s"),
            row(f"DreamerV3 {label}: train step ({other})", tr2["wall_median_s"], "s"),
            row(f"DreamerV3 {label}: {other} / {dt} train step time", ratio, "ratio"),
            row(f"DreamerV3 {label}: train step dot FLOP rate ({dt})", gflops, "GFLOP/s"),
            row(f"DreamerV3 {label}: train step compile", t["compile_s"], "s"),
            row(f"DreamerV3 {p.dv3_label}: policy step ({N} envs)", po["wall_median_s"], "s"),
            row(f"DreamerV3 {p.dv3_label}: policy step compile", pc["compile_s"], "s"),
        ],
    }


def section_dv3_seeds(p: Plan, found: dict) -> dict:
    """DreamerV3 ``train_step`` vmapped over seeds; skipped where it would not fit."""
    cfg = p.dv3_cfg
    nets = Networks(cfg, OBS, ACT, False)
    B, T = cfg.batch_size, cfg.batch_length
    rng = np.random.default_rng(1)
    init = jax.vmap(lambda k: dv3.init_train_state(nets, k))  # abstract shapes only
    noise = jax.vmap(lambda k: dv3.draw_train_noise(nets, k, B, T))
    vtrain = jax.jit(jax.vmap(functools.partial(dv3.train_step, nets)), donate_argnums=0)
    out: dict = {"config": {"size": p.dv3_label, "batch": B, "rows": T + 1}, "seeds": {}}
    timings, rows, base = {}, [], None
    for S in p.dv3_seeds:
        if time.perf_counter() > found.get("deadline", math.inf):
            reason = "not started: past --budget-s"
            out["seeds"][str(S)] = {"skipped": reason}
            rows.append(row(f"DreamerV3 {p.dv3_label}: {S} seeds vmapped", None, reason))
            continue
        keys = jax.random.split(jax.random.key(100 + S), S)
        batch = dreamerv3_speed.make_batch(nets, rng, B, T)
        shapes = (
            jax.eval_shape(init, keys),
            jax.tree.map(lambda x, S=S: jax.ShapeDtypeStruct((S, *x.shape), x.dtype), batch),
            jax.eval_shape(noise, jax.random.split(keys[0], S)),
        )
        v = dreamerv3_speed.aot(vtrain, *shapes)
        mem = v["compiled"].memory_analysis()
        alias = getattr(mem, "alias_size_in_bytes", 0) or 0
        # the compiled program's footprint, plus the second batch + noise the calls alternate
        need = v["arg_bytes"] + v["out_bytes"] - alias + v["temp_bytes"]
        need += abstract_bytes(shapes[1:])
        free, where = device_free_bytes()
        r = {**clean(v), "need_bytes": need, "free_bytes": free, "free_from": where}
        timings[f"seeds_{S}_compile_s"] = v["compile_s"]
        rows.append(
            row(
                f"DreamerV3 {p.dv3_label}: train step, {S} seeds vmapped, compile",
                v["compile_s"],
                "s",
            )
        )
        if need > 0.9 * free:
            r["skipped"] = (
                f"memory_analysis: needs {need / 2**30:.2f} GiB (args + outputs - aliased + "
                f"temp + a second batch), {free / 2**30:.2f} GiB free ({where})"
            )
            print(f"  {S} seeds: skipped, {r['skipped']}", flush=True)
            rows.append(
                row(f"DreamerV3 {p.dv3_label}: {S} seeds vmapped", None, f"skipped: {r['skipped']}")
            )
            out["seeds"][str(S)] = r
            continue
        states = stack_trees(*[init_state(nets, k) for k in keys])  # = init(keys)
        vdata = [
            (
                stack_trees(*[dreamerv3_speed.make_batch(nets, rng, B, T) for _ in range(S)]),
                stack_trees(*[train_noise(nets, k, B, T) for k in nk]),
            )
            for nk in jax.random.split(jax.random.key(200 + S), (2, S))
        ]
        call = dreamerv3_speed.stepper(v["compiled"], {"state": states}, "state", vdata)
        tm = timed(call, 1, p.reps)
        del states, vdata, call, v
        gc.collect()
        per_seed = tm["wall_median_s"] / S
        base = base or per_seed
        r.update(tm, per_seed_wall_s=per_seed, per_seed_vs_first=per_seed / base)
        timings[f"seeds_{S}_step_s"] = tm["wall_median_s"]
        rows.append(
            row(f"DreamerV3 {p.dv3_label}: train step, {S} seeds vmapped", tm["wall_median_s"], "s")
        )
        rows.append(
            row(
                f"DreamerV3 {p.dv3_label}: {S} seeds vmapped, per seed",
                per_seed,
                f"s ({per_seed / base:.2f}x {p.dv3_seeds[0]} seed)",
            )
        )
        print(
            f"  {S} seeds: {tm['wall_median_s']:.4f} s/step, {per_seed:.4f} s per seed, "
            f"compile {r['compile_s']:.1f} s",
            flush=True,
        )
        out["seeds"][str(S)] = r
    return {**out, "timings": timings, "rows": rows}


def td_args(p: Plan) -> argparse.Namespace:
    """``_tdmpc2_ours``' ``args``: the planner / update sizes of this plan's config."""
    cfg = TDMPC2Config(model_size=p.td_size, **p.td_fields)
    sizes = {a: getattr(cfg, f) for a, f in TD_PLANNER.items()}
    return argparse.Namespace(**sizes, repeats=p.reps, vmap_repeats=p.reps)


def section_tdmpc2_step(p: Plan, found: dict) -> dict:
    """TD-MPC2 ``update`` and ``plan`` (one env; vmapped over envs), _tdmpc2_ours' timers."""
    args = td_args(p)
    arch = {k: v for k, v in p.td_fields.items() if k not in TD_PLANNER.values()}
    wm = WorldModel(make_cfg(p.td_size, args, **arch), OBS, ACT)
    upd, (upd_c, _, holder) = bench_update(wm, args)
    params = copy_tree(holder["state"].params)  # the update keeps donating its state
    del upd_c, holder
    print(f"  update {upd['wall_median_s']:.4f} s, compile {upd['compile_s']:.1f} s", flush=True)
    pl, _ = bench_plan(wm, params, args)
    print(f"  plan {pl['wall_median_s']:.4f} s, compile {pl['compile_s']:.1f} s", flush=True)
    E = p.td_plan_envs
    pv, _ = bench_plan(wm, params, args, n_envs=E)
    print(f"  plan x{E} {pv['wall_median_s']:.4f} s, compile {pv['compile_s']:.1f} s", flush=True)
    cost, text = tdmpc2_published(p.td_size, p.tiny)
    step = upd["wall_median_s"] + pl["wall_median_s"]
    vs = f"; ours / published {step / cost.seconds_per_step:.2f}" if cost else ""
    name = f"TD-MPC2 {p.td_label}"
    return {
        "config": {"size": p.td_size, **vars(args), "plan_envs": E},
        "update": upd,
        "plan": pl,
        "plan_vmap": pv,
        "timings": {
            "update_s": upd["wall_median_s"],
            "update_compile_s": upd["compile_s"],
            "plan_s": pl["wall_median_s"],
            "plan_compile_s": pl["compile_s"],
            "plan_vmap_s": pv["wall_median_s"],
            "plan_vmap_compile_s": pv["compile_s"],
        },
        "rows": [
            row(f"{name}: update (batch {args.batch})", upd["wall_median_s"], "s"),
            row(f"{name}: update compile", upd["compile_s"], "s"),
            row(f"{name}: plan (1 env)", pl["wall_median_s"], "s"),
            row(f"{name}: plan compile", pl["compile_s"], "s"),
            row(f"{name}: plan ({E} envs vmapped)", pv["wall_median_s"], "s"),
            row(f"{name}: plan ({E} envs) compile", pv["compile_s"], "s"),
            row(f"{name}: update + plan (one agent step, 1 env)", step, "s", text + vs),
        ],
    }


def bench_chunk(
    agent: Any, warm_tick: int, ticks: int, reps: int, keep: dict | None = None
) -> dict:
    """dreamerv3_loop's chunk timing for any agent: ``jax.jit(agent.train)`` compiled once
    for ``ticks`` ticks, run on consecutive windows until the next one starts past
    ``warm_tick``, then that window timed ``reps`` times from one state (``train`` is pure);
    env frames and updates per chunk from ``agent.counters``. ``keep`` gets that state and
    window (``state``, ``ticks``) for the phase timers."""
    state = jax.jit(agent.init)(jax.random.key(0))
    dreamerv3_loop.block(state)
    window = jnp.arange(ticks, dtype=jnp.int32)
    t = time.perf_counter()
    chunk_fn = jax.jit(agent.train).trace(state, window).lower().compile()
    compile_s = time.perf_counter() - t
    t, start = time.perf_counter(), 0
    while start <= warm_tick:
        state, _ = chunk_fn(state, window + start)
        start += ticks
    dreamerv3_loop.block(state)
    warm_s = time.perf_counter() - t
    timed_ticks = window + start
    if keep is not None:
        keep.update(state=state, ticks=timed_ticks)
    after, _ = chunk_fn(state, timed_ticks)  # the untimed call; counters of one chunk
    c0, c1 = agent.counters(state), agent.counters(after)
    delta = {k: int(c1[k]) - int(c0[k]) for k in ("timestep", "env_frames", "Train/n_updates")}
    del after
    chunk = timed(lambda: dreamerv3_loop.block(chunk_fn(state, timed_ticks)), 0, reps)
    wall = chunk["wall_median_s"]
    return {
        "ticks": ticks,
        "first_tick": start,
        "warm_ticks": start,
        "agent_steps": delta["timestep"],
        "env_frames": delta["env_frames"],
        "updates": delta["Train/n_updates"],
        "chunk_compile_s": compile_s,
        "warm_wall_s": warm_s,
        "chunk": chunk,
        "env_frames_per_s": delta["env_frames"] / wall,
        "updates_per_s": delta["Train/n_updates"] / wall,
        "s_per_agent_step": wall / max(delta["timestep"], 1),
    }


def chunk_rows(name: str, r: dict, published: str) -> list[dict]:
    return [
        row(
            f"{name}: chunk ({r['ticks']} ticks, {r['env_frames']} env frames, "
            f"{r['updates']} updates)",
            r["chunk"]["wall_median_s"],
            "s",
        ),
        row(f"{name}: env frames per second", r["env_frames_per_s"], "frames/s", published),
        row(f"{name}: updates per second", r["updates_per_s"], "updates/s"),
        row(f"{name}: chunk compile", r["chunk_compile_s"], "s"),
    ]


def section_dv3_chunk(p: Plan, found: dict) -> dict:
    """The whole DreamerV3 chunk (dreamerv3_loop's construction: rows for the warm-up and
    two windows, so the replay ring is this run's size)."""
    env = envs.make(p.env, **p.env_kwargs)
    cfg, ticks = p.dv3_cfg, p.dv3_chunk_ticks
    gate_tick, _ = DreamerV3(cfg, env, 1).schedule.gate
    agent = DreamerV3(cfg, env, total_env_steps=cfg.n_envs * (gate_tick + 1 + 2 * ticks))
    r = bench_chunk(agent, gate_tick, ticks, p.chunk_reps)
    r["env"], r["n_envs"], r["gate_tick"] = p.env, cfg.n_envs, gate_tick
    rows = chunk_rows(
        f"DreamerV3 {p.dv3_label} chunk, {p.env}, {cfg.n_envs} envs",
        r,
        dv3_published(p.dv3_label, p.tiny),
    )
    if "dv3_train_wall_s" in found:  # the share outside the train step, as dreamerv3_loop
        share = 1.0 - r["updates"] * found["dv3_train_wall_s"] / r["chunk"]["wall_median_s"]
        r["outside_share_wall"] = share
        rows.append(row("DreamerV3 chunk: share outside the train step", share, "fraction"))
    print(
        f"  {r['env_frames_per_s']:.1f} frames/s, {r['updates_per_s']:.2f} updates/s, "
        f"compile {r['chunk_compile_s']:.1f} s",
        flush=True,
    )
    timings = {"chunk_s": r["chunk"]["wall_median_s"], "chunk_compile_s": r["chunk_compile_s"]}
    return {**r, "timings": timings, "rows": rows}


def td_chunk_agent(p: Plan) -> tuple[TDMPC2, int]:
    """The chunk sections' TD-MPC2 (seed_steps shortened, the ring sized for the warm-up
    and two windows) and its burst tick."""
    env = envs.make(p.env, **p.env_kwargs)
    cfg = TDMPC2Config(model_size=p.td_size, **{**p.td_fields, "seed_steps": p.td_seed_steps})
    burst = TDMPC2(cfg, env, 1).schedule.burst_tick
    steps = cfg.n_envs * (burst + 1 + 2 * p.td_chunk_ticks)
    return TDMPC2(cfg, env, total_env_steps=steps), burst


def section_tdmpc2_chunk(p: Plan, found: dict) -> dict:
    """The whole TD-MPC2 chunk, one seed, the paper protocol's envs (seed_steps shortened);
    its agent, warm state and window stay in ``found`` for ``tdmpc2_phases``."""
    agent, burst = td_chunk_agent(p)
    env, ticks, keep = agent.env, p.td_chunk_ticks, {"agent": agent}
    r = bench_chunk(agent, burst, ticks, p.chunk_reps, keep)
    found["tdmpc2_chunk"] = {**keep, "chunk": r["chunk"]}
    r.update(env=p.env, n_envs=agent.cfg.n_envs, burst_tick=burst, seed_steps=p.td_seed_steps)
    cost, text = tdmpc2_published(p.td_size, p.tiny)
    frames_text = text
    if cost is not None:
        repeat = env.spec.action_repeat
        frames_text = f"{repeat / cost.seconds_per_step:.0f} frames/s ({text})"
    name = f"TD-MPC2 {p.td_label} chunk, {p.env}, {agent.cfg.n_envs} env"
    rows = chunk_rows(name, r, frames_text)
    vs = f"; ours / published {r['s_per_agent_step'] / cost.seconds_per_step:.2f}" if cost else ""
    rows.append(row(f"{name}: seconds per agent step", r["s_per_agent_step"], "s", text + vs))
    print(
        f"  {r['env_frames_per_s']:.1f} frames/s, {r['s_per_agent_step']:.4f} s per agent "
        f"step, compile {r['chunk_compile_s']:.1f} s",
        flush=True,
    )
    timings = {
        "chunk_s": r["chunk"]["wall_median_s"],
        "chunk_compile_s": r["chunk_compile_s"],
        "s_per_agent_step": r["s_per_agent_step"],
    }
    return {**r, "timings": timings, "rows": rows}


def section_tdmpc2_phases(p: Plan, found: dict) -> dict:
    """TD-MPC2's chunk phase by phase (``_tdmpc2_phases.phases_report``) on ``tdmpc2_chunk``'s
    window and warm state (its own chunk first when that section did not run)."""
    held = found.pop("tdmpc2_chunk", None)
    if held is None:
        agent, burst = td_chunk_agent(p)
        held = {"agent": agent}
        r = bench_chunk(agent, burst, p.td_chunk_ticks, p.chunk_reps, held)
        held["chunk"] = r["chunk"]
    return phases_report(held, f"TD-MPC2 {p.td_label}", p.chunk_reps, row)
