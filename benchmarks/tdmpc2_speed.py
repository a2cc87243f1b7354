"""TD-MPC2 speed: our jitted ``update`` / ``plan`` against the reference (5f6fade, torch CPU).

    .venv/bin/python benchmarks/tdmpc2_speed.py [--sizes 1 5] [--threads 1] [--repeats 5]
        [--vmap-envs 16] [--vmap-repeats 3] [--seeds 1 2 4 8] [--no-ref] [--no-seeds]
        [--profile] [--variants] [--pixels] [--json out.json]

Walker dims (obs 24, action 6, T = 1000 so gamma 0.995), batch 256, horizon 3, 512 samples,
24 policy trajectories, 64 elites, 6 iterations, dropout 0.01 (all reference defaults;
``--sizes`` picks the model-size presets). For each size, one after the other:

1. ours: the jitted ``update`` (state chained, donated; fresh batch and noise per call),
   the jitted single-env ``plan`` decision (warm-start mean chained, ``t0`` false) and ``plan``
   vmapped over ``--vmap-envs`` envs (time per call / envs = per decision). Compile time
   (lower + compile) is reported separately; each op gets 1 untimed call, then the median
   of ``--repeats`` (vmap: ``--vmap-repeats``) timed calls, wall and process CPU time.
2. the reference: ``benchmarks/_tdmpc2_ref_timer.py`` in a subprocess with the reference venv
   (``--ref`` / ``--ref-python``, or ``$WMRL_TDMPC2_REF`` / ``$WMRL_TDMPC2_REF_PYTHON``: the
   recipe is docs/PERFORMANCE.md, "Reference checkouts"; ``--no-ref`` skips it), timing the
   real ``agent.update(buffer)`` and ``agent.act(obs, t0=False)`` with
   ``torch.set_num_threads(--threads)``.

Threads: ``--threads N`` pins every thread of this process, hence XLA's thread pool (created
later) and the reference subprocess (which inherits the affinity), to the first N allowed
CPUs with ``sched_setaffinity``. XLA_FLAGS cannot do it here: ``--xla_cpu_multi_thread_eigen
=false`` is accepted but work still runs on 3 threads (measured), and
``intra_op_parallelism_threads`` is not an XLA flag (XLA_FLAGS then aborts).

Also: a jitted 2048 x 2048 float32 matmul (this machine's sgemm peak under the same pinning),
FLOPs of update / plan from XLA's ``cost_analysis`` (which counts a ``while`` body once, so the
plan's 6 MPPI iterations are under-counted) and from an analytic count of the matmuls (what
the table uses), achieved GFLOP/s and % of the matmul peak; seed scaling of the whole
``TDMPC2.train`` step (``jax.vmap`` over 1, 2, 4, 8 seeds, size 1, ``pendulum`` with T = 4 and
``seed_steps`` = 4, chunks of T + 1 ticks = 4 plan decisions + 4 updates per seed, timed past
the seed phase); ``--profile``: a per-HLO-op time breakdown of update and plan (perfetto trace
of ``jax.profiler``, ops mapped to matmul / PRNG / transcendental / other through the compiled
HLO); ``--variants``: the local variants that sized docs/PERFORMANCE.md's TD-MPC2 "What
changed" items (the textbook Mish that ``agents/common/blocks.py`` replaced; no
dropout, which bounds what the dropout masks cost; ``lax.map`` over the planner's envs, the
CPU path of ``TDMPC2.policy_fn``, against the ``vmap`` row of the table).

``--pixels`` (issue 48): the pixel agents instead, ours (``agent.obs=rgb``, a 64 x 64 x 9 uint8
frame stack) and the reference's (``obs=rgb``, ``--rgb`` of the timer), on random uint8
stacks; size 5 only: the reference's conv encoder emits 16 x 32 = 512 features whatever the
size, and only size 5 has a 512 latent (at size 1, latent 128, the reference builds a model that
fails in its first dynamics call; ours refuses it). The analytic FLOPs count the convolutions
in place of the MLP encoder; no seed scaling or variants.

Shared, loaded machines vary 2x between runs: compare ratios and CPU times, quote the load.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import _refs  # noqa: E402  (benchmarks/ is sys.path[0])
import jax
import jax.numpy as jnp
from _hlo_profile import profile_breakdown  # noqa: E402  (benchmarks/ is sys.path[0])
from _machine import machine_info, matmul_peak, pin_threads, uptime  # noqa: E402
from _tdmpc2_ours import (  # noqa: E402
    ACT,
    EP_LEN,
    OBS,
    PIXELS,
    analytic_flops,
    bench_plan,
    bench_seeds,
    bench_update,
    make_cfg,
)

from agents.tdmpc2.world_model import WorldModel, count_params
from launcher.loop.malloc import glibc_env

ROOT = pathlib.Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------ reference
def run_reference(size: int, args) -> dict:
    cmd = [
        args.ref_python,
        str(ROOT / "benchmarks" / "_tdmpc2_ref_timer.py"),
        "--ref",
        args.ref,
        "--size",
        str(size),
        "--threads",
        str(args.threads),
        "--repeats",
        str(args.repeats),
        "--warmup",
        "2",
        "--obs",
        str(OBS),
        "--action",
        str(ACT),
        "--episode-length",
        str(EP_LEN),
        "--batch",
        str(args.batch),
        "--horizon",
        str(args.horizon),
        "--samples",
        str(args.samples),
        "--pi-trajs",
        str(args.pi_trajs),
        "--elites",
        str(args.elites),
        "--iterations",
        str(args.iterations),
        *(["--rgb"] if args.pixels else []),
    ]
    # the reference as its own scripts run it: glibc's malloc (launcher/loop/malloc.py undone)
    env = {**glibc_env(os.environ), "OMP_NUM_THREADS": str(args.threads)}
    env["MKL_NUM_THREADS"] = str(args.threads)
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if p.returncode != 0:
        print(p.stderr[-3000:], file=sys.stderr)
        return {"error": f"reference timer exited {p.returncode}"}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["subprocess_s"] = time.perf_counter() - t
    return out


# ------------------------------------------------------------------------------ variants
def textbook_mish(x: jax.Array) -> jax.Array:
    """``x * tanh(softplus(x))`` as written, autodiff'd: the Mish before the one-exp form."""
    return x * jnp.tanh(jax.nn.softplus(x))


