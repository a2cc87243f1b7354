"""Analysis of finished (or running) runs, outside the run loop: learning curves, runs
overlaid, the published curves and the acceptance rule, the learning-check judge.

    python -m launcher.report RUN_DIR                  # learning curves (analysis.cli)
    python -m launcher.report RUN_A RUN_B              # runs overlaid (analysis.overlay)
    python -m launcher.report RUN_DIR --compare paper  # against the papers (analysis.compare)
    python -m launcher.paper_curves check --agent NAME --src reference_results

Modules: :mod:`analysis.report` (a run's curves and its figure), :mod:`analysis.plotting`
(the figures), :mod:`analysis.levels` (a panel's levels), :mod:`analysis.overlay`,
:mod:`analysis.paper_curves` (the published curves' tables), :mod:`analysis.paper_line`
(the paper's curve as logger rows: the launcher's default ``reference_rows`` hook),
:mod:`analysis.acceptance` (the rule), :mod:`analysis.compare` (runs judged against the
papers), :mod:`analysis.learning_check` (the CPU learning checks' judge), :mod:`analysis.cli`
(``python -m launcher.report``).

This package reads run directories (``run.json``, ``metrics/``) and imports the
launcher's readers; the launcher's run loop imports none of it (tested): it reaches the
paper line and the end-of-run figure through its ``callbacks`` hooks, by import path.
"""
