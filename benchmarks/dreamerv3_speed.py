"""DreamerV3 speed: our jitted ``train_step`` / ``policy_step`` against the reference (29eb964).

    .venv/bin/python benchmarks/dreamerv3_speed.py [--sizes 1m 12m] [--reps 3] [--k 2]
        [--policy-k 10] [--seeds 4] [--core N] [--skip-reference] [--profile] [--out r.json]
        [--compute-dtype float32|bfloat16|auto] [--image 64 64 3]

Walker dims (obs 24, 6 continuous actions): one train step on B 16 x T 65 rows (64 trained + 1
replay context; the reference's ``batch_length: 65``) and one policy step for 16 envs, at the
"1m" and "12m" presets (the reference: ``configs['size12m']``; "1m" = deter 512, hidden 64,
classes 4, units 64). ``--image H W C``: the observation is a uint8 image instead (no vector:
the reference's ``dmc_vision`` ``enc/dec.spaces: 'image'``), the CNN encoder and decoder at
the preset's depth (12m 16; 1m 4 on both sides, D42). Both sides on one thread
(``XLA_FLAGS``, below) and one core: this process pins itself with ``sched_setaffinity``
(= ``taskset -c``) before XLA starts; the reference worker (``_dreamerv3_ref_worker.py``,
reference venv) runs under ``taskset -c``.

Ours: ``jax.jit(train_step, static_argnums=0, donate_argnums=1)`` (state chained), ``jax.jit(
policy_step, static_argnums=0)`` (carry chained) and ``jax.vmap`` of ``train_step`` over
``--seeds`` stacked states / batches / noises; compile = ``.trace().lower().compile()``, timed,
persistent cache off; ``--compute-dtype`` (default float32, the reference worker's dtype)
sets our ``agent.compute_dtype``. Reference: its constructor (compiles train and report) is
timed, then ``agent.train`` / ``agent.policy`` on request (``--ref`` / ``--ref-python``, or
``$WMRL_DREAMERV3_REF`` / ``$WMRL_DREAMERV3_REF_PYTHON``: the recipe is docs/PERFORMANCE.md,
"Reference checkouts"; ``--skip-reference`` times ours alone). ``--reps`` interleaved
rounds of [ours train k, ref train k, ours vmapped k, ours policy k', ref policy k'] after one
untimed call each; medians over all rounds of wall and process CPU time per call.

FLOPs: XLA's ``cost_analysis()`` counts a ``while`` (scan) body once, so the 64-step posterior
and 15-step imagination scans are under-counted; the table uses the dot (and convolution)
FLOPs of the jaxpr with each scan body times its length (forward + backward, no elementwise
work). % of peak = FLOPs /
median CPU time / one-thread ``jnp.dot`` 2048^2 f32 rate, for both sides (same model). Memory
per seed: params + optimizer state + slow critic bytes; working set = ``memory_analysis()``
temp bytes. ``--profile``: per-HLO-op time of our train step (``_hlo_profile.py``, as tdmpc2_speed).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import pathlib
import statistics
import sys
import tempfile
import time

import _refs  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)

from launcher.loop.malloc import reexec_with_fast_malloc  # noqa: E402

reexec_with_fast_malloc()  # as the launcher does (launcher/loop/malloc.py)
XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
os.environ["XLA_FLAGS"] = XLA_FLAGS  # before jax starts its backend

import flax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _dreamerv3_ref_worker import RefWorker  # noqa: E402
from _hlo_profile import profile_breakdown  # noqa: E402
from _machine import machine_info, matmul_peak, pin, uptime  # noqa: E402
from _timing import timed  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)
from jax._src.interpreters import partial_eval as pe  # noqa: E402

from agents.dreamerv3 import train as dv3  # noqa: E402
from agents.dreamerv3.config import DreamerV3Config  # noqa: E402
from agents.dreamerv3.networks import Networks, count_params  # noqa: E402
from agents.dreamerv3.world_model import Batch  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
OBS, ACT = 24, 6  # walker


def dot_flops(jaxpr) -> tuple[float, int]:
    """(dot and convolution FLOPs of a jaxpr, scan bodies times their length, cond = its
    largest branch; number of ``while`` loops, each counted once). A convolution: 2 x output
    elements x kernel window x input channels (per group)."""
    total, whiles = 0.0, 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dot_general":
            (lc, _), _ = eqn.params["dimension_numbers"]
            shape = eqn.invars[0].aval.shape
            out = math.prod(eqn.outvars[0].aval.shape)
            total += 2.0 * out * math.prod(shape[i] for i in lc)
            continue
        if name == "conv_general_dilated":  # kernel HWIO: window x Cin/groups x Cout
            out = math.prod(eqn.outvars[0].aval.shape)
            total += 2.0 * out * math.prod(eqn.invars[1].aval.shape[:-1])
            continue
        subs = []
        for v in eqn.params.values():
            for s in v if isinstance(v, tuple | list) else (v,):
                j = getattr(s, "jaxpr", s)
                if hasattr(j, "eqns"):
                    subs.append(dot_flops(j))
        if not subs:
            continue
        whiles += (name == "while") + sum(w for _, w in subs)
        if name == "cond":
            total += max(f for f, _ in subs)
        else:
            total += eqn.params.get("length", 1) * sum(f for f, _ in subs)
    return total, whiles


def aot(fn, *args) -> dict:
    """Trace + lower and compile ``fn`` (timed); the compiled call and its analyses."""
    w, c = time.perf_counter(), time.process_time()
    traced = fn.trace(*args)
    lowered = traced.lower()
    lower_s = time.perf_counter() - w
    compiled = lowered.compile()
    ca = compiled.cost_analysis()
    ca = (ca[0] if ca else {}) if isinstance(ca, list | tuple) else (ca or {})
    mem = compiled.memory_analysis()
    # Dead code out first (XLA drops it too): a custom VJP's unused input cotangent
    # (agents/common/blocks.py dense_matmul) is in the jaxpr but never runs. jax has no
    # public DCE; partial_eval.dce_jaxpr recurses into scan / while / pjit bodies.
    jaxpr = traced.jaxpr.jaxpr
    live, _ = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))
    flops, whiles = dot_flops(live)
    r = dict(compiled=compiled, lower_s=lower_s, compile_s=time.perf_counter() - w)
    r.update(compile_cpu_s=time.process_time() - c, dot_flops=flops, while_loops=whiles)
    r.update(xla_flops=float(ca.get("flops", "nan")), temp_bytes=mem.temp_size_in_bytes)
    return {**r, "arg_bytes": mem.argument_size_in_bytes, "out_bytes": mem.output_size_in_bytes}


def nbytes(tree) -> int:
    return int(sum(x.nbytes for x in jax.tree_util.tree_leaves(tree)))


def make_batch(nets: Networks, rng, B: int, T: int) -> Batch:
    """Random ``B x (T + 1)`` rows; row 0 starts each window (the context)."""
    c, rows = nets.cfg, T + 1
    is_first = np.zeros((B, rows), bool)
    is_first[:, 0] = True
    f32 = functools.partial(jnp.asarray, dtype=jnp.float32)
    return Batch(
        obs=observations(nets, rng, (B, rows)),
        action=f32(rng.uniform(-1, 1, (B, rows, ACT))),
        reward=f32(rng.normal(size=(B, rows))),
        is_first=jnp.asarray(is_first),
        is_last=jnp.zeros((B, rows), bool),
        is_terminal=jnp.zeros((B, rows), bool),
        deter=f32(rng.uniform(-1, 1, (B, rows, c.deter_size))),
        stoch=jnp.asarray(rng.integers(0, c.classes_size, (B, rows, c.stoch)), jnp.int32),
    )


def observations(nets: Networks, rng, lead: tuple[int, ...]):
    """Random observations ``[*lead, OBS]`` float32, or ``{"image": [*lead, H, W, C]}`` uint8
    for an image model."""
    if nets.image_shape is None:
        return jnp.asarray(rng.normal(size=(*lead, OBS)), jnp.float32)
    return {"image": jnp.asarray(rng.integers(0, 256, (*lead, *nets.image_shape)), jnp.uint8)}


def stepper(compiled, holder: dict, key: str, inputs: list, chain: int = 0):
    """A blocking call ``compiled(holder[key], *inputs[i])`` cycling through ``inputs``, with
    ``holder[key]`` chained from output ``chain`` (the train state; the policy's carry)."""

    def call():
        i = holder["i"] = holder.get("i", -1) + 1
        out = compiled(holder[key], *inputs[i % len(inputs)])
        holder[key] = out[chain]
        jax.block_until_ready(out)

    return call


def build_ours(size: str, args) -> dict:
    cfg = DreamerV3Config(model_size=size, compute_dtype=args.compute_dtype)
    image = tuple(args.image) if args.image else None
    nets = Networks(cfg, 0 if image else OBS, ACT, False, image_shape=image)
    B, T, S, N = args.batch, args.length - 1, args.seeds, args.envs
    rng = np.random.default_rng(0)
    state = dv3.init_train_state(nets, jax.random.key(0))
    params = jax.tree.map(jnp.copy, state.params)  # the chained train state gets donated
    parts = {"params": state.params, "opt_state": state.opt_state, "slow": state.slow_critic}
    r: dict = {"params": count_params(state.params)}
    r["bytes"] = {k: nbytes(v) for k, v in parts.items()}
    data = [
        (make_batch(nets, rng, B, T), dv3.draw_train_noise(nets, jax.random.key(1 + i), B, T))
        for i in range(2)
    ]
    train = jax.jit(dv3.train_step, static_argnums=0, donate_argnums=1)
    t = aot(train, nets, state, *data[0])
    one = {"state": state}
    r["train"] = {k: v for k, v in t.items() if k != "compiled"}
    calls = {"train": stepper(t["compiled"], one, "state", data)}
    print(f"[{size}] ours train compile {t['compile_s']:.1f} s", flush=True)

    carry, first = dv3.init_carry(nets, N), jnp.zeros((N,), bool)
    pol = jax.jit(dv3.policy_step, static_argnums=0)
    p_in = [
        (
            observations(nets, rng, (N,)),
            first,
            dv3.draw_policy_noise(nets, jax.random.key(20 + i), N),
        )
        for i in range(4)
    ]
    pc = aot(pol, nets, params, carry, *p_in[0])
    pol_call = pc["compiled"]
    p_holder = {"carry": carry}
    calls["policy"] = stepper(
        lambda cr, *x: pol_call(params, cr, *x), p_holder, "carry", p_in, chain=-1
    )
    r["policy"] = {k: v for k, v in pc.items() if k != "compiled"}
    print(f"[{size}] ours policy compile {pc['compile_s']:.1f} s", flush=True)

    if S > 1:
        est = S * (t["temp_bytes"] + t["arg_bytes"] + t["out_bytes"])
        avail = _mem_available()
        if est > 0.5 * avail:  # the reference worker still has to fit
            r["vmap"] = {"skipped": f"needs ~{est / 2**30:.1f} GiB, {avail / 2**30:.1f} free"}
        else:
            keys = jax.random.split(jax.random.key(100), S)
            states = jax.vmap(lambda k: dv3.init_train_state(nets, k))(keys)
            stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)  # noqa: E731
            noise = jax.vmap(lambda k: dv3.draw_train_noise(nets, k, B, T))
            vdata = [
                (stack([make_batch(nets, rng, B, T) for _ in range(S)]), noise(nk))
                for nk in jax.random.split(jax.random.key(200), (2, S))
            ]
            vtrain = jax.jit(jax.vmap(functools.partial(dv3.train_step, nets)), donate_argnums=0)
            v = aot(vtrain, states, *vdata[0])
            r["vmap"] = {k: x for k, x in v.items() if k != "compiled"}
            calls["vmap"] = stepper(v["compiled"], {"state": states}, "state", vdata)
            print(f"[{size}] ours {S}-seed vmap compile {v['compile_s']:.1f} s", flush=True)
    for name, call in calls.items():
        r.setdefault(name, {})["first_call_s"] = timed(call, 0, 1)["wall_s"][0]
    return {"r": r, "calls": calls, "train_compiled": t["compiled"]}


