"""Analysis of finished (or running) runs, outside the run loop: learning curves, runs
overlaid, the published curves and the acceptance rule, the learning-check judge.

    python -m analysis RUN_DIR                  # learning curves (analysis.cli)
    python -m analysis RUN_A RUN_B              # runs overlaid (analysis.overlay)
    python -m analysis RUN_DIR --compare paper  # against the papers (analysis.compare)
    python -m analysis paper-curves check --agent NAME --src reference_results

Modules: :mod:`analysis.report` (a run's curves and its figure), :mod:`analysis.plotting`
(the figures), :mod:`analysis.levels` (a panel's levels), :mod:`analysis.overlay`,
:mod:`analysis.paper_curves` (the published curves' tables), :mod:`analysis.paper_line`
(the paper's curve as logger rows: the launcher's default ``reference_rows`` hook),
:mod:`analysis.acceptance` (the rule), :mod:`analysis.compare` (runs judged against the
papers), :mod:`analysis.learning_check` (the CPU learning checks' judge), :mod:`analysis.cli`
(the report's command line), :mod:`analysis.__main__` (``python -m analysis``, :func:`main`).

This package reads run directories (``run.json``, ``metrics/``) through the launcher's
run-directory module (:mod:`launcher.store.rundir`, the one place that names their files);
the launcher imports none of it (tested, tests/test_import_graph.py): its run loop reaches
the paper line and the end-of-run figure through its ``callbacks`` hooks, by import path.
"""

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m analysis ARGS``'s exit status (:mod:`analysis.__main__`)."""
    from analysis.__main__ import main as run

    return run(argv)
