"""The CPU budget's estimate against measured launches (issue 30, item 1).

    .venv/bin/python benchmarks/cpu_estimate_check.py [--runs NAME ...] [--out r.json]
    .venv/bin/python benchmarks/cpu_estimate_check.py --measured r.json  # re-estimate only
    .venv/bin/python benchmarks/cpu_estimate_check.py --calls      # the per-call model

Runs: each launch is ``python -m launcher OVERRIDES +allow_long_cpu_run=true`` in a fresh run
directory, one at a time, with the persistent compile cache off (``WMRL_COMPILE_CACHE=off``:
the estimate counts the compile), the default offline W&B logger. Measured: wall time and
the CPU time (user + sys) of the launch and its children (``getrusage(RUSAGE_CHILDREN)``,
what ``/usr/bin/time`` reports). Estimated: :func:`launcher.config.cpu_budget.estimate` of the same
overrides on this process's cores (wall) and on one core (CPU). Prints one table row per run
and the ratios estimated / measured (the goal: within 2x).

``--calls``: one update / decision / train step of small and measured configs on one pinned
thread against the per-call model of ``agents/<agent>/cost.py`` (and, for DreamerV3, the
analytic FLOPs against the dot FLOPs of the traced step). Walker dims (obs 24, 6 actions).
Not a test: speed is measured here, never in the test suite (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKE = [
    "agent=fake",
    f"hydra.searchpath=[pkg://sweeps,file://{ROOT}/tests/launcher/fake_conf]",
    "env=probe_constant_reward",
]
SHORT = ["protocol.n_timesteps=2000", "protocol.checkpoint_frequency=1000"]
RUNS = {
    "fake smoke (the launch alone)": [*FAKE, "protocol=smoke"],
    "tdmpc2 pendulum smoke": ["env=pendulum", "protocol=smoke"],
    "dreamerv3 pendulum smoke": ["agent=dreamerv3", "env=pendulum", "protocol=smoke"],
    "tdmpc2 pendulum quick 2k": ["env=pendulum", "protocol=quick", *SHORT],
    "tdmpc2 pendulum quick 2k, 4 envs": [
        "env=pendulum",
        "protocol=quick",
        "agent.n_envs=4",
        *SHORT,
    ],
    "dreamerv3 acrobot quick 2k (8 envs)": [
        "agent=dreamerv3",
        "env=acrobot",
        "protocol=quick",
        *SHORT,
    ],
}


def estimate(overrides: list[str]) -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "launcher"))  # the fake agent's entry
    from launcher.cli import compose_spec
    from launcher.config import cpu_budget

    spec = compose_spec([*overrides, "+allow_long_cpu_run=true"])
    here = cpu_budget.estimate(spec)
    one = cpu_budget.estimate(spec, cores=1)
    return {"wall_s": here.wall_s, "cpu_s": one.wall_s, "basis": here.basis()}


def measure(overrides: list[str], run_dir: Path) -> dict | None:
    env = {
        **os.environ,
        "WMRL_COMPILE_CACHE": "off",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "launcher"), str(ROOT)]),
    }
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    argv = [sys.executable, "-m", "launcher", *overrides, "+allow_long_cpu_run=true"]
    argv.append(f"hydra.run.dir={run_dir}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        print(f"{' '.join(overrides)}: exit {proc.returncode}\n{proc.stderr[-2000:]}", flush=True)
        return None
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    match = re.search(r"compile: +([\d.]+) s", proc.stdout + proc.stderr)
    return {"wall_s": wall, "cpu_s": cpu, "train_compile_s": float(match[1]) if match else None}


def check_runs(names: list[str], out: str | None, measured: list[str]) -> None:
    rows = []
    for path in measured:  # earlier measurements, estimated again with today's model
        for row in json.loads(Path(path).read_text()):
            rows.append({**row, "estimated": estimate(row["overrides"])})
    names = [] if measured else names
    with tempfile.TemporaryDirectory(prefix="cpu_estimate_") as tmp:
        for i, name in enumerate(names):
            overrides = RUNS[name]
            est = estimate(overrides)
            got = measure(overrides, Path(tmp) / f"run{i}")
            if got is None:
                continue
            rows.append({"run": name, "overrides": overrides, "estimated": est, "measured": got})
            print(
                f"{name}: estimated {est['wall_s']:.0f} s wall / {est['cpu_s']:.0f} s CPU, "
                f"measured {got['wall_s']:.0f} s / {got['cpu_s']:.0f} s (train compile "
                f"{got['train_compile_s']} s wall)",
                flush=True,
            )
    print()
    print("| run | est. wall (s) | wall (s) | est./wall | est. CPU (s) | CPU (s) | est./CPU |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        e, m = r["estimated"], r["measured"]
        print(
            f"| {r['run']} | {e['wall_s']:.0f} | {m['wall_s']:.0f} | "
            f"{e['wall_s'] / m['wall_s']:.2f} | {e['cpu_s']:.0f} | {m['cpu_s']:.0f} | "
            f"{e['cpu_s'] / m['cpu_s']:.2f} |"
        )
    for r in rows:
        print(f"- {r['run']}: {r['estimated']['basis']}")
    if out:
        Path(out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS), metavar="NAME")
    p.add_argument("--calls", action="store_true", help="time single calls instead of runs")
    p.add_argument("--out", default=None)
    p.add_argument(
        "--measured", nargs="+", default=[], help="JSON of earlier runs (--out): no launch"
    )
    args = p.parse_args()
    if args.calls:
        from _cpu_calls import check_calls  # noqa: E402  (benchmarks/ is sys.path[0])

        check_calls()
    else:
        check_runs(args.runs, args.out, args.measured)
