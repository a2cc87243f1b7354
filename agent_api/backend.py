"""The one seam for code that lays a computation out differently on CPU and on accelerators
(docs/design.md §2.6).

Several programs pick between two layouts of the same maths: a batched one (``jax.vmap``,
merged matmuls) that accelerators want, and a loop of unbatched programs (``lax.map`` or a
Python loop at trace time) that XLA:CPU runs faster. Every such site asks
:func:`batched_layout`, with an explicit override that reaches it as a plain argument or a
constructor field (None: the backend decides), so the tests run both sides on CPU.

It lives in ``agent_api`` (not ``agents/common``) because the launcher asks it too and
imports nothing under ``agents/``. JAX is imported only when a function is called: the
package imports no JAX (``agent_api/__init__.py``).
"""

from __future__ import annotations


def accelerated(backend: str | None = None) -> bool:
    """Whether ``backend`` (a JAX platform name; default ``jax.default_backend()``) is an
    accelerator, i.e. anything but ``"cpu"``."""
    if backend is None:
        import jax

        backend = jax.default_backend()
    return backend != "cpu"


def batched_layout(batched: bool | None = None) -> bool:
    """True: the batched layout (``vmap``); False: a loop of unbatched programs.

    ``batched`` forces a side; None (every default) follows the backend, batched on
    accelerators and looped on CPU. Read at trace time, like the checks it replaces.
    """
    return accelerated() if batched is None else bool(batched)
