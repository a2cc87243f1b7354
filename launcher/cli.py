"""``python -m launcher`` / ``wmrl``: Hydra on the outside, one clear message on bad input.

Before Hydra runs anything, :func:`check_overrides` composes and validates the job's
config: unknown group options and keys, wrong types and values, invalid combinations,
env facts, the run directory's path and, on a machine without an accelerator, the
launch's estimated wall time. A ``-m`` sweep gets the command line's checks here
(:func:`launcher.config.precheck.check_command`) and every job's in Hydra's sweeper, before it
launches any (:mod:`launcher.config.sweeper`). Each problem is one ``error: ...`` line and exit
status 2, before any directory is created.

Inside a job (:func:`_job`) an error fails the Hydra job: the basic launcher finishes
the sweep's other jobs and then reports it; a submitit job fails (its log holds the
error) and the sweep's summary lists every job's status (:mod:`launcher.loop.sweep_status`).

``+dry_run=true`` stops after the pre-check (a sweep's: in its sweeper): it prints every
job's plan and estimated accelerator hours (:mod:`launcher.tools.dry_run`) and exits 0, running
and creating nothing.

Exit status: 0 done, 2 bad input or a run stopped by a guard (:class:`ConfigError`),
130 interrupted (Ctrl-C; the latest checkpoint is complete), 1 any other failure.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launcher.config.compose import (  # noqa: F401 - the CLI's Python API re-exported
    CONFIG_MODULE,
    CONFIG_NAME,
    compose,
    compose_all,
    compose_spec,
    group_options,
    hydra_message,
    job_config,
    normalize,
    register_resolvers,
    register_schemas,
)
from launcher.config.precheck import check_command, check_overrides
from launcher.config.validate import resolve
from launcher.errors import ConfigError
from launcher.loop.interrupts import callback_exit, interrupted, quiet_callback_interrupts

SWEEP_ID_KEY = "hydra.callbacks.sweep_status.sweep_id"


# --------------------------------------------------------------------- arguments
def flags(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` read by Hydra's own flag parser (the one ``hydra.main`` uses; hydra-core
    has no public accessor for it), so the launcher restates none of Hydra's flags."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser().parse_known_args(list(argv))[0]


def _job(cfg: Any, refused: list[ConfigError]) -> None:
    """Hydra's task function: resolve once, run, print where everything is.

    In a multirun, errors propagate: the Hydra job fails (Hydra re-raises it in the
    main process after the other jobs, a submitit one too). A single run hands a
    ConfigError to :func:`main` through ``refused`` instead, so Hydra adds no
    "Error executing job" line to the one-line message.
    """

    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from launcher.loop.cache import enable_compile_cache
    from launcher.loop.run import run
    from launcher.loop.summary import summary

    enable_compile_cache()
    try:
        spec = resolve(job_config(cfg))
        if spec.control.dry_run:  # reached only past the pre-check (e.g. --config-dir)
            from launcher.tools.dry_run import plan

            print(plan([spec]), flush=True)
            return
        result = run(spec, Path(HydraConfig.get().runtime.output_dir))
    except ConfigError as err:
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            refused.append(err)
            return
        logging.getLogger("launcher").error("job failed: %s", err)
        raise
    except Exception as err:
        if interrupted(err):  # Ctrl-C inside a host callback: one line and 130, not a job error
            raise KeyboardInterrupt from None
        exit_ = callback_exit(err)
        if exit_ is not None:  # e.g. submitit requeueing a preempted job: exit, not fail
            logging.getLogger("launcher").warning("exiting (%s) from a host callback", exit_.code)
            raise exit_ from None
        if HydraConfig.get().mode == RunMode.MULTIRUN:  # a cluster job's log must hold it
            logging.getLogger("launcher").exception("job failed: %s: %s", type(err).__name__, err)
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
    # Hydra points the root logger at the streams of the moment (a multirun before its
    # sweeper checks the jobs): give the caller (e.g. a test's captured streams) its own back.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        app()
    finally:
        sys.argv = saved
        root.handlers[:] = handlers
        root.setLevel(level)
    if refused:
        raise refused[0]


def _derived_note(spec: Any) -> str:
    """Comment lines after ``--cfg job``'s YAML naming what the agent's null fields
    resolve to (its config's optional ``derived()``; agent_api), or ''."""
    derived = getattr(spec.agent, "derived", None)
    values = derived() if derived else {}
    if not values:
        return ""
    size = getattr(spec.agent, "model_size", None)
    source = f" (model_size {size})" if size else ""
    pairs = ", ".join(f"agent.{k}={v}" for k, v in values.items())
    return f"# null above resolves to{source}: {pairs}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m launcher``; returns the exit status."""
    from launcher.loop import sweep_status
    from launcher.tools.gl import choose_mujoco_gl

    argv = list(sys.argv[1:] if argv is None else argv)
    args = flags(argv)
    register_resolvers()
    quiet_callback_interrupts()
    special = args.help or args.hydra_help or args.info or args.shell_completion
    custom = args.config_path or args.config_dir or args.config_name or args.experimental_rerun
    if args.multirun and args.cfg:  # Hydra refuses the pair with a traceback
        print(
            f"error: --cfg {args.cfg} prints one job's config and cannot be combined with "
            "-m/--multirun; drop -m and give one value per swept key (or use +dry_run=true "
            "to list a sweep's jobs)",
            file=sys.stderr,
        )
        return 2
    specs = []
    if not special:
        choose_mujoco_gl()  # before any check builds an env (mujoco reads it on import)
    if not (special or custom):
        try:
            if args.multirun:  # the jobs: checked by the sweeper (launcher/config/sweeper.py)
                check_command(args.overrides, multirun=True)
            else:
                specs = check_overrides(args.overrides, budget=not args.cfg)
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        if not args.cfg and any(spec.control.dry_run for spec in specs):
            from launcher.tools.dry_run import plan

            print(plan(specs), flush=True)  # +dry_run=true: Hydra never runs
            return 0
    sweep_id = None
    if args.multirun and not (special or custom or args.cfg):
        sweep_id = uuid.uuid4().hex[:12]
        argv = [*argv, f"{SWEEP_ID_KEY}={sweep_id}"]
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    written = dict(zip(args.overrides, normalize(args.overrides), strict=True))
    argv = [written.get(a, a) for a in argv]  # 1e6 for an int field: see compose.normalize
    with contextlib.suppress(ConfigError):  # e.g. --config-dir: no pre-check composed yet
        register_schemas(args.overrides)
    GlobalHydra.instance().clear()
    old = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let errors reach us instead of Hydra's exit(1)
    code = 0
    query = [o.split("=", 1)[1] for o in args.overrides if o.startswith("query=")]
    try:
        if args.shell_completion and query:  # model_size=<TAB>: the agent's sizes only
            from launcher.tools.completion import run_query

            run_query(argv, os.environ.get("COMP_LINE", ""), query[-1], _run_hydra)
        else:
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
        print(f"error: {hydra_message(err)}", file=sys.stderr)
        code = 2
    except Exception as err:  # noqa: BLE001 - e.g. a failed submitit job
        if sweep_id is None:
            raise
        print(f"error: a job of the sweep failed ({hydra_message(err)})", file=sys.stderr)
        code = 1
    finally:
        if old is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = old
        GlobalHydra.instance().clear()
    if args.cfg == "job" and code == 0 and specs:
        print(_derived_note(specs[0]), end="", flush=True)
    if sweep_id is not None:
        table = sweep_status.report(args.overrides, sweep_id)
        if table:
            print(table, file=sys.stderr if code else sys.stdout, flush=True)
    return code


def console_main() -> None:
    """The ``wmrl`` console script."""
    from launcher.loop.malloc import reexec_with_fast_malloc

    reexec_with_fast_malloc()  # see launcher/loop/malloc.py
    sys.exit(main())
