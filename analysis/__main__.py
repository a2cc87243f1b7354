"""``python -m analysis``: the analysis package's command line.

    python -m analysis RUN_DIR [RUN_DIR ...] [--compare paper]   # analysis.cli
    python -m analysis paper-curves build|check --agent NAME --src reference_results

The first form is the report (learning curves, runs overlaid, runs judged against the
papers: :mod:`analysis.cli`); ``paper-curves`` rebuilds or checks the published curves'
tables (:mod:`analysis.paper_curves`; docs/VALIDATION.md).
"""

import sys
from collections.abc import Sequence

PAPER_CURVES = "paper-curves"


def main(argv: Sequence[str] | None = None) -> int:
    """The exit status of the report, or of ``paper-curves`` when it is the first word."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [PAPER_CURVES]:
        from analysis.paper_curves import main as paper_curves

        return paper_curves(argv[1:])
    from analysis.cli import main as report

    return report(argv)


if __name__ == "__main__":
    sys.exit(main())
