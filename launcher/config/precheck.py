"""The pre-check of ``python -m launcher [-m] OVERRIDES``: every job validated before
Hydra runs anything (group options, keys, types, values, env facts, the run
directory's path, the CPU time budget, sweeps), one :class:`ConfigError` on failure.

A ``-m`` sweep's jobs come from Hydra's basic sweeper (:func:`launcher.config.sweeper.sweep_jobs`);
``python -m launcher -m`` checks them in its sweeper (:mod:`launcher.config.sweeper`), with
:func:`check_command` first and :func:`check_jobs` per job (:func:`precheck_sweep`).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launcher.config.compose import (
    compose,
    compose_all,
    group_listing,
    hydra_message,
    job_config,
)
from launcher.config.schema import RUN_CONTROL, RunSpec
from launcher.config.sweeper import job_label, sweep_jobs
from launcher.config.validate import key_hint, resolve
from launcher.errors import ConfigError
from launcher.tools.dry_run import plan

GROUPS = ("agent", "model_size", "env", "protocol", "logger", "sweep")


def parse(override: str) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_override(override)
    except Exception as err:
        raise ConfigError(
            f"cannot parse the override {override!r} ({hydra_message(err)}); "
            "write key=value, group=option or +key=value"
        ) from None


def _values(override: Any) -> list[Any]:
    if override.is_sweep_override():
        return list(override.sweep_string_iterator())
    return [override.value()]


def _check_group(group: str, value: Any, options: list[str], overrides: Sequence[str] = ()) -> None:
    """Refuse an unknown option of ``group``, with the close ones and the list; for
    ``model_size`` both come from the chosen agent's presets (issue 44 item 8)."""
    if isinstance(value, str) and value in options:
        return
    whose = ""
    if group == "model_size":
        presets = _agent_presets(overrides)
        if presets is not None and set(presets[1]) & set(options):
            whose = f" for agent={presets[0]}"
            options = [o for o in options if o in presets[1]]
    close = difflib.get_close_matches(str(value), options, n=3, cutoff=0.6)
    close += [o for o in options if o.endswith(f"_{value}") and o not in close]
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise ConfigError(
        f"{group}={value}: unknown option{whose}; {hint}choose one of: {', '.join(options)}"
    )


def _agent_presets(overrides: Sequence[str]) -> tuple[str, set[str]] | None:
    """(the agents a command names, as ``a`` or ``a,b``; their ``model_size`` presets),
    the default agent where none is named; None when they cannot be told (the suggestion
    then lists every option)."""
    from launcher.config.validate import load_entry
    from launcher.tools.completion import chosen_agents, search_path_overrides

    agents = chosen_agents(list(overrides))
    if agents is None:
        return None
    names, sizes = [], set()
    for agent in agents:
        words = [*search_path_overrides(overrides), *([f"agent={agent}"] if agent else [])]
        try:
            entry = load_entry(job_config(compose(words))["agent"])
        except (ConfigError, KeyError, TypeError):
            return None
        names.append(entry.name)
        sizes |= set(entry.model_sizes)
    return ",".join(names), sizes


