"""An allocator that keeps XLA:CPU's per-call buffers mapped: tcmalloc, else huge pages.

XLA:CPU allocates every call's temporary buffer (hundreds of MiB for a train step of the
agents here) with ``malloc``. glibc serves any block over 32 MiB with a fresh ``mmap`` and
unmaps it on ``free``, so each call faults every page of it in again and the kernel zeroes
it: for a 400 MiB buffer ~97,000 minor faults, 0.14 s of kernel time in a 0.73 s step
(docs/PERFORMANCE.md, "What changed (issue 28)"). Two remedies, best first:

1. tcmalloc (``LD_PRELOAD``, Debian/Ubuntu package ``libtcmalloc-minimal4``) keeps freed
   blocks for reuse: no faults and no kernel time at all (a 5.88 s step: 5.04 s).
2. glibc >= 2.35 with ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` maps those blocks with
   transparent huge pages: ~500 faults per call, but the kernel still zeroes the pages
   (0.73 -> 0.65 s; 5.88 -> 5.64 s). Needs no package.

Both are read only when a process starts, so :func:`reexec_with_fast_malloc` starts the
same command line again (``os.execve``: same pid, nothing of the first start survives) with
the variable set. Nothing changes where neither applies (not Linux, no tcmalloc and glibc
< 2.35 or THP ``never``), where the environment already chose (``LD_PRELOAD`` names a
malloc, ``GLIBC_TUNABLES`` names ``malloc.hugetlb``), or where ``WMRL_MALLOC=default``
opts out. Children (submitit jobs, subprocesses) inherit the variables. jemalloc's defaults
do not help (measured: it returns such blocks to the kernel at once).
"""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Mapping, Sequence

__all__ = ["OPT_OUT", "TUNABLE", "fast_malloc_env", "reexec_with_fast_malloc"]

TUNABLE = "glibc.malloc.hugetlb=1"
OPT_OUT = "WMRL_MALLOC"  # =default keeps glibc's defaults
# tcmalloc reports every allocation over 1 GiB on stderr (large models make one per call)
QUIET = {"TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": str(1 << 40)}
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


def _tcmalloc(candidates: Sequence[str] = _TCMALLOC) -> str | None:
    return next((p for p in candidates if os.path.exists(p)), None)


def fast_malloc_env(
    env: Mapping[str, str],
    platform: str = sys.platform,
    tcmalloc: str | None = "auto",
    glibc: tuple[int, int] | None = None,
    thp: str | None = None,
) -> dict[str, str] | None:
    """``env`` with tcmalloc preloaded or, failing that, :data:`TUNABLE` added to
    ``GLIBC_TUNABLES``; None when nothing should change (module docstring). ``tcmalloc``
    (a library path or None), ``glibc`` and ``thp`` default to this machine's."""
    if env.get(OPT_OUT) == "default" or platform != "linux":
        return None
    if "malloc" in env.get("LD_PRELOAD", "") or "malloc.hugetlb" in env.get("GLIBC_TUNABLES", ""):
        return None
    tcmalloc = _tcmalloc() if tcmalloc == "auto" else tcmalloc
    if tcmalloc is not None:
        preload = env.get("LD_PRELOAD", "")
        return {**env, **QUIET, "LD_PRELOAD": f"{tcmalloc}:{preload}" if preload else tcmalloc}
    glibc = _glibc_version() if glibc is None else glibc
    thp = _thp_mode() if thp is None else thp
    if glibc is None or glibc < (2, 35) or thp == "never":
        return None
    current = env.get("GLIBC_TUNABLES", "")
    return {**env, "GLIBC_TUNABLES": f"{current}:{TUNABLE}" if current else TUNABLE}


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
