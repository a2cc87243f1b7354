"""Hydra composition of ``conf/``: the run-name resolver, group options, composed configs.

The one place the launcher talks to Hydra's compose API (public: ``hydra.compose``,
``GlobalHydra``'s config loader, ``ConfigStore``); Hydra and OmegaConf errors become
:class:`ConfigError` lines (:func:`launcher.config.structured.message`). Before composing, the
section schemas and each agent option's schema (from the entry its YAML names) are stored
in Hydra's ConfigStore (:func:`register_schemas`, :mod:`launcher.config.structured`), and with them
the ``env`` group's options, generated from the env registry (no YAML per task).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator, Sequence
from typing import Any

from launcher.config.identity import run_name
from launcher.config.schema import SECTIONS, RunSpec
from launcher.config.structured import (
    hydra_message,
    message,
    store_agent,
    store_sections,
    stored_agents,
)
from launcher.config.validate import load_entry, resolve
from launcher.errors import ConfigError

__all__ = ["hydra_message"]  # re-exported: the CLI's Python API

CONFIG_MODULE = "conf"
CONFIG_NAME = "config"
RESOLVER = "launcher_run_name"
GROUPS_RESOLVER = "launcher_config_groups"
# The groups a user picks options from, in the help's order. Hydra's $APP_CONFIG_GROUPS lists
# every group, the internal ones too (schema, schema/agent, agent_protocol, env/default,
# model_size/<agent>), so conf/hydra/help/launcher.yaml lists these instead.
HELP_GROUPS = ("agent", "env", "protocol", "model_size", "logger", "sweep")


# --------------------------------------------------------------------- resolvers
def _run_name(*, _root_: Any) -> str:
    """``hydra.run.dir`` / ``hydra.sweep.subdir``: ``<agent>-<env>-<protocol>-<hash>``,
    from the composed job config alone (nothing validated: the job resolves it once)."""
    from omegaconf import OmegaConf

    job = {
        k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
        for k, v in ((k, _root_[k]) for k in _root_ if k != "hydra")
    }
    return run_name(job, SECTIONS)


def _config_groups() -> str:
    """The help's group lines, ``group: option, ...`` for :data:`HELP_GROUPS` (read while
    Hydra prints the help, from its config loader)."""
    from hydra.core.global_hydra import GlobalHydra

    return _group_lines(GlobalHydra.instance().config_loader())


@functools.lru_cache(maxsize=1)
def _group_lines(loader: Any) -> str:
    """:func:`_config_groups` of one Hydra initialisation (``loader``: its config loader,
    hashed by identity).

    Not only the help reads them: OmegaConf dereferences an interpolated value whenever a
    merge writes its key, so every compose evaluates ``hydra.help.template`` (when Hydra's
    ``hydra/config`` node is merged in), and the loader's ``get_group_options`` builds a
    config repository per call (a deep copy of the ConfigStore, the primary config loaded
    again): six of them, ~0.25 s a compose. So one repository for the six groups
    (:func:`_lister`), and one listing per loader: a sweep's jobs composed in one
    initialisation list them once."""
    listing = _lister(loader)
    lines = []
    for group in HELP_GROUPS:
        options = sorted(listing(group))
        name = "+sweep (with -m)" if group == "sweep" else group
        lines.append(f"{name}: {', '.join(options)}")
    return "\n".join(lines)


def _lister(loader: Any, overrides: Sequence[str] = ()) -> Any:
    """``group -> option names`` as ``loader.get_group_options(group, config_name=CONFIG_NAME,
    overrides=overrides)`` answers it, with one config repository for every group asked
    (built as that call builds it: Hydra 1.3's ``ConfigLoaderImpl``; the public call, one
    repository a group, where that method is missing)."""
    from hydra.core.object_type import ObjectType

    make_repo = getattr(loader, "_parse_overrides_and_create_caching_repo", None)
    if make_repo is None:
        return functools.partial(
            loader.get_group_options, config_name=CONFIG_NAME, overrides=list(overrides)
        )
    repo = make_repo(CONFIG_NAME, list(overrides))[1]
    return lambda group: repo.get_group_options(group, ObjectType.CONFIG)


def register_resolvers() -> None:
    """Register the OmegaConf resolvers of ``conf/config.yaml`` (the run dir) and of
    ``conf/hydra/help/launcher.yaml`` (the help's groups); idempotent."""
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver(RESOLVER, _run_name, replace=True)
    OmegaConf.register_new_resolver(GROUPS_RESOLVER, _config_groups, replace=True)


# ----------------------------------------------------------------------- compose
@contextlib.contextmanager
def _hydra_context() -> Iterator[None]:
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base=None):
        yield


