"""Where the speed benchmarks find the reference implementations they time against.

The references run from a checkout and a venv of their own, outside the repo; every clone
makes them once (docs/PERFORMANCE.md, "Reference checkouts"). A benchmark takes them from its
``--ref`` / ``--ref-python`` options or, unset, from the environment variables below, and
stops with one ``error:`` line (exit status 2) that names both and the recipe when neither
gives them. No machine's path is a default.

Standard library only, so that any benchmark can import it before JAX starts.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

RECIPE = 'docs/PERFORMANCE.md, "Reference checkouts"'


@dataclass(frozen=True)
class Reference:
    """One reference implementation: its name, what ``--ref`` must hold, and the
    environment variables that stand in for ``--ref`` / ``--ref-python``."""

    name: str
    checkout: str
    python: str
    env_checkout: str
    env_python: str


TDMPC2 = Reference(
    name="TD-MPC2",
    checkout="an extract of nicklashansen/tdmpc2 at 5f6fade",
    python="the python of its torch venv",
    env_checkout="WMRL_TDMPC2_REF",
    env_python="WMRL_TDMPC2_REF_PYTHON",
)
DREAMERV3 = Reference(
    name="DreamerV3",
    checkout="a checkout of danijar/dreamerv3 at 29eb964",
    python="the python of its jax 0.4.26 venv",
    env_checkout="WMRL_DREAMERV3_REF",
    env_python="WMRL_DREAMERV3_REF_PYTHON",
)


def add_arguments(parser: argparse.ArgumentParser, ref: Reference) -> None:
    """``--ref`` and ``--ref-python``, defaulting to the reference's environment variables
    (empty when unset)."""
    parser.add_argument(
        "--ref",
        default=os.environ.get(ref.env_checkout, ""),
        help=f"{ref.checkout} (default ${ref.env_checkout}; {RECIPE})",
    )
    parser.add_argument(
        "--ref-python",
        default=os.environ.get(ref.env_python, ""),
        help=f"{ref.python} (default ${ref.env_python})",
    )


def problem(ref: Reference, checkout: str, python: str, skip: str) -> str | None:
    """What is wrong with the given checkout / python (one sentence naming the fix), or None.

    ``skip`` is the option that times our side alone, offered as the other way out."""
    fix = f"{RECIPE} has the recipe; {skip} times ours alone"
    if not checkout or not python:
        return (
            f"the {ref.name} reference timing needs --ref (or ${ref.env_checkout}): "
            f"{ref.checkout}, and --ref-python (or ${ref.env_python}): {ref.python}; {fix}"
        )
    if not os.path.isdir(checkout):
        return f"--ref {checkout}: no such directory (want {ref.checkout}); {fix}"
    if not os.access(python, os.X_OK):
        return f"--ref-python {python}: no such executable (want {ref.python}); {fix}"
    return None


def require(ref: Reference, checkout: str, python: str, skip: str) -> None:
    """Exit with status 2 and one ``error:`` line when :func:`problem` finds one."""
    if msg := problem(ref, checkout, python, skip):
        print(f"error: {msg}", file=sys.stderr)
        raise SystemExit(2)
