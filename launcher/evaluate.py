"""``python -m launcher.evaluate``: the documented entry point of :mod:`launcher.tools.evaluate`."""

import sys

from launcher.tools.evaluate import evaluate_run, main

__all__ = ["evaluate_run", "main"]

if __name__ == "__main__":
    sys.exit(main())
