"""Test-wide JAX settings: float32, highest matmul precision, persistent compile cache.

The compilation cache is shared by the xdist workers of one run (and by later runs
on the same checkout), so a function compiled by one test module is loaded, not
recompiled, by the next.
"""

import os
import pathlib

os.environ.setdefault("MUJOCO_GL", "disable")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402

_CACHE = pathlib.Path(
    os.environ.get("JAX_COMPILATION_CACHE_DIR", pathlib.Path(__file__).parents[1] / ".cache/jax")
)
jax.config.update("jax_compilation_cache_dir", str(_CACHE))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
jax.config.update("jax_default_matmul_precision", "highest")
jax.config.update("jax_enable_x64", False)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` first (a stable sort, the same in every xdist worker): the
    workers then end the run on short tests, not one of them alone on a multi-minute smoke
    (a clean-clone run ended with 15 min of two such tests after the rest were done)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
