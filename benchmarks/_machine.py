"""Machine facts and timing helpers of the jax-side benchmarks (tdmpc2_speed, dreamerv3_speed,
dreamerv3_loop): thread pinning, the CPU / versions / load line, compile timing and the
2048 x 2048 float32 matmul peak that the "% of peak" columns divide by."""

from __future__ import annotations

import os
import platform
import subprocess
import time

import jax
import jax.numpy as jnp
from _timing import timed  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)


def pin(cpus: list[int]) -> list[int]:
    """Pin every thread of this process to ``cpus`` (thread pools created later, XLA's
    among them, and subprocesses inherit the affinity); returns them."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except (ProcessLookupError, PermissionError):
            pass
    return cpus


def pin_threads(n: int) -> list[int]:
    """Pin every thread of this process to the first ``n`` allowed CPUs; returns them."""
    return pin(sorted(os.sched_getaffinity(0))[:n])


def machine_info() -> dict:
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES", ""),
        "LD_PRELOAD": os.environ.get("LD_PRELOAD", ""),
        **{k: v for k, v in os.environ.items() if k.startswith("MIMALLOC_")},
    }


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        a, b, c = os.getloadavg()
        return f"load average: {a:.2f}, {b:.2f}, {c:.2f}"


def compile_timed(fn, *args) -> tuple[object, float, float | None]:
    """``(compiled, lower+compile seconds, XLA cost-analysis flops)``."""
    t = time.perf_counter()
    compiled = fn.lower(*args).compile()
    seconds = time.perf_counter() - t
    ca = compiled.cost_analysis()
    if isinstance(ca, (list, tuple)):
        ca = ca[0] if ca else {}
    flops = (ca or {}).get("flops")
    return compiled, seconds, (float(flops) if flops is not None else None)


def matmul_peak(repeats: int = 7, n: int = 2048) -> dict:
    """Median time of a jitted ``n x n`` float32 matmul (at least 7 calls) and its GFLOP/s."""
    x = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    f = jax.jit(lambda a, b: a @ b)
    r = timed(lambda: f(x, x).block_until_ready(), 2, max(repeats, 7))
    r["gflops_wall"] = 2 * n**3 / r["wall_median_s"] / 1e9
    r["gflops_cpu"] = 2 * n**3 / r["cpu_median_s"] / 1e9
    return r
