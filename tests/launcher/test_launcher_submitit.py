"""Cluster jobs through Hydra's submitit launcher (``hydra/launcher=submitit_local``, the
test extra), with the fake agent of ``fake_conf/``:

* a job that fails inside the job (not in the pre-check) fails the sweep: non-zero exit,
  the error in that job's submitit log and in the sweep's summary; the other job still
  runs to its final checkpoint;
* a job sent submitit's preemption signal (SIGUSR2, the local stand-in for Slurm's
  SIGUSR1/timeout) is requeued by submitit with the same config, so the same run dir,
  resumes from its latest checkpoint and ends bit-identical to an uninterrupted run,
  also when the signal lands inside a host callback (the fake agent's per-chunk sleep).

Every launch is a ``python -m launcher`` subprocess; submitit_local starts one controller
process per job (its pid is the submitit job id) and the job's task as its child.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from launcher_fakes import FAKE_CLI

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
FAKE = [
    *FAKE_CLI,
    "protocol=smoke",
    "env=probe_constant_reward",  # no gymnax import: seconds less per process
    "logger=disabled",
]
SUBMITIT = "hydra/launcher=submitit_local"
TIMING = ("time/steps_per_second", "time/chunk_seconds")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="finds the submitit task through /proc"
)


def explode(metrics: dict, chunk: int) -> None:
    """A ``post_update`` hook with a bug: a plain exception inside the job."""
    raise RuntimeError(f"hook exploded at chunk {chunk}")


# ----------------------------------------------------------------------- helpers
def _env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), out.get("PYTHONPATH", "")])
    out.setdefault("JAX_PLATFORMS", "cpu")
    return out


def _start(args: list[str], cwd: Path, name: str) -> subprocess.Popen:
    """``python -m launcher ARGS`` in ``cwd``, output to ``cwd/<name>.out`` (a new
    session: a failed test kills the launch with its submitit processes)."""
    out = (cwd / f"{name}.out").open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "launcher", *args],
        cwd=cwd,
        env=_env(),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL a launch started by :func:`_start`, with its submitit controllers and tasks."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _finish(proc: subprocess.Popen, cwd: Path, name: str, timeout: float = 240) -> str:
    try:
        proc.wait(timeout=timeout)
    finally:
        _kill(proc)
    return (cwd / f"{name}.out").read_text()


def _wait_for(what: str, probe: Callable[[], Any], proc: subprocess.Popen, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        if proc.poll() is not None:
            pytest.fail(f"the launch exited ({proc.returncode}) before {what}")
        time.sleep(0.05)
    pytest.fail(f"no {what} within {timeout} s")


def _steps(run_dir: Path) -> list[int]:
    """Env steps of the complete checkpoints (orbax renames a finished save into place)."""
    ckpts = run_dir / "checkpoints"
    return (
        sorted(int(p.name) for p in ckpts.iterdir() if p.name.isdigit()) if ckpts.exists() else []
    )


def _meta(run_dir: Path, step: int) -> dict:
    return json.loads((run_dir / "checkpoints" / str(step) / "meta" / "metadata").read_text())


def _rows(run_dir: Path, seed: int = 0) -> list[dict]:
    lines = (run_dir / "metrics" / f"seed_{seed}.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(ln).items() if k not in TIMING} for ln in lines]


def _statuses(sweep: Path) -> list[dict]:
    (path,) = (sweep / ".sweeps").glob("*.jsonl")  # one sweep id
    return sorted((json.loads(ln) for ln in path.read_text().splitlines()), key=lambda r: r["job"])


def _job_log(sweep: Path, row: dict) -> str:
    """A job's submitit logs, stdout then stderr, as its status line names them."""
    logs = [Path(p) for p in row["logs"]]
    assert [p.suffix for p in logs] == [".out", ".err"], logs
    assert all(p.parent.parent == sweep / ".submitit" for p in logs), logs  # .../<job id>/
    return "".join(p.read_text() for p in logs)


def _task_pid(sweep: Path) -> int:
    """The pid of the (single) job's task: the child of its submitit controller, whose
    pid is the job id (``<sweep dir>/.submitit/<job id>/``)."""
    (job,) = [p for p in (sweep / ".submitit").iterdir() if p.name.isdigit()]
    tasks = []
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:  # not a process, or gone
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == int(job.name) and b"submitit.core._submit" in cmdline:
            tasks.append(int(proc.name))
    assert len(tasks) == 1, tasks
    return tasks[0]


