"""The experiment launcher: Hydra configs -> frozen dataclasses -> seed-vmapped chunked runs.

    python -m launcher env=walker_walk               # the paper protocol (accelerator)
    python -m launcher env=pendulum protocol=quick   # learns on a CPU in minutes
    python -m launcher -m env=pendulum,cartpole_balance protocol=smoke
    python -m launcher --cfg job protocol=quick      # print the composed config
    python -m analysis RUN_DIR                       # learning curves (PNG)
    python -m launcher.evaluate RUN_DIR --episodes 10  # evaluate the latest checkpoint

The launcher names no agent: an agent plugs in by its YAML (``conf/agent/<name>.yaml``,
``entry: package.module:ENTRY``, an :class:`agent_api.AgentEntry`).

Subpackages, one concern each (docs/launcher.md):

* :mod:`launcher.config`: Hydra composition, the config dataclasses and their validation
  into :class:`launcher.config.schema.RunSpec`, the pre-check of a launch or a sweep, the
  guards, the run identity and the CPU budget.
* :mod:`launcher.loop`: the run loop (:mod:`launcher.loop.run`, :mod:`launcher.loop.chunks`),
  the compiled seed program, callbacks, interrupts, fault points, progress, what a launch
  prints, and the process setup (compile cache, allocator).
* :mod:`launcher.store`: what a run keeps on disk: the run directory's format
  (:mod:`launcher.store.rundir`, also read by :mod:`analysis`), checkpoints, the one
  restore path, provenance.
* :mod:`launcher.logger`: where metric rows go (the outputs' protocol,
  :mod:`launcher.logger.loggers`; jsonl, W&B, TensorBoard).
* :mod:`launcher.tools`: commands on a run or a launch: evaluate, export, video, dry run,
  tab completion.

Top level: :mod:`launcher.cli` (Hydra entry, exit status 2 on bad input),
:mod:`launcher.errors`, and the ``python -m`` entry points ``launcher.evaluate`` and
``launcher.export``. The report and the paper tables live in the :mod:`analysis` package
(``python -m analysis``); ``python -m launcher.report`` / ``launcher.paper_curves`` still
run them, by name, without importing analysis. The run loop imports none of it.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

from launcher.errors import ConfigError

__all__ = ["ConfigError"]

# Old module paths (before the subpackages) -> their module now: imports of the old path
# get the same module object (so a monkeypatch through either name is seen by both). For
# scripts written against the flat layout, e.g. a long benchmark that imports lazily while
# the code under it is updated; new code imports the new path.
MOVED = {
    f"launcher.{old}": f"launcher.{new}"
    for old, new in {
        "cache": "loop.cache",
        "cpu_budget": "config.cpu_budget",
        "malloc": "loop.malloc",
        "program": "loop.program",
        "restore": "store.restore",
        "run": "loop.run",
        "rundir": "store.rundir",
    }.items()
}


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of :data:`MOVED` and loads it as the module at its new path."""

    def __init__(self) -> None:
        self.specs: dict[str, importlib.machinery.ModuleSpec] = {}

    def find_spec(self, name, path=None, target=None):
        if name not in MOVED:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        module = importlib.import_module(MOVED[spec.name])  # the module itself
        self.specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        # Already executed under its new name; the import system has just set its
        # __spec__ to the old path's: give it back its own.
        module.__spec__ = self.specs[module.__name__]


# First: an old path must not be found as a file (a stale copy, another checkout's
# editable install) and loaded as a second module.
if not any(isinstance(finder, _Moved) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Moved())
