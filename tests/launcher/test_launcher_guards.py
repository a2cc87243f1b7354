"""Guards of the run loop, with the fake agent (tests/launcher/launcher_fakes.py).

* A NaN (in a metric or only in the state) or a loss past ``+max_abs_loss`` stops the
  run naming the chunk and the metric or leaf; the checkpoints saved before are
  untouched and none holds the bad state (also through the CLI: exit 2, one line).
* Run-level bad inputs (a run dir that is a file, under one, a broken link, read-only,
  unreadable; evaluating a run that never checkpointed; ``+resume=force`` shorter than
  the run): exit status 2, one ``error:`` line, the directory unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from launcher_fakes import (
    checkpoint_steps,
    kinds,
    launch,
    make_fake_env,
    one_error_line,
    tree_digest,
)
from test_launcher_process import env, rows
from test_launcher_reliability import CLI_FAKE, kill_at_point

from launcher import guards
from launcher.cli import main as cli_main
from launcher.errors import RunStopped
from launcher.evaluate import evaluate_run
from launcher.evaluate import main as evaluate_main

ckpt_steps = checkpoint_steps


# ------------------------------------------------------------------- NaN and divergence
def test_nan_loss_stops_the_run_and_keeps_the_checkpoints_before(tmp_path):
    run_dir = tmp_path / "run"
    nan = {"agent": {"nan_at": 38}}  # chunk 4 (ticks 33..43), a checkpoint chunk
    launch(run_dir, stop_after_chunks=2, **nan)
    before = tree_digest(run_dir / "checkpoints")
    assert ckpt_steps(run_dir) == [20]
    with pytest.raises(
        RunStopped, match=r"^chunk 4: metric 'Train/\w+' is not finite .*last checkpoint is kept"
    ):
        launch(run_dir, **nan)
    assert tree_digest(run_dir / "checkpoints") == before  # untouched, no checkpoint at 40
    assert kinds(run_dir, 0, "train") == kinds(run_dir, 1, "train") == [1, 2, 3]
    assert kinds(run_dir, 0, "eval") == [0, 2]
    assert "chunk 4: metric" in (run_dir / "launcher.log").read_text()
    kept = evaluate_run(run_dir, make_env=make_fake_env)  # the kept checkpoint is good
    assert kept["chunk"] == 2 and np.all(np.isfinite(kept["mean"]))
    assert tree_digest(run_dir / "checkpoints") == before


def test_nan_in_a_state_leaf_alone_stops_the_run(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(RunStopped, match=r"^chunk 4: state leaf .*buffer.* is not finite"):
        launch(run_dir, agent={"nan_state_at": 38})
    assert ckpt_steps(run_dir) == [20]
    assert kinds(run_dir, 1, "train") == [1, 2, 3]


def test_update_means_of_a_chunk_without_updates_may_be_nan(tmp_path):
    """A chunk that ran no update reports NaN update means (agent_api.Agent.train): the
    run goes on, also when it resumes into such a chunk; the rows hold null there."""
    run_dir = tmp_path / "run"
    idle = {"agent": {"idle_steps": 25}}  # chunks 1 and 2 (steps 0..20) run no update
    launch(run_dir, stop_after_chunks=1, **idle)
    launch(run_dir, **idle)
    losses = [r["Train/loss"] for r in rows(run_dir, 0) if r["kind"] == "train"]
    assert losses[:2] == [None, None]  # NaN is written as null
    assert len(losses) == 6 and np.isfinite(losses[2:]).all()


def test_idle_seeds_excuse_only_nan_in_their_own_train_metrics():
    nan_in_seed_1 = {"Train/loss": np.array([0.5, np.nan])}
    guards.check_metrics(nan_in_seed_1, 3, idle=np.array([False, True]))
    with pytest.raises(
        RunStopped, match=r"^chunk 3: metric 'Train/loss' is not finite \(seed index 1\)"
    ):
        guards.check_metrics(nan_in_seed_1, 3, idle=np.array([True, False]))
    with pytest.raises(RunStopped, match="'Train/loss' is not finite"):
        guards.check_metrics(
            {"Train/loss": np.array([np.inf, 1.0])}, 3, idle=np.array([True, True])
        )
    with pytest.raises(RunStopped, match="'Eval/x' is not finite"):
        guards.check_metrics({"Eval/x": np.array([np.nan, 1.0])}, 3, idle=np.array([True, True]))


def test_loss_past_max_abs_loss_stops_the_run(full, tmp_path):
    full_dir, _ = full
    train4 = [
        r for s in (0, 1) for r in rows(full_dir, s) if (r["kind"], r["chunk"]) == ("train", 4)
    ]
    loss4 = max(r["Train/loss"] for r in train4)
    run_dir = tmp_path / "run"
    launch(run_dir, stop_after_chunks=3)  # saved at chunk 3 (steps 20, 30)
    before = tree_digest(run_dir / "checkpoints")
    limit = loss4 / 2
    with pytest.raises(RunStopped) as err:
        launch(run_dir, max_abs_loss=limit)  # a run-control key: the same run resumes
    assert str(err.value).startswith(
        f"chunk 4: metric 'Train/loss' = {loss4:.4g} exceeds max_abs_loss={limit:g}"
    )
    assert tree_digest(run_dir / "checkpoints") == before and ckpt_steps(run_dir) == [20, 30]
    assert kinds(run_dir, 0, "train") == [1, 2, 3]


@pytest.mark.parametrize(
    ("override", "fragment", "kept"),
    [  # protocol=smoke: 2 chunks of 20 env steps, each checkpointed
        ("agent.nan_at=30", "chunk 2: metric 'Train/last' is not finite", [20]),
        ("+max_abs_loss=1e-9", "chunk 1: metric 'Train/loss' = ", []),
    ],
)
def test_guard_stop_through_the_cli_exits_2(
    override, fragment, kept, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "run"
    assert cli_main([*CLI_FAKE, f"hydra.run.dir={run_dir}", override]) == 2
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and err.rstrip("\n").endswith(errors[0]), err
    assert fragment in errors[0]
    assert ckpt_steps(run_dir) == kept  # nothing saved from the bad chunk


# ------------------------------------------------------------------- run-level bad inputs
def cli(argv, capsys) -> str:
    code = cli_main([*CLI_FAKE, *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    return one_error_line(err)


def _listing(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's bytes, a link's target (not followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = f"-> {os.readlink(path)}"
            else:
                out[rel] = "dir" if path.is_dir() else path.read_text()
    return out


def test_run_dir_that_is_a_file_or_under_one_or_a_broken_link_exits_2(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("not a run\n")
    gone = tmp_path / "scratch"  # e.g. a link to an unmounted disk
    gone.symlink_to(tmp_path / "unmounted")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    before = _listing(tmp_path)
    cases = [
        (afile, f"hydra.run.dir: {afile} is a file, not a directory"),
        (afile / "run", f"hydra.run.dir: {afile / 'run'} lies under the file {afile}"),
        (gone, f"hydra.run.dir: {gone} is a broken symbolic link (to {tmp_path / 'unmounted'})"),
        (gone / "run", f"hydra.run.dir: {gone / 'run'} lies under the broken symbolic link {gone}"),
        (loop, f"hydra.run.dir: {loop} is a broken symbolic link"),
    ]
    for run_dir, fragment in cases:
        assert fragment in cli([f"hydra.run.dir={run_dir}"], capsys)
        assert _listing(tmp_path) == before  # nothing created, the links left alone


# Read-only directories: root writes through any mode bits (and os.access says so), so
# as root a chmod proves nothing. There the directories are made read-only for real, as
# read-only bind mounts in a private mount namespace (util-linux unshare; writes fail
# with EROFS, which os.access reports); elsewhere a chmod does it.
READ_ONLY_SCRIPT = """
import contextlib, io, json, sys
from launcher.cli import main
args, dirs = json.loads(sys.argv[1]), sys.argv[2:]
out = []
for d in dirs:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([*args, f"hydra.run.dir={d}"])
    out.append([code, err.getvalue()])