# ------------------------------------------------------------------------- tests
def test_failing_job_fails_the_sweep_with_its_error_in_log_and_summary(tmp_path):
    """agent.nan_at=5: the parameters turn NaN in the first chunk, which only the run
    loop's guard sees (RunStopped, exit status 2); the previous launcher exited 0."""
    sweep = tmp_path / "sweep"
    proc = _start(
        ["-m", *FAKE, "agent.nan_at=5,-1", SUBMITIT, f"hydra.sweep.dir={sweep}"], tmp_path, "main"
    )
    out = _finish(proc, tmp_path, "main")
    assert proc.returncode == 2, out[-3000:]
    reason = "chunk 1: metric 'Train/last' is not finite (seed index 0)"
    assert f"error: {reason}" in out

    failed, done = _statuses(sweep)
    assert failed["status"] == "failed" and "agent.nan_at=5" in failed["overrides"]
    assert failed["error"].startswith(f"RunStopped: {reason}")
    assert done["status"] == "completed" and "agent.nan_at=-1" in done["overrides"]
    assert done["error"] is None

    summary = out[out.index("sweep: 2 job(s), 1 failed") :].splitlines()
    assert summary[1].startswith("  #0 failed    agent=fake ") and "agent.nan_at=5 " in summary[1]
    assert summary[1].endswith(
        f"RunStopped: {reason}; the run stops here and its last "
        f"checkpoint is kept (lower the learning rate?) (log: {failed['logs'][1]})"
    )
    assert summary[2].startswith("  #1 completed agent=fake ")
    assert summary[2].endswith(f"agent.nan_at=-1  -> {done['run_dir']}")

    assert f"[launcher][ERROR] - job failed: {reason}" in _job_log(sweep, failed)
    assert "job failed" not in _job_log(sweep, done)
    assert _steps(Path(failed["run_dir"])) == []  # stopped before its first checkpoint
    final = _meta(Path(done["run_dir"]), 40)  # smoke: 2 chunks of 20 env steps
    assert final["chunk"] == 2 and final["tick"] == final["chunk_ticks"] * 2


def test_job_failing_with_any_exception_logs_its_traceback(tmp_path):
    """A plain exception in user code (a post_update hook): exit status 1, the traceback
    in the job's own log (on a cluster the only place the job's output lands)."""
    sweep = tmp_path / "sweep"
    hook = "callbacks.post_update=[test_launcher_submitit:explode]"
    proc = _start(["-m", *FAKE, hook, SUBMITIT, f"hydra.sweep.dir={sweep}"], tmp_path, "main")
    out = _finish(proc, tmp_path, "main")
    assert proc.returncode == 1, out[-3000:]
    assert "error: a job of the sweep failed (hook exploded at chunk 1)" in out
    (row,) = _statuses(sweep)
    assert row["status"] == "failed" and row["error"] == "RuntimeError: hook exploded at chunk 1"
    assert "sweep: 1 job(s), 1 failed" in out
    assert f"RuntimeError: hook exploded at chunk 1 (log: {row['logs'][1]})" in out
    log = _job_log(sweep, row)
    assert "job failed: RuntimeError: hook exploded at chunk 1" in log
    assert "Traceback (most recent call last)" in log and "in explode" in log


def test_exit_inside_a_host_callback_is_an_exit_not_a_job_failure():
    """submitit's signal handler exits from wherever the main thread is; inside a host
    callback (the fake agent's sleep) JAX turns the SystemExit into a JaxRuntimeError,
    which would fail the job instead of requeueing it: the job re-raises the exit."""
    import jax
    import jax.numpy as jnp

    from launcher.loop.interrupts import callback_exit as _callback_exit

    def failure(callback: Callable[[], None]) -> BaseException:
        @jax.jit
        def f(x):
            jax.debug.callback(callback)
            return x + 1

        with pytest.raises(Exception) as info:
            jax.block_until_ready(f(jnp.zeros(())))
        assert type(info.value).__name__ == "JaxRuntimeError"
        return info.value

    exit_ = _callback_exit(failure(lambda: sys.exit(144)))  # submitit_local's requeue status
    assert isinstance(exit_, SystemExit) and exit_.code == 144
    assert _callback_exit(failure(lambda: explode({}, 1))) is None
    assert _callback_exit(RuntimeError("SystemExit: 1")) is None


