"""Hydra's basic sweeper with the launcher's all-jobs pre-check in front of it.

Hydra accepts sweeper classes only from the ``hydra_plugins`` namespace, so the class
lives here; its jobs are :mod:`launcher.config.sweeper`'s, what it checks and prints is
:func:`launcher.config.precheck.precheck_sweep`.
"""

from __future__ import annotations

from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper


class PrecheckSweeper(BasicSweeper):
    """The basic sweeper (same ``params``, ``max_batch_size``, job order and launcher
    hand-off) that composes and checks every job before it launches any.

    A bad job raises :class:`launcher.errors.ConfigError` (``python -m launcher`` prints
    one ``error:`` line, exit 2) before the sweep directory exists; ``+dry_run=true``
    prints the plan and launches nothing.
    """

    def sweep(self, arguments: list[str]) -> Any:
        from launcher.config.compose import normalize
        from launcher.config.precheck import precheck_sweep
        from launcher.config.sweeper import compose_jobs, sweep_jobs

        assert self.hydra_context is not None and self.config is not None
        arguments = normalize(arguments)  # 1e6 for an int field (launcher.config.compose.normalize)
        loader = self.hydra_context.config_loader
        batches = sweep_jobs(self.params, arguments, self.max_batch_size, loader)
        jobs = [list(job) for batch in batches for job in batch]
        if not precheck_sweep(jobs, compose_jobs(loader, self.config, jobs)):
            return []
        return super().sweep(arguments)
