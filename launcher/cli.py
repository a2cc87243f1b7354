"""``python -m launcher``: Hydra on the outside, one clear message and exit 2 on bad input.

Before Hydra runs anything, :func:`check_overrides` composes and validates every job's
config (each combination of a ``-m`` sweep too): unknown group options and keys, wrong
types and values, and invalid combinations are reported as one ``error: ...`` line and
exit status 2, before any directory is created. Checks that need the env's facts (a
discrete env for TD-MPC2) and the run directory's (a changed config) happen at the start
of the job, also as exit 2, before anything is written.

Exit status: 0 done, 2 bad input (:class:`ConfigError` or a Hydra composition error), 1 an
internal error (traceback).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.resources
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from launcher.agents import AGENTS, AgentEntry
from launcher.build import precheck_env
from launcher.config import RunSpec, config_hash, resolve
from launcher.errors import ConfigError

CONFIG_MODULE = "conf"
CONFIG_NAME = "config"
GROUPS = ("agent", "model_size", "env", "protocol", "logger", "sweep")
RUN_CONTROL = ("resume", "stop_after_chunks")
RESOLVER = "launcher_run_name"


# --------------------------------------------------------------------- resolvers
def _run_name(*, _root_: Any) -> str:
    """``hydra.run.dir`` / ``hydra.sweep.subdir``: ``<agent>-<env>-<config hash>``."""
    from omegaconf import OmegaConf

    job = {k: _root_[k] for k in _root_ if k != "hydra"}
    container = {
        k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
        for k, v in job.items()
    }
    try:
        return resolve(container).run_name
    except ConfigError:  # reported by the job itself; the name only needs to be stable
        return f"invalid-{config_hash(container)}"


def register_resolvers() -> None:
    """Register the OmegaConf resolver used by ``conf/config.yaml`` (idempotent)."""
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver(RESOLVER, _run_name, replace=True)


# ----------------------------------------------------------------------- compose
def group_options(group: str) -> list[str]:
    """The option names of a config group (``env`` -> ``["acrobot", ...]``), sorted."""
    package = "sweeps" if group == "sweep" else CONFIG_MODULE
    root = importlib.resources.files(package).joinpath(group)
    if not root.is_dir():
        return []
    return sorted(p.name[: -len(".yaml")] for p in root.iterdir() if p.name.endswith(".yaml"))


@contextlib.contextmanager
def _hydra_context() -> Iterator[None]:
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base=None):
        yield


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


def compose_spec(
    overrides: Sequence[str] = (), agents: Mapping[str, AgentEntry] = AGENTS
) -> RunSpec:
    """Compose and validate: the RunSpec of ``python -m launcher OVERRIDES``."""
    from omegaconf import OmegaConf

    cfg = compose(overrides)
    return resolve(OmegaConf.to_container(cfg, resolve=True), agents)


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


def _check_group(group: str, value: Any) -> None:
    options = group_options(group)
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
            raise ConfigError(f"{key}: unknown key; {hint}valid keys of {where}: {valid}")
        node = node[part]


def check_overrides(
    overrides: Sequence[str], multirun: bool = False, agents: Mapping[str, AgentEntry] = AGENTS
) -> list[RunSpec]:
    """Validate every job ``python -m launcher [-m] OVERRIDES`` would run.

    Returns the jobs' RunSpecs (one unless ``multirun``); raises ConfigError.
    """
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
                for value in _values(ov):
                    _check_group(name, value)
            groups.append(text)
        elif not (ov.is_add() or ov.is_force_add() or ov.is_delete()):
            keys.append((text, name))
    group_only = [_first_choice(t, ov) for t, ov in parsed if t in groups]
    base = compose(group_only, hydra_node=multirun)
    for _, key in keys:
        _check_key(base, key)
    jobs = [list(overrides)]
    if multirun:
        jobs = _sweep_jobs(base, overrides)
    from omegaconf import OmegaConf

    specs = [resolve(OmegaConf.to_container(c, resolve=True), agents) for c in compose_all(jobs)]
    for spec in specs:
        precheck_env(spec, agents)
    return specs


def _first_choice(text: str, ov: Any) -> str:
    if not ov.is_sweep_override():
        return text
    prefix = "+" if ov.is_add() else "++" if ov.is_force_add() else ""
    return f"{prefix}{ov.key_or_group}={_values(ov)[0]}"


def _sweep_jobs(base: Any, overrides: Sequence[str]) -> list[list[str]]:
    """The override list of every job of a basic-sweeper multirun (sweeper params first)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = base.hydra.sweeper.get("params") or {}
    texts = [f"{k}={v}" for k, v in params.items()] + [o for o in overrides]
    texts = [t for t in texts if not t.split("=", 1)[0].lstrip("+~").startswith("hydra")]
    try:
        parsed = OverridesParser.create().parse_overrides(texts)
        (batch,) = BasicSweeper.split_arguments(parsed, None)
    except Exception as err:
        raise ConfigError(_hydra_message(err)) from None
    return [list(job) for job in batch]


# ----------------------------------------------------------------------- the app
def _job(cfg: Any, errors: list[ConfigError]) -> None:
    """Hydra's task function: resolve, build, run, print where everything is.

    Bad input found here (an env the agent cannot run, a run dir holding another
    config) is collected in ``errors``, not raised: the other jobs of a multirun go on,
    and :func:`main` reports each one and exits 2.
    """
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from launcher.run import run, summary

    try:
        spec = resolve(OmegaConf.to_container(cfg, resolve=True))
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        result = run(spec, run_dir)
    except ConfigError as err:
        errors.append(err)
        return
    print(summary(result), flush=True)


def _run_hydra(argv: Sequence[str], errors: list[ConfigError]) -> None:
    import hydra

    @hydra.main(version_base=None, config_path=f"pkg://{CONFIG_MODULE}", config_name=CONFIG_NAME)
    def app(cfg: Any) -> None:
        _job(cfg, errors)

    saved = sys.argv
    sys.argv = [saved[0] if saved else "launcher", *argv]
    try:
        app()
    finally:
        sys.argv = saved


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m launcher``; returns the exit status."""
    from hydra._internal.utils import get_args_parser

    argv = list(sys.argv[1:] if argv is None else argv)
    args = get_args_parser().parse_args(argv)  # argparse: exit 2 on a bad flag
    register_resolvers()
    special = args.help or args.hydra_help or args.info or args.shell_completion
    custom = args.config_path or args.config_dir or args.config_name
    if not (special or custom):
        try:
            check_overrides(args.overrides, multirun=args.multirun)
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    GlobalHydra.instance().clear()
    old = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let errors reach us instead of Hydra's exit(1)
    errors: list[ConfigError] = []
    try:
        _run_hydra(argv, errors)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (HydraException, OmegaConfBaseException) as err:
        print(f"error: {_hydra_message(err)}", file=sys.stderr)
        return 2
    finally:
        if old is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = old
        GlobalHydra.instance().clear()
    for err in errors:
        print(f"error: {err}", file=sys.stderr)
    return 2 if errors else 0
