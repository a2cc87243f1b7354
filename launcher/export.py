"""``python -m launcher.export``: the documented entry point of :mod:`launcher.tools.export`."""

import sys

from launcher.tools.export import export_run, main

__all__ = ["export_run", "main"]

if __name__ == "__main__":
    sys.exit(main())