def _searchpath(overrides: Sequence[str]) -> list[str]:
    return [o for o in overrides if o.lstrip("+~").startswith("hydra.searchpath")]


def register_schemas(overrides: Sequence[str] = ()) -> None:
    """Store the section schemas and the schema of every agent option on the search path
    (``hydra.searchpath`` overrides included) not stored yet, in Hydra's ConfigStore.

    An agent option's schema comes from the entry its YAML names (``entry:``), read from
    the option composed without it; an option that does not compose or names no loadable
    entry is left untyped (composing it for a run says what is wrong)."""
    from hydra import compose as hydra_compose

    store_sections()
    searchpath = _searchpath(overrides)
    todo = [o for o in group_options("agent", searchpath) if o not in stored_agents()]
    if not todo:
        return
    with _hydra_context():
        for option in todo:
            try:
                agent = hydra_compose(CONFIG_NAME, [*searchpath, f"agent={option}"]).agent
                store_agent(option, load_entry(agent))
            except Exception:  # noqa: BLE001, S112 - reported when the option is composed
                continue


def normalize(overrides: Sequence[str]) -> list[str]:
    """``overrides`` with each integral float value written as the int it equals
    (``protocol.n_timesteps=1e6`` -> ``=1000000``; a sweep of numbers too:
    ``agent.buffer_size=1e5,2e5`` -> ``=100000,200000``): Hydra's grammar reads ``1e6`` as a
    float and OmegaConf's int fields refuse floats; a float field takes the int as the same
    float. Other sweeps (ranges, intervals, globs, non-numbers), ``hydra.*`` and unparsable
    overrides are left as written."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep

    parser = OverridesParser.create()
    out = []
    for text in overrides:
        try:
            ov = parser.parse_override(text)
            value = ov.value()
        except Exception:  # noqa: BLE001 - the pre-check names a bad override
            out.append(text)
            continue
        values = value.list if isinstance(value, ChoiceSweep) else [value]
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if (
            numbers
            and any(_integral(v) for v in values)
            and not ov.key_or_group.startswith("hydra")
        ):
            written = ",".join(str(int(v)) if _integral(v) else str(v) for v in values)
            text = f"{text.split('=', 1)[0]}={written}"
        out.append(text)
    return out


def _integral(value: object) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def group_options(group: str, overrides: Sequence[str] = ()) -> list[str]:
    """The option names of a config group on the search path (``hydra.searchpath``
    overrides included), sorted; ``sweep`` lists ``+sweep=`` files."""
    return group_listing([group], overrides)[group]


def group_listing(groups: Sequence[str], overrides: Sequence[str] = ()) -> dict[str, list[str]]:
    """:func:`group_options` of each of ``groups``, from one Hydra initialisation and one
    config repository (a repository costs ~20 ms: :func:`_lister`)."""
    from hydra.core.global_hydra import GlobalHydra

    register_resolvers()
    store_sections()  # the env options are generated into the ConfigStore
    hydra_overrides = [o for o in overrides if o.lstrip("+~").startswith("hydra.searchpath")]
    with _hydra_context():
        listing = _lister(GlobalHydra.instance().config_loader(), hydra_overrides)
        return {group: sorted(listing(group)) for group in groups}


def compose(overrides: Sequence[str] = (), *, hydra_node: bool = False) -> Any:
    """The composed config (a DictConfig) for ``overrides``, as ``python -m launcher`` sees it.

    Hydra errors are raised as :class:`ConfigError`.
    """
    return compose_all([overrides], hydra_node=hydra_node)[0]


def compose_all(jobs: Sequence[Sequence[str]], *, hydra_node: bool = False) -> list[Any]:
    """:func:`compose` of several override lists (one Hydra initialisation)."""
    from hydra import compose as hydra_compose

    register_resolvers()
    for searchpath in {tuple(_searchpath(job)) for job in jobs}:
        register_schemas(searchpath)
    out = []
    with _hydra_context():
        for overrides in jobs:
            try:
                out.append(
                    hydra_compose(
                        config_name=CONFIG_NAME,
                        overrides=normalize(overrides),
                        return_hydra_config=hydra_node,
                    )
                )
            except ConfigError:
                raise
            except Exception as err:  # Hydra / OmegaConf composition errors
                raise ConfigError(message(err)) from None
    return out


def job_config(cfg: Any) -> dict[str, Any]:
    """The job's sections of a composed config as plain data (the hydra node dropped)."""
    from omegaconf import OmegaConf

    return {
        k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k]
        for k in cfg
        if k != "hydra"
    }


def compose_spec(overrides: Sequence[str] = ()) -> RunSpec:
    """Compose and validate: the RunSpec of ``python -m launcher OVERRIDES``."""
    return resolve(job_config(compose(overrides)))