def _mem_available() -> int:
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 1 << 40


def bench_size(size: str, args) -> dict:
    ours = build_ours(size, args)
    r, calls = ours["r"], ours["calls"]
    ref = None
    if not args.skip_reference:
        t = time.perf_counter()
        ref = RefWorker(size, args, XLA_FLAGS, OBS, ACT, image=args.image)
        r["ref"] = {**ref.ready, "startup_s": time.perf_counter() - t}
        print(f"[{size}] reference constructor {ref.ready['constructor_s']:.1f} s", flush=True)
    plan = [
        ("train", "ours", args.k),
        ("train", "ref", args.k),
        ("vmap", "ours", args.vmap_k or args.k),
    ]
    plan += [("policy", "ours", args.policy_k), ("policy", "ref", args.policy_k)]
    samples: dict = {}
    for rep in range(args.reps):
        for op, side, k in plan:
            if side == "ours" and op not in calls or side == "ref" and ref is None:
                continue
            res = timed(calls[op], 0, k) if side == "ours" else ref.run(op, k)
            s = samples.setdefault(f"{side}_{op}", {"wall_s": [], "cpu_s": []})
            s["wall_s"] += res["wall_s"]
            s["cpu_s"] += res["cpu_s"]
        print(f"[{size}] round {rep + 1}/{args.reps} done; {uptime()}", flush=True)
    if ref is not None:
        ref.close()
    for s in samples.values():
        s["wall_median_s"] = statistics.median(s["wall_s"])
        s["cpu_median_s"] = statistics.median(s["cpu_s"])
    r["samples"] = samples
    if args.profile:
        prof = profile_breakdown(ours["train_compiled"], calls["train"], n=1)
        r["profile"] = prof
        tot = prof["total_op_s"]
        print(f"[{size}] profile, {tot:.2f} s of ops:", flush=True)
        for name, s in list(prof["by_category"].items()) + list(prof["top_ops"].items()):
            print(f"    {100 * s / tot:5.1f}%  {s:.3f} s  {name}")
    return r