def run_variants(size: int, args, base: dict, params) -> dict:
    """Time update / plan variants at ``size`` (each in its own trace; agents/ untouched)."""
    from agents.common import blocks

    out: dict = {"baseline": base}
    specs = [
        ("textbook mish (before the one-exp form)", {}, None, True),
        ("no dropout (bound on the dropout cost)", {"dropout": 0.0}, None, False),
    ]
    original = blocks.ACTIVATIONS["mish"]
    for name, overrides, impl, fmish in specs:
        if fmish:
            blocks.ACTIVATIONS["mish"] = textbook_mish
        try:
            wm = WorldModel(make_cfg(size, args, **overrides), OBS, ACT)
            upd, (_, _, holder) = bench_update(wm, args, dropout_impl=impl)
            pl, _ = bench_plan(wm, holder["state"].params, args, dropout_impl=impl)
        finally:
            blocks.ACTIVATIONS["mish"] = original
        out[name] = {
            "update_cpu_s": upd["cpu_median_s"],
            "update_wall_s": upd["wall_median_s"],
            "plan_cpu_s": pl["cpu_median_s"],
            "plan_wall_s": pl["wall_median_s"],
        }
        print(f"  variant {name}: {out[name]}", flush=True)
    if args.vmap_envs > 0:
        wm = WorldModel(make_cfg(size, args), OBS, ACT)
        seq, _ = bench_plan(wm, params, args, n_envs=args.vmap_envs, sequential=True)
        name = f"plan: lax.map over {args.vmap_envs} envs instead of vmap"
        out[name] = {
            "plan_per_decision_cpu_s": seq["per_decision_cpu_s"],
            "plan_per_decision_wall_s": seq["per_decision_wall_s"],
            "compile_s": seq["compile_s"],
        }
        print(f"  variant {name}: {out[name]}", flush=True)
    return out


# ------------------------------------------------------------------------------ report
def fmt(x, nd=3):
    return "—" if x is None else f"{x:.{nd}f}"


