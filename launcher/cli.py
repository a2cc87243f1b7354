"""``python -m launcher`` / ``wmrl``: Hydra on the outside, one clear message on bad input.

Before Hydra runs anything, :func:`check_overrides` composes and validates every job's
config (each combination of a ``-m`` sweep too): unknown group options and keys, wrong
types and values, invalid combinations, env facts, the run directory's path and, on a
machine without an accelerator, the launch's estimated wall time. Each problem is one
``error: ...`` line and exit status 2, before any directory is created.

Inside a job (:func:`_job`) an error fails the Hydra job: the basic launcher finishes
the sweep's other jobs and then reports it; a submitit job fails (its log holds the
error) and the sweep's summary lists every job's status (:mod:`launcher.sweep_status`).

Exit status: 0 done, 2 bad input or a run stopped by a guard (:class:`ConfigError`),
130 interrupted (Ctrl-C; the latest checkpoint is complete), 1 any other failure.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import itertools
import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from launcher.config import key_hint, resolve
from launcher.errors import ConfigError
from launcher.identity import run_name
from launcher.schema import RUN_CONTROL, RunSpec

CONFIG_MODULE = "conf"
CONFIG_NAME = "config"
GROUPS = ("agent", "model_size", "env", "protocol", "logger", "sweep")
RESOLVER = "launcher_run_name"
SWEEP_ID_KEY = "hydra.callbacks.sweep_status.sweep_id"


# --------------------------------------------------------------------- arguments
def parser() -> argparse.ArgumentParser:
    """Hydra's command-line flags (hydra-core 1.3), declared here so that the
    pre-check reads them without Hydra's internal parser; Hydra parses them again."""
    p = argparse.ArgumentParser(prog="python -m launcher", add_help=False)
    p.add_argument("overrides", nargs="*")
    p.add_argument("--help", "-h", action="store_true")
    p.add_argument("--hydra-help", action="store_true")
    p.add_argument("--version", action="store_true")
    p.add_argument("--cfg", "-c", choices=["job", "hydra", "all"])
    p.add_argument("--resolve", action="store_true")
    p.add_argument("--package", "-p")
    p.add_argument("--run", "-r", action="store_true")
    p.add_argument("--multirun", "-m", action="store_true")
    p.add_argument("--shell-completion", "-sc", action="store_true")
    p.add_argument("--config-path", "-cp")
    p.add_argument("--config-name", "-cn")
    p.add_argument("--config-dir", "-cd")
    p.add_argument("--experimental-rerun")
    p.add_argument("--info", "-i", nargs="?", const="all")
    return p


# --------------------------------------------------------------------- resolvers
def _run_name(*, _root_: Any) -> str:
    """``hydra.run.dir`` / ``hydra.sweep.subdir``: ``<agent>-<env>-<protocol>-<hash>``,
    from the composed job config alone (nothing validated: the job resolves it once)."""
    from omegaconf import OmegaConf

    job = {
        k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
        for k, v in ((k, _root_[k]) for k in _root_ if k != "hydra")
    }
    return run_name(job)


def register_resolvers() -> None:
    """Register the OmegaConf resolver used by ``conf/config.yaml`` (idempotent)."""
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver(RESOLVER, _run_name, replace=True)


# ----------------------------------------------------------------------- compose
@contextlib.contextmanager
def _hydra_context() -> Iterator[None]:
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base=None):
        yield


def group_options(group: str, overrides: Sequence[str] = ()) -> list[str]:
    """The option names of a config group on the search path (``hydra.searchpath``
    overrides included), sorted; ``sweep`` lists ``+sweep=`` files."""
    from hydra.core.global_hydra import GlobalHydra

    register_resolvers()
    hydra_overrides = [o for o in overrides if o.lstrip("+~").startswith("hydra.searchpath")]
    with _hydra_context():
        loader = GlobalHydra.instance().config_loader()
        return sorted(
            loader.get_group_options(group, config_name=CONFIG_NAME, overrides=hydra_overrides)
        )


def compose(overrides: Sequence[str] = (), *, hydra_node: bool = False) -> Any:
    """The composed config (a DictConfig) for ``overrides``, as ``python -m launcher`` sees it.

    Hydra errors are raised as :class:`ConfigError`.
    """
    return compose_all([overrides], hydra_node=hydra_node)[0]


