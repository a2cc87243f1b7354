"""Test-wide JAX settings: float32, highest matmul precision, persistent compile cache,
XLA's fast-compile options for every program.

The compilation cache is shared by the xdist workers of one run (and by later runs
on the same checkout), so a function compiled by one test module is loaded, not
recompiled, by the next.

Almost every test program compiles far longer than it runs, so every program compiles
with ``launcher.loop.program.FAST_COMPILE`` (LLVM -O0, no MLIR fusion emitters), set in
``XLA_FLAGS`` before the CPU backend starts and inherited by the launcher subprocesses:
compile time drops by half or more (a clean-clone TD-MPC2 module setup 83 s -> 43 s with
-O0 alone), run time grows up to ~2x. The few runtime-bound programs (the TD-MPC2 probes:
a 4,000-update burst) compile with ``launcher.loop.program.FULL_OPTIMIZATION``; a per-program
``compiler_options`` overrides the flags. Numbers differ by float rounding only.
"""

import os
import pathlib
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402  (XLA_FLAGS is read when the backend starts, not at import)
import pytest  # noqa: E402

from envs.pixels import default_mujoco_gl  # noqa: E402

# OpenGL for the image observations of MuJoCo envs (tests/envs/test_env_pixels.py), chosen before
# anything imports mujoco: osmesa on a CPU box with libOSMesa (`make install` installs it),
# egl with an NVIDIA driver, disable where no library is found (those tests then skip).
os.environ.setdefault("MUJOCO_GL", default_mujoco_gl())

from launcher.loop.program import FAST_COMPILE, xla_flags  # noqa: E402

os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {xla_flags(FAST_COMPILE)}".strip()

_CACHE = pathlib.Path(
    os.environ.get("JAX_COMPILATION_CACHE_DIR", pathlib.Path(__file__).parents[1] / ".cache/jax")
)
jax.config.update("jax_compilation_cache_dir", str(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
jax.config.update("jax_default_matmul_precision", "highest")
jax.config.update("jax_enable_x64", False)

# absl's log handler closes the stream it was created with whenever logging is set up
# anew (Hydra does, in-process, in a multirun's main process) unless that stream is the
# current sys.stderr; created under pytest's capture, it would close the capture buffer.
from absl import logging as absl_logging  # noqa: E402

absl_logging.get_absl_handler().python_handler.setStream(sys.__stderr__)

# WMRL_TEST_TIMING=FILE: a line per test phase with its JAX compile and lowering seconds
# (tests/timing_log.py; docs/PERFORMANCE.md "Test suite time").
if os.environ.get("WMRL_TEST_TIMING"):
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    pytest_plugins = ["timing_log"]


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    """Two orderings for ``make test`` (``-n 2 --dist loadgroup``):

    * the tests of a module that use one of its module-scoped fixtures go to one xdist
      worker, so the fixture (often a compiled multi-minute run) is built once per run;
    * tests marked ``slow`` first (a stable sort, the same in every worker): the workers
      then end on short tests, not one of them alone on a multi-minute smoke (a clean-clone
      run ended with 15 min of two such tests after the rest were done)."""
    for item in items:
        defs = getattr(item, "_fixtureinfo", None)
        scoped = defs and any(
            d.scope == "module" for ds in defs.name2fixturedefs.values() for d in ds
        )
        if scoped:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(trylast=True)  # after fixture teardown, inside xdist's reporting wrapper
def pytest_sessionfinish(session):
    """Leave an xdist worker little to collect once it reports its tests done.

    After the last test, xdist tells a worker to stop and execnet sends it SIGINT if it is
    still busy 5 s later. A worker that has run a few hundred JAX programs holds millions of
    objects, and pytest's unraisable-exception cleanup runs five full ``gc.collect()``
    passes over them; the SIGINT then lands in JAX's gc callback (``_xla_gc_callback``) and
    prints a ``KeyboardInterrupt`` traceback after ``[100%]``. Dropping the compiled
    programs and freezing what is left into the permanent generation makes those passes
    near-instant."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import gc

        jax.clear_caches()
        gc.collect()
        gc.freeze()
