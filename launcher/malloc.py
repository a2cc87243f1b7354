"""Huge pages for XLA:CPU's per-call buffers: glibc's ``malloc.hugetlb`` tunable.

XLA:CPU allocates every call's temporary buffer (375 MiB for the DreamerV3 1m train step)
with ``malloc``. glibc serves any block over 32 MiB with a fresh ``mmap`` and unmaps it on
``free``, so each call faults every page of it in again: ~97,000 minor faults, 0.14 s of
kernel time in a 0.73 s step (docs/PERFORMANCE.md, "Allocation"). With
``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` (glibc >= 2.35) malloc asks the kernel for
transparent huge pages on those maps, and the faults drop to ~500 per call.

glibc reads its tunables once, at process start, so setting the variable from Python is too
late for the running process: :func:`reexec_with_huge_pages` starts the same command line
again with it set (``os.execve``: same pid, nothing of the first start survives). Nothing
changes where the tunable cannot work (not Linux, not glibc >= 2.35, THP ``never``), where
the variable already names ``malloc.hugetlb``, or where ``WMRL_MALLOC=default`` opts out.
Children (submitit jobs, subprocesses) inherit the variable.

A preloaded tcmalloc removes the faults as well (measured: same step time), but needs a
system package; jemalloc's defaults do not (it returns large blocks at once).
"""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Mapping

__all__ = ["TUNABLE", "huge_page_env", "reexec_with_huge_pages"]

TUNABLE = "glibc.malloc.hugetlb=1"
OPT_OUT = "WMRL_MALLOC"  # =default keeps glibc's defaults
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


def huge_page_env(
    env: Mapping[str, str],
    platform: str = sys.platform,
    glibc: tuple[int, int] | None = None,
    thp: str | None = None,
) -> dict[str, str] | None:
    """``env`` with :data:`TUNABLE` added to ``GLIBC_TUNABLES`` (colon-separated, as glibc
    reads it), or None when nothing should change (module docstring). ``glibc`` / ``thp``
    default to this machine's."""
    glibc = _glibc_version() if glibc is None else glibc
    thp = _thp_mode() if thp is None else thp
    if env.get(OPT_OUT) == "default" or platform != "linux" or thp == "never":
        return None
    if glibc is None or glibc < (2, 35):
        return None
    current = env.get("GLIBC_TUNABLES", "")
    if "malloc.hugetlb" in current:
        return None
    return {**env, "GLIBC_TUNABLES": f"{current}:{TUNABLE}" if current else TUNABLE}


def reexec_with_huge_pages() -> None:
    """Re-execute this process's command line (``sys.orig_argv``) with :func:`huge_page_env`,
    or return when it is None. Call it first thing, before any work worth keeping."""
    env = huge_page_env(os.environ)
    if env is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, env)
