"""Guards of the run loop, with the fake agent (tests/launcher/launcher_fakes.py).

* A NaN (in a metric or only in the state) or a loss past ``+max_abs_loss`` stops the
  run naming the chunk and the metric or leaf; the checkpoints saved before are
  untouched and none holds the bad state (also through the CLI: exit 2, one line).
* Run-level bad inputs (a run dir that is a file, under one, a broken link, read-only,
  unreadable; evaluating a run that never checkpointed; ``+resume=force`` shorter than
  the run): exit status 2, one ``error:`` line, the directory unchanged.
* The CPU budget's estimate (``launcher.config.cpu_budget``, the agents' ``cost.py``): within 2x of
  measured launches, following the train ratio, batch, envs, model size, planner and
  evaluations; a refusal offers what fits and never the protocol in use.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
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

from launcher.cli import compose_spec
from launcher.cli import main as cli_main
from launcher.config import cpu_budget, guards
from launcher.errors import ConfigError, RunStopped
from launcher.tools.evaluate import evaluate_run
from launcher.tools.evaluate import main as evaluate_main

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
    from launcher.store import rundir

    full_dir, _ = full
    run_dir = tmp_path / "run"
    shutil.copytree(full_dir, run_dir)
    before = tree_digest(run_dir)
    monkeypatch.chdir(tmp_path)
    if os.geteuid() == 0:
        monkeypatch.setattr(rundir, "os", _AsOwnerWithoutRoot())
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


# ------------------------------------------------------------------- the CPU budget's estimate
# Composition only (compose_spec: nothing built or compiled): the agents' CPU models
# (agents/<agent>/cost.py) through launcher.config.cpu_budget, on one core unless said.
def cpu(*overrides: str, cores: int = 1) -> cpu_budget.CpuEstimate:
    return cpu_budget.estimate(compose_spec([*overrides, "+allow_long_cpu_run=true"]), cores)


# Launches measured on the 2-core box, one seed each, compile included: CPU seconds (user +
# sys) from benchmarks/cpu_estimate_check.py (docs/PERFORMANCE.md "CPU budget estimate",
# 2026-12-04, persistent compile cache off), and wall seconds reported by issue 30 / README.
SHORT = ["protocol.n_timesteps=2000", "protocol.checkpoint_frequency=1000"]
MEASURED = [
    (["env=pendulum", "protocol=smoke"], 22),
    (["agent=dreamerv3", "env=pendulum", "protocol=smoke"], 20),
    (["env=pendulum", "protocol=quick", *SHORT], 103),
    (["env=pendulum", "protocol=quick", "agent.n_envs=4", *SHORT], 91),
    (["agent=dreamerv3", "env=acrobot", "protocol=quick", *SHORT], 117),  # 8 envs
    # issue 30: 16,000 rows of DreamerV3 quick on Acrobot ran in 12 min 16 s (the old
    # constant estimate said 4.2 h)
    (["agent=dreamerv3", "env=acrobot", "protocol=quick", "protocol.n_timesteps=16000"], 736),
    # `make run` (TD-MPC2 pendulum quick, 6,000 steps) on a fresh clone, 2026-12-04 23:02:
    # 171 s wall (README: about 3-5 minutes)
    (["env=pendulum", "protocol=quick"], 171),
]


@pytest.mark.parametrize(("overrides", "seconds"), MEASURED, ids=lambda x: str(x))
def test_the_cpu_estimate_is_within_2x_of_measured_launches(overrides, seconds):
    """The old constants were 7-9x too high on the quick runs (0.33-0.95 s per row for
    DreamerV3 at 1m, 0.40 s per step for TD-MPC2 at size 1)."""
    wall = cpu(*overrides).wall_s
    assert seconds / 2 <= wall <= 2 * seconds, (wall, seconds)


def test_the_dreamerv3_estimate_follows_the_train_ratio_batch_and_envs():
    paper = cpu("agent=dreamerv3", "env=walker_walk")  # 12m, ratio 512, B 16 x T 64, 16 envs
    half = cpu("agent=dreamerv3", "env=walker_walk", "agent.train_ratio=256")
    assert paper.cost.updates == pytest.approx(250_000 * 512 / (16 * 64), rel=0.01)
    assert half.cost.updates == pytest.approx(paper.cost.updates / 2, rel=0.01)
    assert half.per_step_s == pytest.approx(paper.per_step_s / 2, rel=0.05)  # updates dominate
    # twice the batch: each update costs ~2x, the same ratio runs half as many
    big = cpu("agent=dreamerv3", "env=walker_walk", "agent.batch_size=32")
    assert big.cost.update_s == pytest.approx(2 * paper.cost.update_s, rel=0.1)
    assert big.cost.updates == pytest.approx(paper.cost.updates / 2, rel=0.01)
    # the envs change the acting calls, not the updates per row
    few = cpu("agent=dreamerv3", "env=walker_walk", "agent.n_envs=4")
    assert few.cost.acts == 4 * paper.cost.acts
    assert few.cost.updates == pytest.approx(paper.cost.updates, rel=0.01)


def test_the_model_size_sets_the_cost_of_an_update_at_the_measured_figures():
    """The calibration points (docs/PERFORMANCE.md, one pinned core): DreamerV3's train step
    0.54-0.59 s at 1m and 4.4-5.0 s at 12m (+7% outside the step), walker dims, B 16 x T
    64; TD-MPC2's update / decision 0.139 / 0.150 s at size 1, 0.386 / 0.351 s at size 5."""
    dv3_1m = cpu("agent=dreamerv3", "env=walker_walk", "model_size=dreamerv3_1m").cost
    dv3_12m = cpu("agent=dreamerv3", "env=walker_walk").cost
    assert dv3_1m.update_s == pytest.approx(0.6, rel=0.15)
    assert dv3_12m.update_s == pytest.approx(5.0, rel=0.15)
    td1 = cpu("env=walker_walk", "model_size=tdmpc2_1").cost
    td5 = cpu("env=walker_walk").cost
    assert (td1.update_s, td1.act_s) == pytest.approx((0.139, 0.150), rel=0.15)
    assert (td5.update_s, td5.act_s) == pytest.approx((0.386, 0.351), rel=0.15)


