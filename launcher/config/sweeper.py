"""A multirun's jobs and their all-jobs pre-check, on Hydra's own sweep splitting.

``python -m launcher -m ...`` runs Hydra's basic sweeper extended by
:class:`hydra_plugins.wmrl_sweeper.precheck_sweeper.PrecheckSweeper`
(``conf/hydra/sweeper/launcher.yaml``). Its ``sweep()`` takes the job batches from the
basic sweeper's own splitting (:func:`sweep_jobs`), composes every job
(:func:`compose_jobs`) and checks them all (:func:`launcher.config.precheck.precheck_sweep`: keys,
groups, bounds, env facts, run dirs, the CPU budget) before it hands the batches to the
configured launcher (basic, submitit, ...). One bad job refuses the whole sweep before
anything is created; ``+dry_run=true`` prints the plan and launches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from launcher.config.structured import hydra_message, message
from launcher.errors import ConfigError


def sweep_jobs(
    params: Mapping[str, str] | None,
    arguments: Sequence[str],
    max_batch_size: int | None = None,
    config_loader: Any = None,
) -> list[list[list[str]]]:
    """The basic sweeper's job batches for ``hydra.sweeper.params`` and the command
    line's ``arguments`` (Hydra's own product and order: a command-line key replaces a
    params one). Each batch is a list of jobs, each job its override list."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    texts = [f"{key}={value}" for key, value in (params or {}).items()] + list(arguments)
    try:
        overrides = OverridesParser.create(config_loader=config_loader).parse_overrides(texts)
        return BasicSweeper.split_arguments(overrides, max_batch_size)
    except Exception as err:  # Hydra's parse / sweep-type errors
        raise ConfigError(f"cannot expand the sweep ({hydra_message(err)})") from None


def compose_jobs(config_loader: Any, master: Any, jobs: Sequence[Sequence[str]]) -> list[Any]:
    """Each job's composed config (hydra node included), as the launcher will compose it."""
    configs = []
    for number, job in enumerate(jobs):
        try:
            configs.append(
                config_loader.load_sweep_config(master_config=master, sweep_overrides=list(job))
            )
        except Exception as err:  # Hydra / OmegaConf composition errors
            raise ConfigError(f"{message(err)} {job_label(number, job)}") from None
    return configs


def job_label(number: int, job: Sequence[str]) -> str:
    """How an error names the sweep job it is about."""
    return f"[sweep job #{number}: {' '.join(o for o in job if not o.startswith('hydra.'))}]"
