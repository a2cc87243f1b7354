"""launcher.malloc: when the huge-page tunable is added, and that the re-exec carries it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from launcher.malloc import OPT_OUT, TUNABLE, huge_page_env

LINUX = dict(platform="linux", glibc=(2, 36), thp="madvise")


def test_adds_the_tunable_and_keeps_other_tunables() -> None:
    assert huge_page_env({}, **LINUX)["GLIBC_TUNABLES"] == TUNABLE
    env = huge_page_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "A": "b"}, **LINUX)
    assert env == {"GLIBC_TUNABLES": f"glibc.malloc.arena_max=2:{TUNABLE}", "A": "b"}


@pytest.mark.parametrize(
    ("env", "where"),
    [
        ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, {}),  # the user's own choice stands
        ({OPT_OUT: "default"}, {}),
        ({}, {"platform": "darwin"}),
        ({}, {"glibc": (2, 34)}),  # the tunable is new in glibc 2.35
        ({}, {"thp": "never"}),
    ],
)
def test_leaves_the_environment_alone(env: dict, where: dict) -> None:
    assert huge_page_env(env, **{**LINUX, **where}) is None


def test_reexec_runs_the_same_command_with_the_tunable() -> None:
    """The child re-executes itself once: its second start sees the variable and goes on."""
    code = (
        "import os, sys; from launcher.malloc import reexec_with_huge_pages, huge_page_env; "
        "want = huge_page_env(os.environ) is not None; reexec_with_huge_pages(); "
        "print(want, os.environ.get('GLIBC_TUNABLES'), sys.argv[1:])"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "GLIBC_TUNABLES"}
    out = subprocess.run(
        [sys.executable, "-c", code, "x=1"], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "False"  # the printing run is the re-executed one: nothing left to add
    expected = TUNABLE if huge_page_env(env) is not None else "None"
    assert out[1] == expected and out[2:] == ["['x=1']"]