def test_the_tdmpc2_estimate_follows_seed_steps_batch_horizon_and_the_planner():
    quick = cpu("env=pendulum", "protocol=quick")  # 6,000 steps, 1,000 seed steps
    # 1,001 random steps (step <= seed_steps), a burst of 1,000 updates, then one update
    # and one decision per step (agents/tdmpc2/schedule.py)
    assert (quick.cost.updates, quick.cost.acts) == (5_999, 4_999)
    assert quick.evaluations == 7  # at 0 and every 1,000
    train, evals = quick.cost.train_s, quick.evaluations * quick.cost.eval_s
    assert 0.3 < evals / train < 3  # 7 x 5 episodes x 200 decisions: as much as training
    for key, value in (("batch_size", 128), ("horizon", 6)):
        more = cpu("env=pendulum", "protocol=quick", f"agent.{key}={value}").cost
        assert more.update_s > 1.5 * quick.cost.update_s, key
    planner = cpu("env=pendulum", "protocol=quick", "agent.num_samples=512", "agent.iterations=6")
    assert planner.cost.act_s > 3 * quick.cost.act_s
    assert planner.cost.update_s == quick.cost.update_s


def test_seeds_share_the_cores_and_the_compile_is_paid_once():
    one = cpu("env=pendulum", "protocol=quick")
    two = cpu("env=pendulum", "protocol=quick", "protocol.seeds=[0,1]")
    two_cores = cpu("env=pendulum", "protocol=quick", "protocol.seeds=[0,1]", cores=2)
    per_seed = one.wall_s - one.fixed_s
    assert two.wall_s == pytest.approx(one.fixed_s + 2 * per_seed)
    assert two_cores.wall_s == pytest.approx(one.wall_s)