def compose_all(jobs: Sequence[Sequence[str]], *, hydra_node: bool = False) -> list[Any]:
    """:func:`compose` of several override lists (one Hydra initialisation)."""
    from hydra import compose as hydra_compose

    register_resolvers()
    out = []
    with _hydra_context():
        for overrides in jobs:
            try:
                out.append(
                    hydra_compose(
                        config_name=CONFIG_NAME,
                        overrides=list(overrides),
                        return_hydra_config=hydra_node,
                    )
                )
            except ConfigError:
                raise
            except Exception as err:  # Hydra / OmegaConf composition errors
                raise ConfigError(_hydra_message(err)) from None
    return out


def _job_config(cfg: Any) -> dict[str, Any]:
    """The job's sections of a composed config as plain data (the hydra node dropped)."""
    from omegaconf import OmegaConf

    return {
        k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k]
        for k in cfg
        if k != "hydra"
    }


def compose_spec(overrides: Sequence[str] = ()) -> RunSpec:
    """Compose and validate: the RunSpec of ``python -m launcher OVERRIDES``."""
    return resolve(_job_config(compose(overrides)))


def _hydra_message(err: BaseException) -> str:
    """The first meaningful line of a Hydra / OmegaConf error (and of its cause)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    message = lines[0] if lines else type(err).__name__
    cause = err.__cause__
    if cause is not None and str(cause).strip():
        first = str(cause).strip().splitlines()[0]
        if first not in message:
            message = f"{message}: {first}"
    return message


# ----------------------------------------------------------------- the pre-check
def _parse(override: str) -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_override(override)
    except Exception as err:
        raise ConfigError(
            f"cannot parse the override {override!r} ({_hydra_message(err)}); "
            "write key=value, group=option or +key=value"
        ) from None


def _values(override: Any) -> list[Any]:
    if override.is_sweep_override():
        return list(override.sweep_string_iterator())
    return [override.value()]


def _check_group(group: str, value: Any, options: list[str]) -> None:
    if isinstance(value, str) and value in options:
        return
    close = difflib.get_close_matches(str(value), options, n=3, cutoff=0.6)
    close += [o for o in options if o.endswith(f"_{value}") and o not in close]
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise ConfigError(f"{group}={value}: unknown option; {hint}choose one of: {', '.join(options)}")


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
        if part not in keys:
            where = ".".join(parts[:i]) or "the top level"
            close = difflib.get_close_matches(part, [str(k) for k in keys], n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            valid = ", ".join(str(k) for k in keys) if keys else "(none: not a mapping)"
            raise ConfigError(
                f"{key}: unknown key{key_hint(key)}; {hint}valid keys of {where}: {valid}"
            )
        node = node[part]


def check_overrides(overrides: Sequence[str], multirun: bool = False) -> list[RunSpec]:
    """Validate every job ``python -m launcher [-m] OVERRIDES`` would run.

    Returns the jobs' RunSpecs (one unless ``multirun``); raises ConfigError.
    """

    from launcher import build, guards

    parsed = [(text, _parse(text)) for text in overrides]
    groups, keys = [], []
    for text, ov in parsed:
        name = ov.key_or_group
        if name.startswith("hydra"):
            continue
        if ov.is_sweep_override() and not multirun:
            raise ConfigError(
                f"{text}: a sweep (a,b,...) needs multirun: python -m launcher -m {text}"
            )
        if name in GROUPS and ov.package is None:
            if not ov.is_delete():
                options = group_options(name, overrides)
                for value in _values(ov):
                    _check_group(name, value, options)
            groups.append(text)
        elif not (ov.is_add() or ov.is_force_add() or ov.is_delete()):
            keys.append((text, name))
    hydra_ovs = [t for t, ov in parsed if ov.key_or_group.startswith("hydra")]
    group_only = [_first_choice(t, ov) for t, ov in parsed if t in groups] + hydra_ovs
    base = compose(group_only, hydra_node=True)
    for _, key in keys:
        _check_key(base, key)
    params = base.hydra.sweeper.get("params") or {}
    if params and not multirun:
        raise ConfigError(
            f"this config is a sweep ({', '.join(params)} over several values); run it with "
            f"multirun: python -m launcher -m {' '.join(overrides)}"
        )
    jobs = _sweep_jobs(params, overrides) if multirun else [list(overrides)]
    specs = []
    for cfg in compose_all(jobs, hydra_node=True):
        spec = resolve(_job_config(cfg))
        build.precheck(spec)
        guards.check_cpu_budget(spec)
        guards.check_run_dir_path(_output_dir(cfg, multirun))
        specs.append(spec)
    return specs


def _output_dir(cfg: Any, multirun: bool) -> Path:
    from omegaconf import OmegaConf

    if multirun:
        return Path(OmegaConf.select(cfg, "hydra.sweep.dir")) / str(
            OmegaConf.select(cfg, "hydra.sweep.subdir")
        )
    return Path(OmegaConf.select(cfg, "hydra.run.dir"))


def _first_choice(text: str, ov: Any) -> str:
    if not ov.is_sweep_override():
        return text
    prefix = "+" if ov.is_add() else "++" if ov.is_force_add() else ""
    return f"{prefix}{ov.key_or_group}={_values(ov)[0]}"


def _sweep_jobs(params: Any, overrides: Sequence[str]) -> list[list[str]]:
    """The override lists of a basic-sweeper multirun: the cartesian product of every
    sweep override (the sweep config's ``hydra.sweeper.params`` first, then the command
    line's, a command-line key replacing a params one), in the basic sweeper's order."""
    texts = [f"{k}={v}" for k, v in params.items()]
    given = {_parse(o).key_or_group for o in overrides}
    texts = [t for t in texts if _parse(t).key_or_group not in given] + list(overrides)
    axes = []
    for text in texts:
        ov = _parse(text)
        if ov.key_or_group.startswith("hydra") or not ov.is_sweep_override():
            axes.append([text])
            continue
        prefix = "+" if ov.is_add() else "++" if ov.is_force_add() else ""
        axes.append([f"{prefix}{ov.key_or_group}={v}" for v in _values(ov)])
    return [list(job) for job in itertools.product(*axes)]


# ----------------------------------------------------------------------- the app
def _job(cfg: Any, refused: list[ConfigError]) -> None:
    """Hydra's task function: resolve once, run, print where everything is.

    In a multirun, errors propagate: the Hydra job fails (Hydra re-raises it in the
    main process after the other jobs, a submitit one too). A single run hands a
    ConfigError to :func:`main` through ``refused`` instead, so Hydra adds no
    "Error executing job" line to the one-line message.
    """
    import logging

    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from launcher.cache import enable_compile_cache
    from launcher.run import run
    from launcher.summary import summary

    enable_compile_cache()
    try:
        spec = resolve(_job_config(cfg))
        result = run(spec, Path(HydraConfig.get().runtime.output_dir))
    except ConfigError as err:
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            refused.append(err)
            return
        logging.getLogger("launcher").error("job failed: %s", err)
        raise
    print(summary(result), flush=True)


def _run_hydra(argv: Sequence[str]) -> None:
    import hydra

    refused: list[ConfigError] = []

    @hydra.main(version_base=None, config_path=f"pkg://{CONFIG_MODULE}", config_name=CONFIG_NAME)
    def app(cfg: Any) -> None:
        _job(cfg, refused)

    saved = sys.argv
    sys.argv = [saved[0] if saved else "launcher", *argv]
    try:
        app()
    finally:
        sys.argv = saved
    if refused:
        raise refused[0]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m launcher``; returns the exit status."""
    from launcher import sweep_status

    argv = list(sys.argv[1:] if argv is None else argv)
    args, _ = parser().parse_known_args(argv)
    register_resolvers()
    special = args.help or args.hydra_help or args.info or args.shell_completion or args.version
    custom = args.config_path or args.config_dir or args.config_name or args.experimental_rerun
    if not (special or custom):
        try:
            check_overrides(args.overrides, multirun=args.multirun)
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    sweep_id = None
    if args.multirun and not (special or custom or args.cfg):
        sweep_id = uuid.uuid4().hex[:12]
        argv = [*argv, f"{SWEEP_ID_KEY}={sweep_id}"]
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    GlobalHydra.instance().clear()
    old = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let errors reach us instead of Hydra's exit(1)
    code = 0
    try:
        _run_hydra(argv)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        print(
            "interrupted: stopped without saving a partial checkpoint; relaunch the same "
            "command to resume from the latest one",
            file=sys.stderr,
        )
        code = 130
    except (HydraException, OmegaConfBaseException) as err:
        print(f"error: {_hydra_message(err)}", file=sys.stderr)
        code = 2
    except Exception as err:  # noqa: BLE001 - e.g. a failed submitit job
        if sweep_id is None:
            raise
        print(f"error: a job of the sweep failed ({_hydra_message(err)})", file=sys.stderr)
        code = 1
    finally:
        if old is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = old
        GlobalHydra.instance().clear()
    if sweep_id is not None:
        table = sweep_status.report(args.overrides, sweep_id)
        if table:
            print(table, file=sys.stderr if code else sys.stdout, flush=True)
    return code


def console_main() -> None:
    """The ``wmrl`` console script."""
    sys.exit(main())
