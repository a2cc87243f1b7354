"""The repo a clone gets: no tracked file over 5 MB (checkpoints and datasets go to W&B or
stay outside the repo: benchmarks/carry_run.py), and no benchmark option that defaults to
one machine's path (the reference checkouts come from options or environment variables:
benchmarks/_refs.py)."""

from __future__ import annotations

import ast
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIMIT = 5_000_000  # bytes: "no tracked file over 5 MB" (issue 33)


def tracked_files(root: pathlib.Path) -> list[str] | None:
    """The paths ``git ls-files`` lists under ``root``, or None outside a git checkout."""
    if shutil.which("git") is None:
        return None
    proc = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=False
    )
    if proc.returncode:
        return None
    return [p for p in proc.stdout.decode().split("\0") if p]


def oversized(root: pathlib.Path, limit: int = LIMIT) -> list[str]:
    """``path (N bytes)`` for every tracked file of ``root`` larger than ``limit`` (a tracked
    file deleted from the work tree is skipped: what a commit would hold is checked)."""
    out = []
    for rel in tracked_files(root) or []:
        path = root / rel
        if path.is_file() and not path.is_symlink() and path.stat().st_size > limit:
            out.append(f"{rel} ({path.stat().st_size:,} bytes)")
    return out


def test_no_tracked_file_is_over_5_mb():
    if tracked_files(ROOT) is None:
        pytest.skip("not a git checkout (or no git): nothing is tracked to check")
    big = oversized(ROOT)
    assert not big, (
        f"tracked files over {LIMIT:,} bytes: {', '.join(big)}; keep checkpoints and datasets "
        "out of the repo (a W&B artifact, or benchmarks/carry_run.py's one-commit carry)"
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_6_mb_tracked_file_is_named(tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "small.txt").write_text("x")
    with open(tmp_path / "ckpt.tar.gz", "wb") as f:
        f.truncate(6_000_000)
    (tmp_path / "untracked.bin").write_bytes(b"\0" * 6_000_001)
    subprocess.run([*git, "add", "small.txt", "ckpt.tar.gz"], check=True)
    assert oversized(tmp_path) == ["ckpt.tar.gz (6,000,000 bytes)"]
    assert tracked_files(tmp_path / "no_repo_here") is None


def machine_path_defaults(script: pathlib.Path) -> list[str]:
    """``--option=default`` for every ``add_argument`` of ``script`` whose default is a string
    literal holding an absolute path."""
    out = []
    for node in ast.walk(ast.parse(script.read_text(), str(script))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            for kw in node.keywords:
                value = kw.value
                if (
                    kw.arg == "default"
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                    and value.value.startswith(("/", "~"))
                ):
                    flag = next((a.value for a in node.args if isinstance(a, ast.Constant)), "?")
                    out.append(f"{script.name} {flag}={value.value}")
    return out


def test_no_benchmark_option_defaults_to_a_machine_path():
    found = [
        d for s in sorted((ROOT / "benchmarks").glob("*.py")) for d in machine_path_defaults(s)
    ]
    assert not found, (
        f"benchmark options defaulting to one machine's path: {'; '.join(found)}; take it from "
        "an option or an environment variable (benchmarks/_refs.py)"
    )