def test_the_refusal_never_suggests_the_protocol_in_use():
    quick = compose_spec(
        ["agent=dreamerv3", "env=acrobot", "protocol=quick", "protocol.n_timesteps=1000000"]
    )
    with pytest.raises(ConfigError) as err:
        guards.check_cpu_budget(quick, backend="cpu")
    text = str(err.value)
    assert "protocol=quick" not in text.split(": this machine")[1]
    fits = int(re.search(r"protocol\.n_timesteps=(\d+)", text).group(1))
    limit = guards.CPU_HOURS_LIMIT * 3600
    assert cpu_budget.estimate(quick, n_timesteps=fits).wall_s <= limit
    step = quick.protocol.log_frequency
    assert cpu_budget.estimate(quick, n_timesteps=fits + step).wall_s > limit
    assert "s per step per seed: " in text and "updates x" in text
    assert text.endswith("add +allow_long_cpu_run=true to start it anyway")
    # another protocol: the agent's CPU-sized run is offered
    paper = compose_spec(["agent=dreamerv3", "env=acrobot"])
    offer = "for a CPU, run python -m launcher agent=dreamerv3 env=cartpole protocol=quick instead"
    with pytest.raises(ConfigError, match=re.escape(offer)):
        guards.check_cpu_budget(paper, backend="cpu")


@pytest.mark.parametrize("agent", ["tdmpc2", "dreamerv3"])
def test_the_offered_cpu_sized_run_fits_the_budget(agent):
    """What the refusal offers first is itself accepted on this machine's CPU: the quick
    protocol on an env the agent runs, estimated under the 4-hour limit."""
    paper = compose_spec([f"agent={agent}"])
    command = guards.cpu_sized_command(paper)
    assert command.startswith(f"python -m launcher agent={agent} ")
    offered = command.removeprefix("python -m launcher ").split()
    assert "protocol=quick" in offered
    quick = compose_spec(offered)
    guards.check_cpu_budget(quick, backend="cpu")  # no refusal
    assert cpu_budget.estimate(quick).wall_s <= guards.CPU_HOURS_LIMIT * 3600


def test_an_agent_without_a_cpu_sized_run_is_offered_only_the_shorter_run():
    spec = compose_spec(["agent=dreamerv3", "env=acrobot"])
    bare = dataclasses.replace(
        spec.entry, tables=dataclasses.replace(spec.entry.tables, cpu_sized=())
    )
    spec = dataclasses.replace(spec, entry=bare)
    assert guards.cpu_sized_command(spec) is None
    with pytest.raises(ConfigError) as err:
        guards.check_cpu_budget(spec, backend="cpu")
    assert "for a CPU, run" not in str(err.value)
    assert str(err.value).endswith("add +allow_long_cpu_run=true to start it anyway")


def test_the_suggested_length_is_whole_ticks_of_the_agents_envs():
    """3 envs and chunks of 1,000 steps: the offered n_timesteps is a multiple of 3,000, so
    the launcher accepts it (a run's steps must be whole ticks of all envs)."""
    spec = compose_spec(
        ["agent=dreamerv3", "env=acrobot", "protocol=quick", "agent.n_envs=3"]
        + ["protocol.n_timesteps=999000"]
    )
    with pytest.raises(ConfigError) as err:
        guards.check_cpu_budget(spec, backend="cpu")
    fits = int(re.search(r"protocol\.n_timesteps=(\d+)", str(err.value)).group(1))
    assert fits % math.lcm(spec.protocol.log_frequency, 3) == 0
    compose_spec(
        ["agent=dreamerv3", "env=acrobot", "protocol=quick", "agent.n_envs=3"]
        + [f"protocol.n_timesteps={fits}"]
    )  # accepted by the config's rules
