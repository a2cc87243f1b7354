"""Timing helper shared by the benchmarks, importable from any venv (stdlib only)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed(call: Callable[[], object], warmup: int, repeats: int) -> dict:
    """``call()`` must block; returns wall / process-CPU medians and samples (seconds)."""
    for _ in range(warmup):
        call()
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        call()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return {
        "wall_median_s": statistics.median(wall),
        "cpu_median_s": statistics.median(cpu),
        "wall_s": wall,
        "cpu_s": cpu,
    }