def _check_key(cfg: Any, key: str) -> None:
    """``key`` (dotted) must exist in ``cfg``; else name the closest keys of its parent."""
    from omegaconf import OmegaConf

    if key in RUN_CONTROL:
        raise ConfigError(
            f"{key}: a run-control key, given with a leading '+': +{key}=... (e.g. +resume=force)"
        )
    parts = key.split(".")
    node = cfg
    for i, part in enumerate(parts):
        keys = list(node.keys()) if OmegaConf.is_dict(node) else []
        if i == 0:  # hydra.* keys never get here (Hydra checks them): do not offer them
            keys = [k for k in keys if k != "hydra"]
        if part not in keys:
            where = ".".join(parts[:i]) or "the top level"
            close = difflib.get_close_matches(part, [str(k) for k in keys], n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            valid = ", ".join(str(k) for k in keys) if keys else "(none: not a mapping)"
            raise ConfigError(
                f"{key}: unknown key{key_hint(key)}; {hint}valid keys of {where}: {valid}"
            )
        node = node[part]


def check_overrides(
    overrides: Sequence[str], multirun: bool = False, budget: bool = True
) -> list[RunSpec]:
    """Validate every job ``python -m launcher [-m] OVERRIDES`` would run.

    Returns the jobs' RunSpecs (one unless ``multirun``); raises ConfigError. ``budget``
    False skips the CPU-time refusal (``--cfg``: printing a config runs nothing).
    """
    base = check_command(overrides, multirun)
    if multirun:
        params = base.hydra.sweeper.get("params") or {}
        jobs = [job for batch in sweep_jobs(params, overrides) for job in batch]
    else:
        jobs = [list(overrides)]
    if jobs == [_base_overrides([(text, parse(text)) for text in overrides])]:
        configs = [base]  # group options only: the job's config is the one just composed
    else:
        configs = compose_all(jobs, hydra_node=True)
    return check_jobs(jobs, configs, multirun, budget)


def _base_overrides(parsed: Sequence[tuple[str, Any]]) -> list[str]:
    """The overrides :func:`check_command` composes its config of, from ``(text, parsed)``
    pairs: the group options (a sweep's first value), then the ``hydra*`` ones."""
    groups = [first_choice(t, ov) for t, ov in parsed if _is_group(ov)]
    return groups + [t for t, ov in parsed if ov.key_or_group.startswith("hydra")]


def _is_group(ov: Any) -> bool:
    return ov.key_or_group in GROUPS and ov.package is None


def check_command(overrides: Sequence[str], multirun: bool = False) -> Any:
    """The command line's own checks: parsing, sweeps without ``-m``, every group option
    (each value of a sweep), and keys against the config of each sweep's first value.
    Returns that config (hydra node included); raises ConfigError."""
    parsed = [(text, parse(text)) for text in overrides]
    chosen = [ov.key_or_group for _, ov in parsed if _is_group(ov) and not ov.is_delete()]
    keys, listing = [], {}
    for text, ov in parsed:
        name = ov.key_or_group
        if name.startswith("hydra"):
            continue
        if ov.is_sweep_override() and not multirun:
            raise ConfigError(
                f"{text}: a sweep (a,b,...) needs multirun: python -m launcher -m {text}"
            )
        if _is_group(ov):
            if not ov.is_delete():
                listing = listing or group_listing(chosen, overrides)  # all groups at once
                for value in _values(ov):
                    _check_group(name, value, listing[name], overrides)
        elif not (ov.is_add() or ov.is_force_add() or ov.is_delete()):
            keys.append((text, name))
    base = compose(_base_overrides(parsed), hydra_node=True)
    for _, key in keys:
        _check_key(base, key)
    params = base.hydra.sweeper.get("params") or {}
    if params and not multirun:
        raise ConfigError(
            f"this config is a sweep ({', '.join(params)} over several values); run it with "
            f"multirun: python -m launcher -m {' '.join(overrides)}"
        )
    return base


def check_jobs(
    jobs: Sequence[Sequence[str]], configs: Sequence[Any], multirun: bool, budget: bool = True
) -> list[RunSpec]:
    """Check each job's composed config (hydra node included): values, env facts, its run
    dir (distinct across a sweep) and, if ``budget``, the CPU time. In a sweep an error
    names its job. Returns the RunSpecs; raises ConfigError."""
    from launcher.config import guards
    from launcher.logger import loggers
    from launcher.loop import build
    from launcher.store import rundir

    specs: list[RunSpec] = []
    dirs: dict[Path, list[str]] = {}
    for number, (job, cfg) in enumerate(zip(jobs, configs, strict=True)):
        try:
            spec = resolve(job_config(cfg))
            build.precheck(spec)
            if budget:
                guards.check_cpu_budget(spec)
            out = _output_dir(cfg, multirun)
            rundir.check_path(out, *loggers.layout(spec))
        except ConfigError as err:
            if not multirun:
                raise
            raise ConfigError(f"{err} {job_label(number, job)}") from None
        if out in dirs:  # e.g. a sweep over logger=...: not part of the run's identity
            raise ConfigError(
                f"jobs {' '.join(dirs[out])!r} and {' '.join(job)!r} would share the run dir "
                f"{out} (their configs differ only outside the run's identity); sweep over "
                "keys that change the run, or give each job its own hydra.sweep.subdir"
            )
        dirs[out] = list(job)
        specs.append(spec)
    if len(specs) > 1 and any(spec.control.from_artifact for spec in specs):
        raise ConfigError(
            "from_artifact: an artifact holds one run, and this sweep has "
            f"{len(specs)} jobs; resume it with a single launch (no -m), one per artifact"
        )
    return specs


def _output_dir(cfg: Any, multirun: bool) -> Path:
    from omegaconf import OmegaConf

    if multirun:
        return Path(OmegaConf.select(cfg, "hydra.sweep.dir")) / str(
            OmegaConf.select(cfg, "hydra.sweep.subdir")
        )
    return Path(OmegaConf.select(cfg, "hydra.run.dir"))


def first_choice(text: str, ov: Any) -> str:
    if not ov.is_sweep_override():
        return text
    prefix = "+" if ov.is_add() else "++" if ov.is_force_add() else ""
    return f"{prefix}{ov.key_or_group}={_values(ov)[0]}"


def precheck_sweep(jobs: Sequence[Sequence[str]], configs: Sequence[Any]) -> bool:
    """Check every job of a sweep (raises ConfigError naming the first bad one).

    Returns whether to launch: False for ``+dry_run=true``, whose plan is printed here.
    """
    specs = check_jobs(jobs, configs, multirun=True, budget=True)
    if any(spec.control.dry_run for spec in specs):
        print(plan(specs), flush=True)
        return False
    return True
