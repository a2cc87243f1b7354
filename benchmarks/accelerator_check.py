"""Accelerator check (issue 29): the agents' step, chunk and compile times on whatever JAX
backend this process finds (``jax.default_backend()``), in one command of < 8 min on one GPU.

    .venv/bin/python benchmarks/accelerator_check.py [--sections dv3_step tdmpc2_step
        dv3_chunk tdmpc2_chunk tdmpc2_phases dv3_seeds dv3_image_step] [--reps 10]
        [--chunk-reps 3]
        [--budget-s 420] [--td-size 5] [--td-chunk-ticks 50] [--out-dir DIR] [--tiny]

Sections (each in its own try/except: an error is recorded in the JSON and the next section
runs; sections, and ``dv3_seeds``' seed counts, not started within ``--budget-s`` of the
start are recorded as skipped):

- ``dv3_step``: DreamerV3 12m ``train_step`` (B 16 x T 65 rows, state donated and chained)
  and ``policy_step`` (16 envs, carry chained), built with ``dreamerv3_speed.py``'s
  ``make_batch`` / ``aot`` / ``stepper``; dot FLOPs (scan bodies times their length).
- ``tdmpc2_step``: TD-MPC2 size 5 ``update`` (batch 256), ``plan`` for one env and ``plan``
  vmapped over 16 envs (``_tdmpc2_ours.py``'s ``bench_update`` / ``bench_plan``).
- ``dv3_chunk``: the whole DreamerV3 chunk (``jax.jit(agent.train)``: collector with MJX
  walker_walk at action repeat 2, 16 envs, policy, replay, the updates), compiled once,
  trained through the gate by that program on consecutive windows and then timed on the next
  window from one state, as ``dreamerv3_loop.py`` does: env frames/s, updates/s, the share
  outside the train step (with ``dv3_step``'s step time).
- ``tdmpc2_chunk``: the same for TD-MPC2 size 5 (the paper protocol's one env; seed_steps 1,
  so that warming through the seed phase and burst is short; the timed window is past it):
  env frames/s, updates/s and seconds per agent step of one seed.
- ``tdmpc2_phases``: that chunk phase by phase (``_tdmpc2_phases.py``, issue 42): physics
  (``vmap(env.step)``), the collector tick with a trivial policy, replay (add + sample),
  update and plan, each its own jitted scan over the chunk's window from its warm state
  (``tdmpc2_chunk``'s, else its own chunk first), seconds per agent step, their sum next
  to the whole; on a Playground task also the CPU MuJoCo step (``mj_step`` x substeps x
  action repeat) and, with dm_control installed, the reference env's whole step.
- ``dv3_seeds``: DreamerV3 12m ``train_step`` vmapped over 1, 4 and 16 seeds (cost per seed).
  Each program is compiled on abstract shapes first; where ``memory_analysis()`` says it does
  not fit the device's free memory it is skipped with that reason.
- ``dv3_image_step``: DreamerV3 12m ``train_step`` and ``policy_step`` on 64 x 64 x 3 uint8
  images (the CNN encoder and decoder; issue 47), and its time over ``dv3_step``'s: the
  measured side of the image runs' FLOP-scaled dry-run figure (agents/dreamerv3/cost.py).

Every compile time is ``trace + lower + compile``, wall, with the persistent compile cache
off. Timings are wall medians of ``--reps`` calls after one untimed call (process CPU time is
recorded too; on an accelerator it is the host's, not the device's). Writes
``accelerator_check.json`` and ``accelerator_check.md`` to ``--out-dir`` (default
``results/accelerator_<backend>_<yyyymmdd>/``) after every section, and prints the
published figures each quantity is compared against (``_accelerator_plan.PUBLISHED``, the
figures docs/VALIDATION.md cites) or "no published figure". What it measures becomes the
agents' ``AgentTables.accelerator_seconds_per_step`` (the dry run's estimate) by hand.

``--tiny``: the same code on CPU-sized inputs (the CI smoke configs of
``conf/agent_protocol/*_smoke.yaml``, gymnax pendulum instead of walker_walk, 2 envs,
seeds 1 / 2, 2 timed calls, XLA at ``launcher.loop.program.FAST_COMPILE``), on CPU with
``JAX_PLATFORMS=cpu`` on a GPU machine: about 47 s on one core of a 2-core box, nearly all of
it tracing and compiling; ``tests/launcher/test_accelerator_check.py`` runs it.

This script is the command line, the run order and the report; the plan (``Plan``,
``make_plan``, the published figures) is in ``_accelerator_plan.py``, the sections in
``_accelerator_sections.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import pathlib
import sys
import time
import traceback
from collections.abc import Callable

from launcher.loop.malloc import reexec_with_fast_malloc

reexec_with_fast_malloc()  # as the launcher does (XLA:CPU's per-call buffers); a no-op on a re-exec
_USER_XLA_FLAGS = os.environ.get("XLA_FLAGS")
# dreamerv3_speed / dreamerv3_loop set one-thread XLA:CPU flags when imported; this check
# runs with the caller's flags (restored below, before the backend starts). The sections
# module uses them; they are imported here, first, for that order.
import dreamerv3_loop  # noqa: E402, F401  (benchmarks/ is sys.path[0] when run as a script)
import dreamerv3_speed  # noqa: E402, F401

if _USER_XLA_FLAGS is None:
    os.environ.pop("XLA_FLAGS", None)
else:
    os.environ["XLA_FLAGS"] = _USER_XLA_FLAGS

import jax  # noqa: E402
from _accelerator_plan import ROOT, Plan, make_plan  # noqa: E402
from _accelerator_sections import (  # noqa: E402
    section_dv3_chunk,
    section_dv3_image_step,
    section_dv3_seeds,
    section_dv3_step,
    section_tdmpc2_chunk,
    section_tdmpc2_phases,
    section_tdmpc2_step,
)
from _machine import machine_info  # noqa: E402

from launcher.loop.program import FAST_COMPILE, xla_flags  # noqa: E402

SECTIONS = (
    "dv3_step",
    "tdmpc2_step",
    "dv3_chunk",
    "tdmpc2_chunk",
    "tdmpc2_phases",
    "dv3_seeds",
    "dv3_image_step",
)


RUNNERS: dict[str, Callable[[Plan, dict], dict]] = {
    "dv3_step": section_dv3_step,
    "tdmpc2_step": section_tdmpc2_step,
    "dv3_chunk": section_dv3_chunk,
    "tdmpc2_chunk": section_tdmpc2_chunk,
    "tdmpc2_phases": section_tdmpc2_phases,
    "dv3_seeds": section_dv3_seeds,
    "dv3_image_step": section_dv3_image_step,
}


# ------------------------------------------------------------------------------ report
def fmt(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


def markdown(rep: dict) -> str:
    lines = [
        f"# Accelerator check: {rep['backend']} ({rep['device_kind']})"
        + (" --tiny" if rep["tiny"] else ""),
        "",
        f"`{rep['command']}`, {rep['started']}, jax {rep['machine']['jax']}; "
        "wall medians; compile = trace + lower + compile, wall.",
        "",
        "| section | quantity | value | unit | published figure |",
        "|---|---|---|---|---|",
    ]
    for name, s in rep["sections"].items():
        if "error" in s:
            lines.append(f"| {name} | error | — | {s['error'].splitlines()[0][:200]} | |")
        elif "skipped" in s:
            lines.append(f"| {name} | skipped | — | {s['skipped']} | |")
        for r in s.get("rows", []):
            lines.append(
                f"| {name} | {r['quantity']} | {fmt(r['value'])} | {r['unit']} | {r['published']} |"
            )
    return "\n".join(lines) + "\n"


def write(rep: dict, out_dir: pathlib.Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "accelerator_check.json").write_text(json.dumps(rep, indent=1, default=str))
    (out_dir / "accelerator_check.md").write_text(markdown(rep))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=SECTIONS)
    p.add_argument("--reps", type=int, default=None, help="timed step calls (10; tiny 2)")
    p.add_argument("--chunk-reps", type=int, default=None, help="timed chunks (3; tiny 1)")
    p.add_argument(
        "--budget-s",
        type=float,
        default=420.0,
        help="start no section after this many seconds (0: no limit)",
    )
    p.add_argument("--td-size", type=int, default=None, help="TD-MPC2 model size (5; not tiny)")
    p.add_argument("--td-chunk-ticks", type=int, default=None, help="TD-MPC2 chunk (50; tiny 2)")
    p.add_argument("--out-dir", default=None)
    p.add_argument("--tiny", action="store_true", help="CPU-sized inputs, same code (a test)")
    args = p.parse_args()

    if args.tiny:  # before the backend starts; a per-program option would miss env / init
        flags = os.environ.get("XLA_FLAGS", "")
        extra = [f for f in xla_flags(FAST_COMPILE).split() if f.split("=")[0] not in flags]
        os.environ["XLA_FLAGS"] = " ".join([flags, *extra]).strip()
    jax.config.update("jax_enable_compilation_cache", False)  # cold compile times
    t0 = time.perf_counter()
    plan = make_plan(args.tiny, args.reps, args.chunk_reps)
    if args.td_size and not args.tiny:
        plan = dataclasses.replace(plan, td_size=args.td_size, td_label=f"size {args.td_size}")
    if args.td_chunk_ticks:
        plan = dataclasses.replace(plan, td_chunk_ticks=args.td_chunk_ticks)
    backend = jax.default_backend()
    date = time.strftime("%Y%m%d")
    out_dir = pathlib.Path(
        args.out_dir or ROOT / "results" / f"accelerator_{backend}{'_tiny' * args.tiny}_{date}"
    )
    rep: dict = {
        "command": " ".join([sys.executable, *sys.argv]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "backend": backend,
        "device_kind": jax.devices()[0].device_kind,
        "devices": [str(d) for d in jax.devices()],
        "machine": machine_info(),
        "tiny": args.tiny,
        "plan": dataclasses.asdict(plan),
        "sections": {},
    }
    print(f"# {backend}: {rep['devices']}; out {out_dir}", flush=True)
    found: dict = {"deadline": t0 + args.budget_s if args.budget_s else math.inf}
    for name in args.sections:
        elapsed = time.perf_counter() - t0
        if args.budget_s and elapsed > args.budget_s:
            reason = f"not started: {elapsed:.0f} s elapsed > --budget-s {args.budget_s:.0f}"
            rep["sections"][name] = {"skipped": reason}
            print(f"[{name}] {reason}", flush=True)
            continue
        print(f"[{name}] ...", flush=True)
        t = time.perf_counter()
        try:
            res = RUNNERS[name](plan, found)
        except Exception as err:  # one failure must not cost the other sections
            res = {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()}
            print(f"[{name}] ERROR {res['error'][:500]}", flush=True)
        res["section_wall_s"] = time.perf_counter() - t
        rep["sections"][name] = res
        rep["total_s"] = time.perf_counter() - t0
        print(f"[{name}] {res['section_wall_s']:.1f} s", flush=True)
        gc.collect()
        write(rep, out_dir)  # partial results survive a later failure or a timeout
    rep["total_s"] = time.perf_counter() - t0
    write(rep, out_dir)
    print("\n" + markdown(rep))
    print("Published figures compared against:")
    for s in rep["sections"].values():
        for r in s.get("rows", []):
            print(f"- {r['quantity']}: {r['published']}")
    print(f"\n# total {rep['total_s']:.1f} s; {out_dir / 'accelerator_check.json'}")


if __name__ == "__main__":
    main()