def test_preempted_job_is_requeued_and_resumes_bit_identically(tmp_path):
    """SIGUSR2 to the job's task mid-chunk once a checkpoint exists: submitit calls the
    launcher's checkpoint() (resubmit, same arguments), the task exits through the run
    loop's cleanup (status 144: requeue), the requeued task resumes from the latest
    checkpoint of the same run dir; the reference runs meanwhile, without submitit."""
    long = [
        *FAKE,
        "protocol.n_timesteps=160",  # 8 chunks of 20 env steps (21 ticks), one program
        "protocol.log_frequency=20",
        "protocol.checkpoint_frequency=20",  # a checkpoint after every chunk
        "agent.sleep_s=0.5",  # host time per chunk: the signal lands mid-run
    ]
    ref_dir = tmp_path / "reference"
    ref = _start([*long, f"hydra.run.dir={ref_dir}"], tmp_path, "reference")  # meanwhile
    sweep = tmp_path / "sweep"
    proc = _start(["-m", *long, SUBMITIT, f"hydra.sweep.dir={sweep}"], tmp_path, "main")
    try:
        run_dir = _wait_for(
            "a checkpoint",
            lambda: next((d for d in sweep.glob("fake-*") if _steps(d)), None),
            proc,
            180,
        )
        task = _task_pid(sweep)
        time.sleep(0.2)  # into the next chunk's 0.5 s (a host callback: see _callback_exit)
        os.kill(task, signal.SIGUSR2)
        signalled_after = _steps(run_dir)
    except BaseException:
        _kill(proc)
        _kill(ref)
        raise
    out = _finish(proc, tmp_path, "main")
    assert proc.returncode == 0, out[-3000:]
    ref_out = _finish(ref, tmp_path, "reference")
    assert ref.returncode == 0, ref_out[-3000:]
    assert max(signalled_after) < 160  # the signal came before the end

    (row,) = _statuses(sweep)
    assert row["status"] == "completed" and row["run_dir"] == str(run_dir)
    job_log = _job_log(sweep, row)
    assert "Caught signal SIGUSR2" in job_log and "Requeued job" in job_log
    launches = (run_dir / "launcher.log").read_text()
    assert launches.count("] starting ") == 1
    resumed = re.findall(r"resuming \S+ after chunk (\d+) \(timestep (\d+)\)", launches)
    assert len(resumed) == 1, launches
    chunk, step = map(int, resumed[0])
    assert 1 <= chunk < 8 and step == 20 * chunk and step >= max(signalled_after)

    assert _steps(run_dir)[-1] == _steps(ref_dir)[-1] == 160
    final, expected = _meta(run_dir, 160), _meta(ref_dir, 160)
    assert final["fingerprint"] == expected["fingerprint"]
    assert final["config_hash"] == expected["config_hash"]
    assert _rows(run_dir) == _rows(ref_dir)
    # logger=disabled lists no W&B output, so no W&B ids (their reuse across resumes:
    # test_launcher_wandb_resume); both launches recorded, the second resuming at `step`
    assert not (run_dir / "wandb_ids.json").exists()
    records = [json.loads(ln) for ln in (run_dir / "launches.jsonl").read_text().splitlines()]
    assert [r["resumed_at_step"] for r in records] == [0, step]


def test_slurm_gpu_launcher_defaults():
    """``hydra/launcher=slurm_gpu`` (the paper sweeps' cluster launcher): submitit's SLURM
    launcher with one GPU per job, a 24 h allocation, requeue on time limit."""
    from launcher.config.compose import compose

    cfg = compose(["hydra/launcher=slurm_gpu"], hydra_node=True).hydra.launcher
    assert cfg._target_.endswith("submitit_launcher.SlurmLauncher")
    assert (cfg.gpus_per_node, cfg.tasks_per_node, cfg.timeout_min) == (1, 1, 1440)
    assert cfg.max_num_timeout > 0 and cfg.signal_delay_s >= 120
    assert cfg.cpus_per_task == 8 and cfg.mem_gb == 32
