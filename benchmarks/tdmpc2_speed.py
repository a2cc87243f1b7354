"""TD-MPC2 speed: our jitted ``update`` / ``plan`` against the reference (5f6fade, torch CPU).

    .venv/bin/python benchmarks/tdmpc2_speed.py [--sizes 1 5] [--threads 1] [--repeats 5]
        [--vmap-envs 16] [--vmap-repeats 3] [--seeds 1 2 4 8] [--no-ref] [--no-seeds]
        [--profile] [--variants] [--json out.json]

Walker dims (obs 24, action 6, T = 1000 so gamma 0.995), batch 256, horizon 3, 512 samples,
24 policy trajectories, 64 elites, 6 iterations, dropout 0.01 (all reference defaults;
``--sizes`` picks the model-size presets). For each size, one after the other:

1. ours: the jitted ``update`` (state chained, donated; fresh batch and noise per call),
   the jitted single-env ``plan`` decision (warm-start mean chained, ``t0`` false) and ``plan``
   vmapped over ``--vmap-envs`` envs (time per call / envs = per decision). Compile time
   (lower + compile) is reported separately; each op gets 1 untimed call, then the median
   of ``--repeats`` (vmap: ``--vmap-repeats``) timed calls, wall and process CPU time.
2. the reference: ``benchmarks/_tdmpc2_ref_timer.py`` in a subprocess with the reference venv
   (``--ref-python``), timing the real ``agent.update(buffer)`` and ``agent.act(obs,
   t0=False)`` with ``torch.set_num_threads(--threads)``.

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
HLO); ``--variants``: local variants that quantify the suggestions in
``docs/PERFORMANCE.md`` (the textbook Mish that ``agents/common/blocks.py`` replaced; no
dropout, which bounds what the dropout masks cost; ``lax.map`` over the planner's envs, the
CPU path of ``TDMPC2.policy_fn``, against the ``vmap`` row of the table).

Shared, loaded machines vary 2x between runs: compare ratios and CPU times, quote the load.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
from _hlo_profile import profile_breakdown  # noqa: E402  (benchmarks/ is sys.path[0])
from _machine import compile_timed, machine_info, matmul_peak, pin_threads, uptime  # noqa: E402
from _timing import timed  # noqa: E402

from agents.tdmpc2.buffer import Batch
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.planner import draw_plan_noise, plan
from agents.tdmpc2.train_state import init_train_state
from agents.tdmpc2.update import draw_update_noise, update
from agents.tdmpc2.world_model import WorldModel, count_params

ROOT = pathlib.Path(__file__).resolve().parent.parent
OBS, ACT, EP_LEN = 24, 6, 1000  # walker dims; T = 1000 -> gamma 0.995


# ------------------------------------------------------------------------------ FLOPs
def analytic_flops(cfg: TDMPC2Config, obs: int, act: int) -> dict:
    """Matmul FLOPs (2 * in * out per row per layer; no elementwise work) of one update and
    one planning decision, for our implementation and for the reference (5f6fade).

    Backward = 2x forward (weight and input gradients) where parameters are trained; the
    policy loss back-propagates through the (frozen) Q only to its input (1x). The
    reference evaluates *all* ``num_q`` members where it then uses two (TD target, policy
    loss, planner value); we evaluate only the drawn pair (deviation T40): at size 1
    (num_q = 2) the counts agree, at size 5 (num_q = 5) the reference does more work.
    """
    L, m, K, e, B, H = cfg.latent_dim, cfg.mlp_dim, cfg.num_bins, cfg.enc_dim, 0, cfg.horizon
    B = cfg.batch_size
    N, P, it = cfg.num_samples, cfg.num_pi_trajs, cfg.iterations
    enc_hidden = max(cfg.num_enc_layers - 1, 1)

    def mlp(dims):
        return 2 * sum(a * b for a, b in zip(dims[:-1], dims[1:], strict=True))

    f_enc = mlp([obs] + [e] * enc_hidden + [L])
    f_dyn = mlp([L + act, m, m, L])
    f_q = mlp([L + act, m, m, K])  # reward head has the same shape
    f_pi = mlp([L, m, m, 2 * act])

    def update_flops(q_td, q_pi):
        next_z = H * B * f_enc
        td = H * B * (f_pi + q_td * f_q)
        wm_fwd = B * f_enc + H * B * (f_dyn + f_q + cfg.num_q * f_q)
        pi_obj = (H + 1) * B * (3 * f_pi + 2 * q_pi * f_q)
        return next_z + td + 3 * wm_fwd + pi_obj

    def plan_flops(q_val):
        pi_trajs = P * (H * f_pi + (H - 1) * f_dyn)
        per_iter = N * (H * (f_q + f_dyn) + f_pi + q_val * f_q)
        return f_enc + pi_trajs + it * per_iter

    return {
        "ours": {"update": update_flops(2, 2), "plan": plan_flops(2)},
        "ref": {
            "update": update_flops(cfg.num_q, cfg.num_q),
            "plan": plan_flops(cfg.num_q),
        },
    }


# ------------------------------------------------------------------------------ ours
def make_cfg(size: int, args, **overrides) -> TDMPC2Config:
    return TDMPC2Config(
        model_size=size,
        batch_size=args.batch,
        horizon=args.horizon,
        num_samples=args.samples,
        num_pi_trajs=args.pi_trajs,
        num_elites=args.elites,
        iterations=args.iterations,
        **overrides,
    ).resolve(EP_LEN, ACT)


def random_batches(key, cfg: TDMPC2Config, n: int) -> list[Batch]:
    H, B = cfg.horizon, cfg.batch_size
    out = []
    for k in jax.random.split(key, n):
        ko, ka, kr = jax.random.split(k, 3)
        out.append(
            Batch(
                obs=jax.random.normal(ko, (H + 1, B, OBS), jnp.float32),
                action=jax.random.uniform(ka, (H, B, ACT), jnp.float32, -1.0, 1.0),
                reward=jax.random.normal(kr, (H, B), jnp.float32),
            )
        )
    return jax.block_until_ready(out)


def rekey(keys: jax.Array, impl: str | None) -> jax.Array:
    """The same number of keys, from another PRNG implementation (variants only)."""
    if impl is None:
        return keys
    data = jax.random.key_data(keys).reshape(keys.shape[0], -1)[:, 0]
    return jax.vmap(lambda d: jax.random.key(d, impl=impl))(data)


def bench_update(wm: WorldModel, args, dropout_impl: str | None = None) -> tuple[dict, object]:
    cfg = wm.cfg
    n = 1 + args.repeats
    batches = random_batches(jax.random.key(11), cfg, n)
    noises = [draw_update_noise(k, cfg, ACT) for k in jax.random.split(jax.random.key(12), n)]
    noises = [nz.replace(dropout_keys=rekey(nz.dropout_keys, dropout_impl)) for nz in noises]
    holder = {"state": init_train_state(wm, jax.random.key(0)), "i": 0}
    fn = jax.jit(functools.partial(update, wm, cfg), donate_argnums=0)
    compiled, compile_s, xla_flops = compile_timed(fn, holder["state"], batches[0], noises[0])

    def call():
        i = holder["i"] % n
        holder["state"], metrics = compiled(holder["state"], batches[i], noises[i])
        jax.block_until_ready((holder["state"], metrics))
        holder["i"] += 1

    r = timed(call, 1, args.repeats)  # AOT-compiled: one untimed call warms the buffers
    r.update(compile_s=compile_s, xla_flops=xla_flops)
    return r, (compiled, call, holder)


def bench_plan(
    wm: WorldModel,
    params,
    args,
    n_envs: int = 0,
    dropout_impl: str | None = None,
    sequential: bool = False,
) -> tuple[dict, object]:
    """Single-env decision (``n_envs == 0``) or ``plan`` vmapped over ``n_envs`` envs
    (``sequential``: ``lax.map`` over the envs instead of ``vmap``)."""
    cfg = wm.cfg
    H = cfg.horizon
    repeats = args.repeats if n_envs == 0 else args.vmap_repeats
    n = 1 + repeats
    E = max(n_envs, 1)

    def draw(k):
        nz = jax.vmap(lambda kk: draw_plan_noise(kk, cfg, ACT))(jax.random.split(k, E))
        return nz.replace(dropout_keys=jax.vmap(lambda d: rekey(d, dropout_impl))(nz.dropout_keys))

    noises = [draw(k) for k in jax.random.split(jax.random.key(21), n)]
    obs = jax.random.normal(jax.random.key(22), (n, E, OBS), jnp.float32)
    if n_envs == 0:
        noises = [jax.tree.map(lambda x: x[0], nz) for nz in noises]
        obs = obs[:, 0]

    def one(p, o, m, t0, nz):
        return plan(wm, cfg, p, o, m, t0, nz, eval_mode=False)[:2]

    if n_envs == 0:
        fn = jax.jit(one)
    elif sequential:
        fn = jax.jit(lambda p, *xs: jax.lax.map(lambda x: one(p, *x), xs))
    else:
        fn = jax.jit(jax.vmap(one, in_axes=(None, 0, 0, 0, 0)))
    mean0 = jnp.zeros((H, ACT) if n_envs == 0 else (E, H, ACT), jnp.float32)
    t0 = jnp.zeros(() if n_envs == 0 else (E,), bool)
    compiled, compile_s, xla_flops = compile_timed(fn, params, obs[0], mean0, t0, noises[0])
    holder = {"mean": mean0, "i": 0}

    def call():
        i = holder["i"] % n
        action, holder["mean"] = compiled(params, obs[i], holder["mean"], t0, noises[i])
        jax.block_until_ready((action, holder["mean"]))
        holder["i"] += 1

    r = timed(call, 1, repeats)  # AOT-compiled: one untimed call warms the buffers
    r.update(compile_s=compile_s, xla_flops=xla_flops, envs=E)
    r["per_decision_wall_s"] = r["wall_median_s"] / E
    r["per_decision_cpu_s"] = r["cpu_median_s"] / E
    return r, (compiled, call)


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
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
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


# ------------------------------------------------------------------------------ seeds
def bench_seeds(args) -> dict:
    import envs
    from agents.tdmpc2.agent import TDMPC2

    T = 4
    env = envs.make("pendulum", episode_length=T)
    cfg = TDMPC2Config(
        model_size=1,
        seed_steps=T,
        batch_size=args.batch,
        horizon=args.horizon,
        num_samples=args.samples,
        num_pi_trajs=args.pi_trajs,
        num_elites=args.elites,
        iterations=args.iterations,
    )
    agent = TDMPC2(cfg, env, total_env_steps=10_000)
    K = T + 1  # one chunk: 4 stepping ticks (plan + 1 update each) + 1 hold tick
    assert agent.schedule.burst_tick < 2 * K
    train = jax.jit(jax.vmap(agent.train, in_axes=(0, None)))
    out = {"env": "pendulum", "T": T, "ticks_per_chunk": K, "steps_per_chunk": T}
    for S in args.seeds:
        state = jax.vmap(agent.init)(jax.random.split(jax.random.key(S), S))
        compiled, compile_s, _ = compile_timed(train, state, jnp.arange(K))
        holder = {"state": state, "c": 0}

        def call(holder=holder, compiled=compiled):
            c = holder["c"]
            holder["state"], m = compiled(holder["state"], jnp.arange(c * K, (c + 1) * K))
            jax.block_until_ready((holder["state"], m))
            holder["c"] += 1

        # 2 untimed chunks: seed phase, then burst (seed_steps updates) + 3 planning ticks
        r = timed(call, 2, args.seed_repeats)
        n_updates = int(jnp.max(holder["state"].n_updates))
        r.update(compile_s=compile_s, seeds=S, n_updates_after=n_updates)
        r["per_step_per_seed_wall_s"] = r["wall_median_s"] / (T * S)
        r["per_step_per_seed_cpu_s"] = r["cpu_median_s"] / (T * S)
        out[str(S)] = r
        print(
            f"  seeds {S}: chunk {r['wall_median_s']:.2f} s wall / {r['cpu_median_s']:.2f} s CPU,"
            f" per step per seed {1e3 * r['per_step_per_seed_wall_s']:.0f} ms wall,"
            f" compile {compile_s:.1f} s",
            flush=True,
        )
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
    p.add_argument("--ref", default="/work/refs/tdmpc2_5f6fade")
    p.add_argument("--ref-python", default="/work/refs/venv/bin/python")
    p.add_argument("--json", default=None)
    args = p.parse_args()

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
        cfg = make_cfg(size, args)
        wm = WorldModel(cfg, OBS, ACT)
        r: dict = {"flops": analytic_flops(cfg, OBS, ACT), "ours": {}}
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
    main()