print(json.dumps(out))
"""


def read_only_launches(read_only: list[Path], run_dirs: list[Path], cwd: Path) -> list:
    """``[status, stderr]`` of a CLI launch into each of ``run_dirs`` (one process) with
    the directories ``read_only`` unwritable."""
    command = [sys.executable, "-c", READ_ONLY_SCRIPT, json.dumps(CLI_FAKE), *map(str, run_dirs)]
    if os.geteuid() == 0:
        if shutil.which("unshare") is None:
            pytest.skip("running as root without unshare: no way to make a read-only dir")
        mounts = "".join(
            f"mount --bind '{d}' '{d}' && mount -o remount,bind,ro '{d}' '{d}' && "
            for d in read_only
        )
        probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
        if probe.returncode != 0:
            pytest.skip(f"running as root, and unshare -m fails: {probe.stderr.strip()!r}")
        command = ["unshare", "-m", "sh", "-c", f'{mounts}exec "$0" "$@"', *command]
    else:
        for d in read_only:
            d.chmod(0o555)
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, env=env(), cwd=cwd, timeout=300
        )
    finally:
        for d in read_only:
            d.chmod(0o755)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_read_only_run_dirs_exit_2(full, tmp_path):
    full_dir, _ = full
    ro_run = tmp_path / "ro_run"  # an existing run, read only
    shutil.copytree(full_dir, ro_run)
    ro_ckpt = tmp_path / "ro_ckpt"  # an existing run whose checkpoints/ is read only
    shutil.copytree(full_dir, ro_ckpt)
    ro_parent = tmp_path / "ro_parent"  # a new run under a read-only directory
    ro_parent.mkdir()
    before = tree_digest(tmp_path)
    cases = [
        (ro_run, f"hydra.run.dir: {ro_run}: the run directory is not writable"),
        (ro_ckpt, f"hydra.run.dir: {ro_ckpt / 'checkpoints'} is not writable"),
        (ro_parent / "run", f"hydra.run.dir: {ro_parent / 'run'}: its parent {ro_parent} is not"),
    ]
    results = read_only_launches(
        [ro_run, ro_ckpt / "checkpoints", ro_parent], [d for d, _ in cases], tmp_path
    )
    for (path, fragment), (code, err) in zip(cases, results, strict=True):
        assert code == 2, f"{path}: {err}"
        assert fragment in one_error_line(err)
    assert tree_digest(tmp_path) == before


class _AsOwnerWithoutRoot:
    """``os`` whose ``access`` answers from the owner's mode bits, as for the owner
    without root's privilege: root reads any directory, so as root an unreadable one
    exists only for such a user."""

    def __getattr__(self, name: str):
        return getattr(os, name)

    @staticmethod
    def access(path, mode, **_):
        bits = os.stat(path).st_mode
        need = ((os.R_OK, stat.S_IRUSR), (os.W_OK, stat.S_IWUSR), (os.X_OK, stat.S_IXUSR))
        return all(bits & bit for flag, bit in need if mode & flag)


def test_unreadable_run_dir_exits_2(full, tmp_path, capsys, monkeypatch):
    from launcher import guards

    full_dir, _ = full
    run_dir = tmp_path / "run"
    shutil.copytree(full_dir, run_dir)
    before = tree_digest(run_dir)
    monkeypatch.chdir(tmp_path)
    if os.geteuid() == 0:
        monkeypatch.setattr(guards, "os", _AsOwnerWithoutRoot())
    run_dir.chmod(0o333)  # write and search, no listing
    try:
        err = cli([f"hydra.run.dir={run_dir}"], capsys)
    finally:
        run_dir.chmod(0o755)
    assert f"hydra.run.dir: {run_dir}: the run directory is not readable" in err
    assert tree_digest(run_dir) == before


def test_evaluate_a_run_that_never_checkpointed_exits_2(tmp_path, capsys):
    run_dir = tmp_path / "run"
    kill_at_point(run_dir, {}, "trained:1")  # run.json and the start evaluation only
    assert ckpt_steps(run_dir) == [] and (run_dir / "run.json").exists()
    before = tree_digest(run_dir)
    assert evaluate_main([str(run_dir)]) == 2
    err = one_error_line(capsys.readouterr().err)
    assert err == f"error: {run_dir}: no checkpoint to evaluate yet (the run has not saved one)\n"
    assert tree_digest(run_dir) == before


def test_force_resume_shorter_than_already_run_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "run"
    assert cli_main([*CLI_FAKE, f"hydra.run.dir={run_dir}"]) == 0  # 40 env steps
    capsys.readouterr()
    # and what a save cut by a kill leaves (orbax removes it when a launch saves again)
    cut = run_dir / "checkpoints" / "60.orbax-checkpoint-tmp"
    cut.mkdir()
    (cut / "partial").write_bytes(b"\0" * 16)
    before = tree_digest(run_dir)
    err = cli([f"hydra.run.dir={run_dir}", "protocol.n_timesteps=20", "+resume=force"], capsys)
    assert "has already taken 40 env steps, more than n_timesteps=20" in err
    assert tree_digest(run_dir) == before
