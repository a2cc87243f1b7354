"""``python -m launcher.report RUN_DIR [RUN_DIR ...] [--compare paper]``: the entry point of
the report, which lives in the analysis package (:mod:`analysis.cli`; docs/launcher.md).
The run loop does not import this module."""

import sys

from analysis.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
