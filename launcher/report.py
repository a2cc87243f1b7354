"""``python -m launcher.report ARGS``: the old spelling of ``python -m analysis ARGS`` (the
report lives in the analysis package, :mod:`analysis.cli`; docs/launcher.md).

It runs the analysis package by name and imports nothing from it, so the launcher and
analysis form no package cycle (tests/test_import_graph.py); the run loop does not
import this module."""

import runpy

if __name__ == "__main__":
    runpy.run_module("analysis", run_name="__main__", alter_sys=True)
