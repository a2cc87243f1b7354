"""An allocator that keeps XLA:CPU's per-call buffers mapped: mimalloc, tcmalloc, else huge pages.

XLA:CPU allocates every call's temporary buffer (hundreds of MiB for a train step of the
agents here) with ``malloc``. glibc serves any block over 32 MiB with a fresh ``mmap`` and
unmaps it on ``free``, so each call faults every page of it in again and the kernel zeroes
it: for a 400 MiB buffer ~97,000 minor faults, 0.14 s of kernel time in a 0.73 s step
(docs/PERFORMANCE.md, "Allocators"). Remedies, best first (measured side by side by
``benchmarks/allocators.py``, docs/PERFORMANCE.md "Allocators"):

1. mimalloc from the ``cmeel-mimalloc`` wheel, a dependency of this package on Linux, so
   every install has it (``LD_PRELOAD`` of its ``libmimalloc.so``), with freed pages kept
   (``MIMALLOC_PURGE_DELAY=-1``) and no transparent huge pages (``MIMALLOC_ALLOW_THP=0``):
   :data:`MIMALLOC_KEEP`, each applied unless the environment sets it. With mimalloc's own
   defaults a page freed for a second goes back to the kernel, and the kernel maps fresh
   memory as 2 MiB huge pages; on a VM that hands freed memory to its host (this project's
   Firecracker boxes) each such fault is a host fault, so a convolution's scratch reused
   once per image train step, XLA's multi-GiB temp buffer (mimalloc returns blocks that
   large at once) and the compiler's own heap were faulted in again and again: a 1m image
   train step took 14.9 s (6.9 s with both settings), compiles took twice as long
   (31 -> 16 s at 1m). Peak RSS is then the high-water mark (+20-30%).
2. tcmalloc (Debian/Ubuntu package ``libtcmalloc-minimal4``), where the wheel is missing.
3. glibc >= 2.35 with ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` maps those blocks with
   transparent huge pages: fewer faults, but the kernel still zeroes the pages (0.548 s,
   5.27 s against glibc's 0.633 / 5.75 s). Needs no package.

All three are read only when a process starts, so :func:`reexec_with_fast_malloc` starts
the same command line again (``os.execve``: same pid, nothing of the first start survives)
with the variable set. Nothing changes where none applies (not Linux, no library and glibc
< 2.35 or THP ``never``), where the environment already chose (``LD_PRELOAD`` names a
malloc, ``GLIBC_TUNABLES`` names ``malloc.hugetlb``), or where ``WMRL_MALLOC=default``
opts out. Children (submitit jobs, subprocesses) inherit the variables. glibc's
``mmap_max=0`` (every block from the heap) did not help (1m 0.620 s: the freed top of the
heap is still trimmed and refaulted), nor do jemalloc's defaults (they return such blocks to
the kernel at once).
"""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import sys
from collections.abc import Mapping, Sequence

__all__ = [
    "MIMALLOC_KEEP",
    "OPT_OUT",
    "TUNABLE",
    "fast_malloc_env",
    "glibc_env",
    "mimalloc_library",
    "reexec_with_fast_malloc",
]

TUNABLE = "glibc.malloc.hugetlb=1"
OPT_OUT = "WMRL_MALLOC"  # =default keeps glibc's defaults
# tcmalloc reports every allocation over 1 GiB on stderr (large models make one per call)
QUIET = {"TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": str(1 << 40)}
# mimalloc keeps freed pages and maps no huge pages (module docstring, 1.)
MIMALLOC_KEEP = {"MIMALLOC_PURGE_DELAY": "-1", "MIMALLOC_ALLOW_THP": "0"}
_TCMALLOC = (
    "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib64/libtcmalloc_minimal.so.4",
    "/usr/lib/libtcmalloc_minimal.so.4",
)
_THP = pathlib.Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _glibc_version() -> tuple[int, int] | None:
    try:
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        return None
    major, minor = version.split(".")[:2]
    return (int(major), int(minor)) if name == "glibc" else None


