"""launcher.loop.malloc: which allocator setting is added, and that the re-exec carries it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from launcher.loop.malloc import (
    MIMALLOC_KEEP,
    OPT_OUT,
    QUIET,
    TUNABLE,
    fast_malloc_env,
    glibc_env,
    mimalloc_library,
)

TC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
MI = "/venv/site-packages/cmeel.prefix/lib/libmimalloc.so"
LINUX = dict(platform="linux", mimalloc=None, tcmalloc=None, glibc=(2, 36), thp="madvise")


def run_fresh(code: str) -> tuple[str, dict[str, str]]:
    """(stdout, env) of ``python -c code`` started with no allocator setting of its own."""
    drop = ("LD_PRELOAD", "GLIBC_TUNABLES", OPT_OUT, *MIMALLOC_KEEP)
    env = {k: v for k, v in os.environ.items() if k not in drop}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout, env


def test_prefers_mimalloc_then_tcmalloc_and_keeps_other_preloads() -> None:
    both = {**LINUX, "mimalloc": MI, "tcmalloc": TC}
    assert fast_malloc_env({"LD_PRELOAD": "/x/libfoo.so"}, **both) == {
        "LD_PRELOAD": f"{MI}:/x/libfoo.so",
        **MIMALLOC_KEEP,
    }
    env = fast_malloc_env({"LD_PRELOAD": "/x/libfoo.so"}, **{**LINUX, "tcmalloc": TC})
    assert env == {"LD_PRELOAD": f"{TC}:/x/libfoo.so", **QUIET}


@pytest.mark.skipif(sys.platform != "linux", reason="the wheel is a Linux-only dependency")
def test_the_mimalloc_wheel_is_installed_with_the_package() -> None:
    """``cmeel-mimalloc`` is a dependency (pyproject.toml): a fresh install has the library."""
    lib = mimalloc_library()
    assert lib is not None and os.path.isfile(lib) and "libmimalloc.so" in lib


@pytest.mark.skipif(sys.platform != "linux", reason="LD_PRELOAD and /proc are Linux's")
def test_the_reexeced_process_runs_on_mimalloc() -> None:
    """After the re-exec the dynamic loader has mapped the wheel's library into the process."""
    code = (
        "from launcher.loop.malloc import reexec_with_fast_malloc as r; r(); "
        "print(any('libmimalloc' in l for l in open('/proc/self/maps')))"
    )
    assert run_fresh(code)[0].strip() == "True"


def test_mimalloc_keeps_freed_pages_without_huge_pages_unless_the_user_chose() -> None:
    """Freed pages stay mapped and no huge pages (MIMALLOC_KEEP: the image steps and the
    compiles refault them otherwise); an option already in the environment is the user's
    choice and is left as it is."""
    assert MIMALLOC_KEEP == {"MIMALLOC_PURGE_DELAY": "-1", "MIMALLOC_ALLOW_THP": "0"}
    env = fast_malloc_env({}, **{**LINUX, "mimalloc": MI})
    assert env == {"LD_PRELOAD": MI, "MIMALLOC_PURGE_DELAY": "-1", "MIMALLOC_ALLOW_THP": "0"}
    env = fast_malloc_env({"MIMALLOC_ALLOW_THP": "1"}, **{**LINUX, "mimalloc": MI})
    assert env == {"LD_PRELOAD": MI, "MIMALLOC_PURGE_DELAY": "-1", "MIMALLOC_ALLOW_THP": "1"}
    tc = fast_malloc_env({}, **{**LINUX, "tcmalloc": TC})
    assert not set(MIMALLOC_KEEP) & set(tc)  # only mimalloc reads them


def test_falls_back_to_the_tunable_and_keeps_other_tunables() -> None:
    assert fast_malloc_env({}, **LINUX)["GLIBC_TUNABLES"] == TUNABLE
    env = fast_malloc_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "A": "b"}, **LINUX)
    assert env == {"GLIBC_TUNABLES": f"glibc.malloc.arena_max=2:{TUNABLE}", "A": "b"}


@pytest.mark.parametrize(
    ("env", "where"),
    [
        ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, {"mimalloc": MI}),  # the user chose
        ({"LD_PRELOAD": "/opt/libjemalloc.so.2"}, {"mimalloc": MI, "tcmalloc": TC}),
        ({OPT_OUT: "default"}, {"mimalloc": MI, "tcmalloc": TC}),
        ({}, {"platform": "darwin", "mimalloc": MI, "tcmalloc": TC}),
        ({}, {"glibc": (2, 34)}),  # no library, and the tunable is new in glibc 2.35
        ({}, {"thp": "never"}),
    ],
)
def test_leaves_the_environment_alone(env: dict, where: dict) -> None:
    assert fast_malloc_env(env, **{**LINUX, **where}) is None


def test_reexec_runs_the_same_command_with_the_setting() -> None:
    """The child re-executes itself once: its second start sees the variables and goes on."""
    code = (
        "import os; from launcher.loop.malloc import reexec_with_fast_malloc, fast_malloc_env; "
        "again = fast_malloc_env(os.environ) is not None; reexec_with_fast_malloc(); "
        "e = os.environ.get; print(again, e('LD_PRELOAD'), e('GLIBC_TUNABLES'), "
        "e('MIMALLOC_PURGE_DELAY'), e('MIMALLOC_ALLOW_THP'))"
    )
    stdout, env = run_fresh(code)
    out, want = stdout.split(), fast_malloc_env(env) or {}
    keys = ("LD_PRELOAD", "GLIBC_TUNABLES", *MIMALLOC_KEEP)
    assert out == ["False", *(want.get(k, "None") for k in keys)]


def test_reexec_keeps_the_arguments() -> None:
    code = (
        "import sys; from launcher.loop.malloc import reexec_with_fast_malloc as r; r(); "
        "print(sys.argv)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, "a b", "c=1"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "['-c', 'a b', 'c=1']"


def test_glibc_env_undoes_every_setting_and_keeps_the_rest() -> None:
    base = {"A": "b", "LD_PRELOAD": "/x/libfoo.so", "GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}
    for where in ({"mimalloc": MI}, {"tcmalloc": TC}, {}):
        env = fast_malloc_env(base, **{**LINUX, **where})
        assert env != base and glibc_env(env) == base, where
    assert glibc_env({"LD_PRELOAD": MI}) == {}