def fmt(x, nd=3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def report_tables(
    results: dict, peak: dict, seeds: int, image: list[int] | None = None
) -> tuple[str, dict]:
    """The markdown tables (speed; memory) and the goals: name -> (ratios..., met)."""
    rows = [
        "| size | op | ours wall (s) | ref wall (s) | ratio ref/ours wall | ours CPU (s) "
        "| ref CPU (s) | ratio ref/ours CPU | compile ours / ref (s) | GFLOP "
        "| % of peak ours / ref (CPU) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    goals: dict = {}
    labels = {"train": "train step (B16 x T65)", "policy": "policy step (16 envs)"}
    labels["vmap"] = f"train step, {seeds} seeds vmapped"
    if image:
        labels = {k: f"{v}, {'x'.join(map(str, image))} image" for k, v in labels.items()}
    for size, r in results.items():
        s, ref = r["samples"], r.get("ref") or {}
        comp_ref = {"train": ref.get("compile_train_s"), "policy": ref.get("first_policy_s")}
        for op, label in labels.items():
            o, x = s.get(f"ours_{op}"), s.get(f"ref_{op}") or {}
            if o is None:
                continue
            ow, oc = o["wall_median_s"], o["cpu_median_s"]
            rw, rc = x.get("wall_median_s"), x.get("cpu_median_s")
            gf = r[op]["dot_flops"] / 1e9
            po, pr = (100 * gf / t / peak["gflops_cpu"] if t else None for t in (oc, rc))
            gfs = f"{gf:.1f}" if gf >= 1 else f"{gf:.3f}"
            rows.append(
                f"| {size} | {label} | {fmt(ow)} | {fmt(rw)} | {fmt(rw and rw / ow, 2)} "
                f"| {fmt(oc)} | {fmt(rc)} | {fmt(rc and rc / oc, 2)} "
                f"| {fmt(r[op]['compile_s'], 1)} / {fmt(comp_ref.get(op), 1)} | {gfs} "
                f"| {fmt(po, 0)} / {fmt(pr, 0)} |"
            )
            if op == "train" and rw:
                ok = rw / ow >= 1.5 and rc / oc >= 1.5
                goals[f"{size} train >= 1.5x the reference (wall; CPU)"] = (rw / ow, rc / oc, ok)
            if op == "vmap":
                wr, cr = ow / s["ours_train"]["wall_median_s"], oc / s["ours_train"]["cpu_median_s"]
                goals[f"{size} {seeds}-seed vmap <= 2.5x one seed (wall; CPU)"] = (
                    wr,
                    cr,
                    wr <= 2.5 and cr <= 2.5,
                )
        if size == "12m":
            c = r["train"]["compile_s"]
            goals["12m train-step compile < 90 s"] = (c, c < 90)
    mem = [
        "| size | params | params + opt state + slow critic (MiB) "
        "| train working set, XLA temp (MiB): ours / ref | vmapped, per seed (MiB) |",
        "|---|---|---|---|---|",
    ]
    for size, r in results.items():
        b, v, ref = r["bytes"], r.get("vmap") or {}, r.get("ref") or {}
        per_seed = v["temp_bytes"] / seeds if "temp_bytes" in v else None
        mem.append(
            f"| {size} | {r['params']:,} | {mib(sum(b.values()))} "
            f"({mib(b['params'])} + {mib(b['opt_state'])} + {mib(b['slow'])}) "
            f"| {mib(r['train']['temp_bytes'])} / {mib(ref.get('temp_bytes'))} "
            f"| {mib(per_seed)} |"
        )
    return "\n".join(rows) + "\n\n" + "\n".join(mem), goals


def mib(b) -> str:
    return "—" if b is None else f"{b / 2**20:.1f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", nargs="+", default=["1m", "12m"], choices=["1m", "12m"])
    p.add_argument("--reps", type=int, default=3, help="interleaved rounds")
    p.add_argument("--k", type=int, default=2, help="train steps per side per round")
    p.add_argument("--vmap-k", type=int, default=0, help="vmapped steps per round (0: --k)")
    p.add_argument("--policy-k", type=int, default=10, help="policy steps per side per round")
    p.add_argument("--seeds", type=int, default=4, help="vmapped seeds (0/1: skip)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--length", type=int, default=65, help="rows per window incl. context")
    p.add_argument("--envs", type=int, default=16)
    p.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    p.add_argument("--skip-reference", action="store_true")
    p.add_argument(
        "--compute-dtype",
        default="float32",
        choices=["float32", "bfloat16", "auto"],
        help="our agent.compute_dtype (the reference worker runs float32)",
    )
    p.add_argument("--profile", action="store_true", help="per-HLO-op profile of our train")
    p.add_argument(
        "--image",
        nargs=3,
        type=int,
        default=None,
        metavar=("H", "W", "C"),
        help="time the image model on uint8 H x W x C images (e.g. 64 64 3), both sides",
    )
    _refs.add_arguments(p, _refs.DREAMERV3)
    p.add_argument(
        "--ref-log",
        default=str(pathlib.Path(tempfile.gettempdir()) / "dv3_ref_worker_{size}.log"),
        help="the reference worker's stderr ({size}: the preset)",
    )
    p.add_argument(
        "--ref-malloc",
        choices=["same", "default"],
        default="same",
        help="same: the reference runs with our GLIBC_TUNABLES (launcher/loop/malloc.py); "
        "default: with glibc's defaults, as its own launcher runs it",
    )
    p.add_argument("--out", default=None, help="write all results as JSON")
    args = p.parse_args()
    if not args.skip_reference:
        _refs.require(_refs.DREAMERV3, args.ref, args.ref_python, "--skip-reference")

    pin([args.core])
    jax.config.update("jax_enable_compilation_cache", False)
    t0 = time.perf_counter()
    rep: dict = {
        "command": " ".join([sys.executable, *sys.argv]),
        "machine": {**machine_info(), "core": args.core, "flax": flax.__version__},
        "uptime_start": uptime(),
        "config": vars(args),
    }
    print(f"# {rep['uptime_start']}\n# {rep['machine']}", flush=True)
    peak = rep["matmul_2048"] = matmul_peak()
    print(f"matmul 2048^2: {peak['gflops_cpu']:.1f} GFLOP/s (CPU), {peak['gflops_wall']:.1f} wall")
    results = {}
    for size in args.sizes:
        results[size] = bench_size(size, args)
        results[size]["envs"] = args.envs
        if args.out:  # partial results survive a later failure
            pathlib.Path(args.out).write_text(json.dumps({**rep, "sizes": results}, default=str))
    rep["sizes"] = results
    rep["uptime_end"] = uptime()
    rep["total_s"] = time.perf_counter() - t0
    tables, goals = report_tables(results, peak, args.seeds, args.image)
    rep["goals"] = goals
    print("\n" + tables + "\n")
    for name, g in goals.items():
        vals = ", ".join(fmt(x, 2) for x in g[:-1] if x is not None)
        print(f"- {name}: {vals} -> {'met' if g[-1] else 'NOT met'}" if g else f"- {name}: —")
    for size, r in results.items():
        t = r["train"]
        print(
            f"{size}: train dot GFLOP {t['dot_flops'] / 1e9:.2f} (XLA cost_analysis, scan bodies"
            f" once: {t['xla_flops'] / 1e9:.2f}; while loops {t['while_loops']}); trace+lower "
            f"{t['lower_s']:.1f} s; reference constructor "
            f"{fmt((r.get('ref') or {}).get('constructor_s'), 1)} s"
        )
    print(f"\n# start: {rep['uptime_start']}\n# end:   {rep['uptime_end']}")
    print(f"# total {rep['total_s']:.0f} s; matmul peak {peak['gflops_cpu']:.1f} GFLOP/s CPU")
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(rep, indent=1, default=str))


if __name__ == "__main__":
    main()
