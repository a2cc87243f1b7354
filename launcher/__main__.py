"""``python -m launcher [-m] [group=option ...] [key=value ...]``: see :mod:`launcher.cli`."""

import sys

from launcher.cli import main

if __name__ == "__main__":
    sys.exit(main())