def _thp_mode() -> str | None:
    """The kernel's transparent-huge-page mode (the bracketed word), or None if unknown."""
    try:
        text = _THP.read_text()
    except OSError:
        return None
    return text[text.find("[") + 1 : text.find("]")] if "[" in text else None


def mimalloc_library() -> str | None:
    """The ``libmimalloc.so`` of the ``cmeel-mimalloc`` wheel (a dependency of this package), or
    None where that wheel is not installed."""
    try:
        dist = importlib.metadata.distribution("cmeel-mimalloc")
    except importlib.metadata.PackageNotFoundError:
        return None
    libs = sorted(str(f) for f in dist.files or () if f.name.startswith("libmimalloc.so"))
    paths = [str(dist.locate_file(f)) for f in libs]
    return next((p for p in paths if os.path.exists(p)), None)


def _tcmalloc(candidates: Sequence[str] = _TCMALLOC) -> str | None:
    return next((p for p in candidates if os.path.exists(p)), None)


def _preload(env: Mapping[str, str], library: str) -> str:
    preload = env.get("LD_PRELOAD", "")
    return f"{library}:{preload}" if preload else library


def fast_malloc_env(
    env: Mapping[str, str],
    platform: str = sys.platform,
    mimalloc: str | None = "auto",
    tcmalloc: str | None = "auto",
    glibc: tuple[int, int] | None = None,
    thp: str | None = None,
) -> dict[str, str] | None:
    """``env`` with mimalloc or else tcmalloc preloaded or, failing both, :data:`TUNABLE`
    added to ``GLIBC_TUNABLES``; None when nothing should change (module docstring).
    ``mimalloc`` / ``tcmalloc`` (a library path or None), ``glibc`` and ``thp`` default to
    this machine's."""
    if env.get(OPT_OUT) == "default" or platform != "linux":
        return None
    if "malloc" in env.get("LD_PRELOAD", "") or "malloc.hugetlb" in env.get("GLIBC_TUNABLES", ""):
        return None
    mimalloc = mimalloc_library() if mimalloc == "auto" else mimalloc
    if mimalloc is not None:  # a mimalloc option the user set is kept
        return {**MIMALLOC_KEEP, **env, "LD_PRELOAD": _preload(env, mimalloc)}
    tcmalloc = _tcmalloc() if tcmalloc == "auto" else tcmalloc
    if tcmalloc is not None:
        return {**env, **QUIET, "LD_PRELOAD": _preload(env, tcmalloc)}
    glibc = _glibc_version() if glibc is None else glibc
    thp = _thp_mode() if thp is None else thp
    if glibc is None or glibc < (2, 35) or thp == "never":
        return None
    current = env.get("GLIBC_TUNABLES", "")
    return {**env, "GLIBC_TUNABLES": f"{current}:{TUNABLE}" if current else TUNABLE}


def glibc_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without any allocator setting of :func:`fast_malloc_env`'s kinds: a process
    started with it runs on glibc's defaults (a reference run as its own launcher runs it)."""
    drop = (*QUIET, *MIMALLOC_KEEP, "LD_PRELOAD", "GLIBC_TUNABLES")
    out = {k: v for k, v in env.items() if k not in drop}
    preload = [p for p in env.get("LD_PRELOAD", "").split(":") if p and "malloc" not in p]
    tunables = [t for t in env.get("GLIBC_TUNABLES", "").split(":") if t and "hugetlb" not in t]
    return (
        out
        | ({"LD_PRELOAD": ":".join(preload)} if preload else {})
        | ({"GLIBC_TUNABLES": ":".join(tunables)} if tunables else {})
    )


def reexec_with_fast_malloc() -> None:
    """Re-execute this process's command line (``sys.orig_argv``) with
    :func:`fast_malloc_env`, or return when it is None. Call it first thing, before any work
    worth keeping."""
    env = fast_malloc_env(os.environ)
    if env is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, env)
