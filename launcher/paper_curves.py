"""``python -m launcher.paper_curves build|check ...``: the old spelling of ``python -m
analysis paper-curves build|check ...`` (:mod:`analysis.paper_curves`; docs/VALIDATION.md).

It runs the analysis package by name and imports nothing from it (no launcher <->
analysis package cycle, tests/test_import_graph.py); the run loop does not import this
module."""

import runpy
import sys

if __name__ == "__main__":
    sys.argv.insert(1, "paper-curves")
    runpy.run_module("analysis", run_name="__main__", alter_sys=True)
