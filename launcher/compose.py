"""Hydra composition of ``conf/``: the run-name resolver, group options, composed configs.

The one place the launcher talks to Hydra's compose API (public: ``hydra.compose``,
``GlobalHydra``'s config loader); Hydra errors become :class:`ConfigError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from launcher.config import resolve
from launcher.errors import ConfigError
from launcher.identity import run_name
from launcher.schema import RunSpec

CONFIG_MODULE = "conf"
CONFIG_NAME = "config"
RESOLVER = "launcher_run_name"


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
                raise ConfigError(hydra_message(err)) from None
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


def hydra_message(err: BaseException) -> str:
    """The first meaningful line of a Hydra / OmegaConf error (and of its cause)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    message = lines[0] if lines else type(err).__name__
    cause = err.__cause__
    if cause is not None and str(cause).strip():
        first = str(cause).strip().splitlines()[0]
        if first not in message:
            message = f"{message}: {first}"
    return message
