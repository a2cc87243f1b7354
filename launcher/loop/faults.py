"""Fault injection for the reliability tests: ``WMRL_KILL_AT=<point>:<chunk>``.

The run loop calls :func:`point` at named places; when the variable names that place
and chunk, the process kills itself with SIGKILL there (no cleanup, no flush: what a
power cut or ``kill -9`` leaves). Unset, a call costs one environment lookup.

Points, in the order a chunk reaches them: ``trained`` (state and metrics computed,
nothing written), ``metrics`` (the first seed's row written, the others not),
``evaluated`` (the eval rows written), ``saving`` (a checkpoint save started, not
finished), ``saved`` (the checkpoint complete).
"""

from __future__ import annotations

import os
import signal

VARIABLE = "WMRL_KILL_AT"


def point(name: str, chunk: int) -> None:
    """SIGKILL this process if ``WMRL_KILL_AT`` is ``name:chunk``."""
    target = os.environ.get(VARIABLE)
    if target and target == f"{name}:{chunk}":
        os.kill(os.getpid(), signal.SIGKILL)