def table(results: dict, peak: dict) -> str:
    rows = [
        "| size | op | ours median (s) | reference median (s) | ratio ref/ours | compile (s) "
        "| GFLOP (ours; ref) | % of matmul peak (CPU; wall) | ours CPU (s) | ref CPU (s) "
        "| ratio CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, r in results.items():
        ours, ref, fl = r["ours"], r.get("ref") or {}, r["flops"]
        ref_ok = "update" in ref
        for op, key, ref_key in (
            ("update", "update", "update"),
            ("plan (1 env)", "plan", "act"),
            (f"plan (vmap {args_envs(ours)} envs, per decision)", "plan_vmap", "act"),
        ):
            o = ours.get(key)
            if o is None:
                continue
            vm = key == "plan_vmap"
            w = o["per_decision_wall_s"] if vm else o["wall_median_s"]
            c = o["per_decision_cpu_s"] if vm else o["cpu_median_s"]
            rw = ref[ref_key]["wall_median_s"] if ref_ok else None
            rc = ref[ref_key]["cpu_median_s"] if ref_ok else None
            gf = fl["ours"]["plan" if key != "update" else "update"] / 1e9
            gf_ref = fl["ref"]["plan" if key != "update" else "update"] / 1e9
            pw = 100 * gf / w / peak["gflops_wall"]
            pc = 100 * gf / c / peak["gflops_cpu"]
            rows.append(
                f"| {size} | {op} | {fmt(w)} | {fmt(rw)} | {fmt(rw / w if rw else None, 2)} "
                f"| {fmt(o['compile_s'], 1)} | {gf:.1f}; {gf_ref:.1f} | {pc:.0f}; {pw:.0f} "
                f"| {fmt(c)} | {fmt(rc)} | {fmt(rc / c if rc else None, 2)} |"
            )
    return "\n".join(rows)


def args_envs(ours: dict) -> int:
    return ours.get("plan_vmap", {}).get("envs", 0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 5])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--vmap-envs", type=int, default=16)
    p.add_argument("--vmap-repeats", type=int, default=3)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--seed-repeats", type=int, default=2)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--horizon", type=int, default=3)
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--pi-trajs", type=int, default=24)
    p.add_argument("--elites", type=int, default=64)
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--no-ref", action="store_true")
    p.add_argument("--no-seeds", action="store_true")
    p.add_argument("--profile", action="store_true", help="per-HLO-op breakdown")
    p.add_argument("--variants", action="store_true", help="time the suggested variants")
    p.add_argument("--variant-size", type=int, default=5)
    _refs.add_arguments(p, _refs.TDMPC2)
    p.add_argument("--pixels", action="store_true", help="the pixel agents (size 5 only)")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    if args.pixels and (args.sizes != [5] or args.variants):
        p.error(
            "--pixels runs size 5 only (--sizes 5; the reference's 512 conv features fit no "
            "other preset's latent) and no --variants"
        )
    if args.pixels:
        args.no_seeds = True  # the seed scaling is the vector pendulum agent's
    if not args.no_ref:  # before anything is timed: the reference comes last in each size
        _refs.require(_refs.TDMPC2, args.ref, args.ref_python, "--no-ref")

    t_start = time.perf_counter()
    cpus = pin_threads(args.threads)
    report: dict = {
        "machine": {**machine_info(), "pinned_cpus": cpus, "threads": args.threads},
        "uptime_start": uptime(),
        "config": {k: v for k, v in vars(args).items() if k not in ("json",)},
    }
    print(f"# {report['uptime_start']}\n# pinned to CPUs {cpus}; {report['machine']}", flush=True)

    peak = matmul_peak(args.repeats)
    report["matmul_2048"] = peak
    print(
        f"matmul 2048: {peak['gflops_wall']:.1f} GFLOP/s wall, {peak['gflops_cpu']:.1f} CPU",
        flush=True,
    )

    results: dict = {}
    for size in args.sizes:
        if args.pixels:
            cfg = make_cfg(size, args, obs="rgb")
            wm = WorldModel(cfg, PIXELS[0] * PIXELS[1] * PIXELS[2], ACT, image_shape=PIXELS)
        else:
            cfg = make_cfg(size, args)
            wm = WorldModel(cfg, OBS, ACT)
        r: dict = {"flops": analytic_flops(cfg, OBS, ACT, args.pixels), "ours": {}}
        upd, (upd_c, upd_call, holder) = bench_update(wm, args)
        # a copy: the profiled update below keeps donating (deleting) the chained state
        params = jax.tree.map(lambda x: jnp.array(x, copy=True), holder["state"].params)
        r["params"] = count_params(params)
        r["ours"]["update"] = upd
        print(
            f"size {size}: update {upd['wall_median_s']:.3f} s ({upd['cpu_median_s']:.3f} CPU),"
            f" compile {upd['compile_s']:.1f} s",
            flush=True,
        )
        pl, (pl_c, pl_call) = bench_plan(wm, params, args)
        r["ours"]["plan"] = pl
        print(
            f"size {size}: plan {pl['wall_median_s']:.3f} s ({pl['cpu_median_s']:.3f} CPU),"
            f" compile {pl['compile_s']:.1f} s",
            flush=True,
        )
        if args.profile:
            r["profile"] = {
                "update": profile_breakdown(upd_c, upd_call),
                "plan": profile_breakdown(pl_c, pl_call),
            }
        if args.vmap_envs > 0:
            pv, _ = bench_plan(wm, params, args, n_envs=args.vmap_envs)
            r["ours"]["plan_vmap"] = pv
            print(
                f"size {size}: plan vmap {args.vmap_envs}: {pv['wall_median_s']:.3f} s/call,"
                f" {pv['per_decision_wall_s']:.4f} s/decision, compile {pv['compile_s']:.1f} s",
                flush=True,
            )
        if not args.no_ref:
            r["ref"] = run_reference(size, args)
            if "update" in r["ref"]:
                print(
                    f"size {size}: reference update {r['ref']['update']['wall_median_s']:.3f} s,"
                    f" act {r['ref']['act']['wall_median_s']:.3f} s",
                    flush=True,
                )
        if args.variants and size == args.variant_size:
            r["variants"] = run_variants(
                size,
                args,
                {
                    "update_cpu_s": upd["cpu_median_s"],
                    "update_wall_s": upd["wall_median_s"],
                    "plan_cpu_s": pl["cpu_median_s"],
                    "plan_wall_s": pl["wall_median_s"],
                    "plan_vmap_per_decision_cpu_s": (
                        r["ours"]["plan_vmap"]["per_decision_cpu_s"]
                        if "plan_vmap" in r["ours"]
                        else None
                    ),
                },
                params,
            )
        results[str(size)] = r
        del upd_c, pl_c, holder
    report["sizes"] = results
    if not args.no_seeds and args.seeds:
        report["seeds"] = bench_seeds(args)
    report["uptime_end"] = uptime()
    report["total_s"] = time.perf_counter() - t_start

    print()
    print(table(results, peak))
    print()
    print(
        f"matmul peak (jit 2048^2 f32, {args.threads} thread(s)): "
        f"{peak['gflops_wall']:.1f} GFLOP/s wall, {peak['gflops_cpu']:.1f} GFLOP/s CPU time"
    )
    for size, r in results.items():
        ref = r.get("ref") or {}
        if "matmul_2048" in ref:
            print(
                f"reference torch.mm 2048^2 (size {size} run): {ref['matmul_2048']['gflops']:.1f}"
                f" GFLOP/s; torch threads {ref['threads']}, affinity {ref['affinity']}"
            )
        for op in ("update", "plan"):
            xf = r["ours"][op]["xla_flops"]
            print(
                f"size {size} {op}: XLA cost_analysis {xf / 1e9 if xf else float('nan'):.2f} "
                f"GFLOP, analytic {r['flops']['ours'][op] / 1e9:.2f} GFLOP"
            )
        for op, prof in (r.get("profile") or {}).items():
            tot = prof["total_op_s"]
            cats = ", ".join(f"{k} {100 * v / tot:.0f}%" for k, v in prof["by_category"].items())
            print(f"size {size} {op} profile ({tot:.3f} s of ops): {cats}")
        for name, v in (r.get("variants") or {}).items():
            print(f"size {size} variant {name}: {v}")
    if "seeds" in report:
        s = report["seeds"]
        base = s[str(args.seeds[0])]["per_step_per_seed_cpu_s"]
        print(
            "\n| seeds | chunk wall (s) | chunk CPU (s) | per step per seed wall (ms) "
            "| per step per seed CPU (ms) | CPU cost vs 1 seed | compile (s) |"
        )
        print("|---|---|---|---|---|---|---|")
        for S in args.seeds:
            x = s[str(S)]
            print(
                f"| {S} | {x['wall_median_s']:.2f} | {x['cpu_median_s']:.2f} "
                f"| {1e3 * x['per_step_per_seed_wall_s']:.0f} "
                f"| {1e3 * x['per_step_per_seed_cpu_s']:.0f} "
                f"| {x['per_step_per_seed_cpu_s'] / base:.2f} | {x['compile_s']:.1f} |"
            )
    print(
        f"\n# start: {report['uptime_start']}\n# end:   {report['uptime_end']}"
        f"\n# total {report['total_s']:.0f} s"
    )
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=1, default=float))


if __name__ == "__main__":
    from launcher.loop.malloc import reexec_with_fast_malloc

    reexec_with_fast_malloc()  # as the launcher runs ours (launcher/loop/malloc.py)
    main()
