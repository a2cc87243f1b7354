"""Ctrl-C and ``sys.exit`` in disguise: what a host callback hands back through JAX.

A KeyboardInterrupt or SystemExit raised while a jitted call runs a host callback
(``jax.debug.callback``, ``io_callback``) comes back as a ``JaxRuntimeError``; the CLI
turns them back into what they were (one line and exit 130; submitit's requeue exit).
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any


def interrupted(err: BaseException | None) -> bool:
    """Whether ``err`` is a Ctrl-C, also in disguise: a KeyboardInterrupt raised while
    a jitted call runs a host callback (``jax.debug.callback``, ``io_callback``) comes
    back as a ``JaxRuntimeError`` whose message ends with the callback's traceback."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, KeyboardInterrupt):
            return True
        if type(err).__name__ == "JaxRuntimeError":
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            if lines and lines[-1].startswith("KeyboardInterrupt"):
                return True
        err = err.__cause__ or err.__context__
    return False


# JAX logs, with its traceback, whatever a host callback raises before handing it back
# (jax.debug.callback, pure_callback, io_callback). A Ctrl-C (or a sys.exit) landing there
# is reported by main() in one line instead.
CALLBACK_LOGGERS = ("jax._src.debugging", "jax._src.callback")


def _not_an_interrupt(record: logging.LogRecord) -> bool:
    exc = record.exc_info[1] if record.exc_info else None
    return exc is None or isinstance(exc, Exception)  # drops KeyboardInterrupt, SystemExit


def quiet_callback_interrupts() -> None:
    for name in CALLBACK_LOGGERS:
        logging.getLogger(name).addFilter(_not_an_interrupt)  # idempotent


def callback_exit(err: BaseException | None) -> SystemExit | None:
    """A ``sys.exit`` in disguise: submitit's preemption / timeout handler (SIGUSR2 on
    submitit_local, Slurm's signal) exits with the requeue status from wherever the main
    thread is; inside a jitted call's host callback, JAX hands it back as a
    ``JaxRuntimeError`` whose message ends with ``SystemExit: <code>``. The exit to
    re-raise, or None."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if type(err).__name__ == "JaxRuntimeError":
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            last = lines[-1] if lines else ""
            if last == "SystemExit" or last.startswith("SystemExit:"):
                code = last.partition(":")[2].strip()
                return SystemExit(int(code) if code.lstrip("-").isdigit() else code or None)
        err = err.__cause__ or err.__context__
    return None


class CtrlC:
    """Ctrl-C that cannot be lost: while entered (main thread only), SIGINT raises
    KeyboardInterrupt as Python's default handler does and also records that it came.
    A raise can land where Python swallows it (a ``__del__``, a weakref or gc callback
    running when the main thread picks the signal up: "Exception ignored in ..."); the
    run loop calls :meth:`check` after each train call, which raises it again, so the
    run stops at that chunk's end at the latest, before its checkpoint. Elsewhere (a
    worker thread) it does nothing, and a process started with SIGINT ignored (a
    background job of a non-interactive shell) keeps ignoring it, as Python does."""

    def __init__(self) -> None:
        self.seen = False
        self._previous: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        self.seen = True
        raise KeyboardInterrupt

    def __enter__(self) -> CtrlC:
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def check(self) -> None:
        if self.seen:
            raise KeyboardInterrupt
