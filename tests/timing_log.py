"""Where the suite's time goes: one JSON line per test phase (setup, call, teardown) with its
wall time and JAX's own monitoring counts for it (backend compile, tracing and lowering
seconds, persistent-cache hits and misses), appended as each phase ends so that a running
suite can be read.

    WMRL_TEST_TIMING=/tmp/timing.jsonl make test      # tests/conftest.py loads this plugin
    python tests/timing_log.py /tmp/timing.jsonl [N]  # the N costliest files

Compiles inside launcher subprocesses are not seen (only their tests' wall time).
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time

import pytest

_EVENTS: collections.Counter = collections.Counter()
_LAST = [time.perf_counter()]


def _duration(event: str, duration: float, **_: object) -> None:
    _EVENTS[event.rsplit("/", 1)[-1]] += duration


def _count(event: str, **_: object) -> None:
    _EVENTS[event.rsplit("/", 1)[-1] + "_n"] += 1


def pytest_configure(config: pytest.Config) -> None:
    """Listen to JAX's monitoring events (each xdist worker configures once)."""
    import jax

    jax.monitoring.register_event_duration_secs_listener(_duration)
    jax.monitoring.register_event_listener(_count)


def _write(item: pytest.Item, when: str) -> None:
    now = time.perf_counter()
    row = {"id": item.nodeid, "when": when, "wall": round(now - _LAST[0], 3)}
    row["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "main")
    row |= {k: round(v, 3) for k, v in _EVENTS.items()}
    _LAST[0] = now
    _EVENTS.clear()
    with open(os.environ["WMRL_TEST_TIMING"], "a") as f:
        f.write(json.dumps(row) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    _EVENTS.clear()
    yield
    _write(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _EVENTS.clear()
    yield
    _write(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    _EVENTS.clear()
    yield
    _write(item, "teardown")


def summary(path: str, n: int = 30) -> str:
    """The ``n`` costliest test files of a log: worker-seconds, compile, lowering, misses."""
    files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in open(path):
        row = json.loads(line)
        f = files[row["id"].split("::")[0]]
        f["wall"] += row["wall"]
        f["compile"] += row.get("backend_compile_duration", 0.0)
        f["lower"] += row.get("jaxpr_trace_duration", 0.0)
        f["lower"] += row.get("jaxpr_to_mlir_module_duration", 0.0)
        f["miss"] += row.get("cache_misses_n", 0)
        f["hit"] += row.get("cache_hits_n", 0)
    total = collections.Counter()
    for f in files.values():
        total.update(f)
    out = [
        f"{total['wall']:.0f} worker-s: compile {total['compile']:.0f}, trace + lower "
        f"{total['lower']:.0f}; cache misses {total['miss']}, hits {total['hit']}"
    ]
    for name, f in sorted(files.items(), key=lambda kv: -kv[1]["wall"])[:n]:
        out.append(
            f"{f['wall']:7.1f}  compile {f['compile']:6.1f}  lower {f['lower']:6.1f}  "
            f"miss {f['miss']:3d}  hit {f['hit']:3d}  {name}"
        )
    return "\n".join(out)


if __name__ == "__main__":
    print(summary(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30))
