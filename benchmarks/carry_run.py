"""Carry a run's directory to another machine through the repo: the last resort, never the
standing workflow.

The launcher resumes a run from its run dir (the same command again), so a long run should not
need carrying at all. In order of preference:

1. Make the run fit one working session and resume it with the launcher on the same machine
   (shorter chunks, the CPU-sized protocol, the speed work that cuts its cost).
2. Carry the checkpoint as a W&B artifact: the ``logger`` options upload the newest checkpoint
   at each save and resume a run from an artifact reference (docs/launcher.md).
3. Only where neither is possible, this script: it packs the part of a run dir that a resume
   needs into one compressed file, committed on its own, and the next commit removes it (the
   tracked-size test, tests/test_repo_hygiene.py, fails while it is there: a checkpoint is tens
   of MB). State the size it printed in the closing note of the work that carried it:

       .venv/bin/python benchmarks/carry_run.py pack RUN_DIR results/carry/RUN.tar.gz
       .venv/bin/python benchmarks/carry_run.py unpack results/carry/RUN.tar.gz RUN_DIR

   then relaunch the run's own command with ``hydra.run.dir=RUN_DIR`` on the new machine.

Packed: ``run.json``, ``launches.jsonl``, ``wandb_ids.json``, ``launcher.log``,
``metrics/`` and the newest checkpoint only (``checkpoints/<step>/``, the highest step).
Left out: older checkpoints, ``corrupt_checkpoints/``, ``plots/`` (redrawn by the next
chunk) and ``wandb/`` (offline W&B files; each seed's id in ``wandb_ids.json`` lets the
next launch continue the same W&B run). A packed file is a hand-over, not an archive.

Written by hand (the standard library's tarfile) because the selection, newest checkpoint
only, is specific to the launcher's layout (``launcher/store/rundir.py``).
"""

from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

KEEP_FILES = ("run.json", "launches.jsonl", "wandb_ids.json", "launcher.log")
KEEP_DIRS = ("metrics",)


def newest_checkpoint(run_dir: Path) -> Path | None:
    """The ``checkpoints/<step>`` folder with the highest integer step, or None."""
    ckpt = run_dir / "checkpoints"
    steps = [p for p in ckpt.iterdir() if p.is_dir() and p.name.isdigit()] if ckpt.is_dir() else []
    return max(steps, key=lambda p: int(p.name), default=None)


def members(run_dir: Path) -> list[Path]:
    """The paths (relative to ``run_dir``) that a resume needs, in a stable order."""
    out = [Path(name) for name in KEEP_FILES if (run_dir / name).is_file()]
    out += [Path(name) for name in KEEP_DIRS if (run_dir / name).is_dir()]
    newest = newest_checkpoint(run_dir)
    if newest is not None:
        out.append(newest.relative_to(run_dir))
    return out


def pack(run_dir: Path, out: Path) -> list[Path]:
    """Write ``members(run_dir)`` to the gzip tar ``out`` (arcnames relative to the run dir)."""
    if not (run_dir / "run.json").is_file():
        raise SystemExit(f"error: {run_dir} has no run.json; give the run dir of a launch")
    chosen = members(run_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        for rel in chosen:
            tar.add(run_dir / rel, arcname=str(rel))
    tmp.replace(out)
    return chosen


def unpack(archive: Path, run_dir: Path) -> None:
    """Extract ``archive`` into ``run_dir``, which must not hold a run already."""
    if run_dir.exists() and any(run_dir.iterdir()):
        raise SystemExit(
            f"error: {run_dir} is not empty; unpack into a new folder (nothing there is touched)"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(run_dir, filter="data")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="run dir -> one .tar.gz with the newest checkpoint")
    p.add_argument("run_dir", type=Path)
    p.add_argument("out", type=Path)
    u = sub.add_parser("unpack", help=".tar.gz -> a new run dir")
    u.add_argument("archive", type=Path)
    u.add_argument("run_dir", type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "pack":
        chosen = pack(args.run_dir, args.out)
        size = args.out.stat().st_size / 2**20
        print(f"packed {', '.join(map(str, chosen))} -> {args.out} ({size:.1f} MiB)")
        print("a last-resort carry: commit it alone, remove it in the next commit, state its size")
    else:
        unpack(args.archive, args.run_dir)
        print(f"unpacked {args.archive} -> {args.run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
