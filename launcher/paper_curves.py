"""``python -m launcher.paper_curves build|check --agent NAME --src reference_results``: the
entry point of the paper tables' rebuild, which lives in the analysis package
(:mod:`analysis.paper_curves`; docs/VALIDATION.md). The run loop does not import this
module."""

import sys

from analysis.paper_curves import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
