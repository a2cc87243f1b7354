"""Carry a long run's directory from one session's machine to the next through the repo.

A CPU learning check (issue 10) can need more hours than one session has, and the machine
it ran on may not be handed to the next session. The launcher resumes a run from its run
dir; this script packs the part of a run dir that a resume needs into one compressed file
that can be committed, and unpacks it into a fresh run dir on the next machine:

    .venv/bin/python benchmarks/carry_run.py pack /work/lc/dv3_pendulum \
        benchmarks/results/carry/dv3_pendulum.tar.gz
    .venv/bin/python benchmarks/carry_run.py unpack \
        benchmarks/results/carry/dv3_pendulum.tar.gz /work/lc/dv3_pendulum

then relaunch the run's own command with ``hydra.run.dir=/work/lc/dv3_pendulum``.

Packed: ``run.json``, ``launches.jsonl``, ``wandb_ids.json``, ``launcher.log``,
``metrics/`` and the newest checkpoint only (``checkpoints/<step>/``, the highest step).
Left out: older checkpoints, ``corrupt_checkpoints/``, ``plots/`` (redrawn by the next
chunk) and ``wandb/`` (offline W&B files; each seed's id in ``wandb_ids.json`` lets the
next launch continue the same W&B run). A packed file is deleted from the repo once the run
it carries has finished; it is a hand-over, not an archive.

Written by hand (the standard library's tarfile) because the selection, newest checkpoint
only, is specific to the launcher's layout (``launcher/rundir.py``).
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
    else:
        unpack(args.archive, args.run_dir)
        print(f"unpacked {args.archive} -> {args.run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
