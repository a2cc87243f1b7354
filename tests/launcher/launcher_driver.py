"""Subprocess driver for the launcher tests: one launch of the fake agent in RUN_DIR.

    python launcher_driver.py RUN_DIR '{"protocol": {...}, "stop_after_chunks": 2}'

The JSON updates :func:`launcher_fakes.fake_config` section by section. Prints one JSON
line: chunks done, the chunk resumed after, devices, compile counts and the final
state's fingerprint.
"""

from __future__ import annotations

import json
import sys

from launcher_fakes import fake_config, make_fake_env

from launcher.config.validate import resolve
from launcher.loop.run import run
from launcher.store.checkpoint import fingerprint


def main() -> None:
    run_dir, overrides = sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    spec = resolve(fake_config(**overrides))
    result = run(spec, run_dir, make_env=make_fake_env, plot=False)
    out = {
        "chunks_done": result.chunks_done,
        "resumed_from": result.resumed_from,
        "stopped_early": result.stopped_early,
        "n_devices": result.n_devices,
        "compiles": result.compiles,
        "fingerprint": fingerprint(result.state),
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
