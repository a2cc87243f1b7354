"""``python -m launcher [-m] [group=option ...] [key=value ...]``: see :mod:`launcher.cli`."""

import sys

from launcher.loop.malloc import reexec_with_fast_malloc

if __name__ == "__main__":
    reexec_with_fast_malloc()  # before anything allocates: see launcher/loop/malloc.py
    from launcher.cli import main

    sys.exit(main())
