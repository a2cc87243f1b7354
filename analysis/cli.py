"""``python -m analysis RUN_DIR [RUN_DIR ...] [--compare paper]``: the report's command
line (``python -m analysis``, :mod:`analysis.__main__`; ``python -m launcher.report`` is
its old spelling).

One run: its learning curves (:mod:`analysis.report`) and, if it logged a Crafter score,
its achievements' table (printed) and the score's figure (:mod:`analysis.achievements`);
several runs, or a sweep's directory: the runs overlaid (:mod:`analysis.overlay`);
``--compare paper``: the runs judged against the published curves (:mod:`analysis.compare`).
Exit status 2 with one ``error:`` line for bad input (a missing directory, metrics or
reference).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from analysis import achievements, report
from analysis.compare import compare
from analysis.overlay import expand_runs, plot_overlay
from launcher.errors import ConfigError


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry; returns the exit status (0, or 2 after printing ``error: ...``)."""
    parser = argparse.ArgumentParser(prog="python -m analysis", description=__doc__)
    parser.add_argument(
        "run_dir",
        type=Path,
        nargs="+",
        help="a run directory (runs/<agent>-<env>-<protocol>-<hash>); several, or sweep "
        "directories: the runs overlaid, a row of panels per env (analysis.overlay)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="PNG path (default: in RUN_DIR; overlay: <common parent>/plots/overlay_<hash>.png)",
    )
    parser.add_argument(
        "--x", choices=report.X_AXES, default="env_frames", help="x axis (default: env_frames)"
    )
    parser.add_argument(
        "--reference", type=Path, default=None, help=f"reference curve CSV ({report.REF_EXPECTED})"
    )
    parser.add_argument("--label", default=None, help="reference legend (default: file stem)")
    parser.add_argument(
        "--compare",
        choices=["paper"],
        default=None,
        help="judge against the published curves (analysis.compare; --out: a folder)",
    )
    args = parser.parse_args(argv)
    try:
        if args.compare == "paper":
            result = compare(args.run_dir, args.out)
            print(result["markdown"], end="")
            for path in result["files"]:
                print(path)
            return 0
        runs = expand_runs(args.run_dir)
        kw = {"x": args.x, "reference": args.reference, "label": args.label}
        path = (
            report.plot_run(runs[0], args.out, **kw)
            if len(runs) == 1
            else plot_overlay(runs, args.out, **kw)
        )
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    table = achievements.achievement_table(runs[0]) if len(runs) == 1 else None
    if table is not None:  # a run with a Crafter score: its table, figure and file
        print(table)
        print(*achievements.paths(runs[0]), sep="\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
