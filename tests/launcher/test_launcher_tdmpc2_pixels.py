"""TD-MPC2 from pixels under ``protocol=smoke`` (issue 48): the pixel probe observed as 64 x 64
RGB images (``env=probe_pixel_point env.obs=image``), the smoke agent with a one-channel conv
encoder (the default width, latent_dim / 16 = 1: T53), 40 rows in 2 chunks of one 20-step
episode:

* in process: the replay holds the env's uint8 frames, the run trains and evaluates;
* ``python -m launcher ...`` killed with SIGKILL after its second chunk trained and relaunched:
  its metrics rows equal the in-process run's (the subprocesses load the programs the
  in-process run compiled, from the session's persistent compilation cache), as
  ``test_launcher_image_envs.py`` does for DreamerV3;
* a DMC task from pixels, ``python -m launcher agent=tdmpc2 env=cartpole_balance env.obs=image
  protocol=smoke`` (frames drawn on the host, envs/pixels.py), through the command line's
  ``main`` in this process, and killed and relaunched the same way as the probe.
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from real_agents import launcher, rows

from launcher.cli import compose_spec, main
from launcher.loop.run import run

PIXELS = [
    "agent=tdmpc2",
    "protocol=smoke",
    "logger=disabled",
    "env=probe_pixel_point",
    "env.obs=image",
]


@pytest.fixture(scope="module")
def pixel_run(tmp_path_factory):
    spec = compose_spec(PIXELS)
    return run(spec, tmp_path_factory.mktemp("pixels") / "point", plot=False)


def test_pixel_probe_smoke(pixel_run):
    train = [r for r in rows(pixel_run.run_dir) if r["kind"] == "train"]
    assert [r["timestep"] for r in train] == [20, 40]
    assert train[-1]["Train/n_updates"] > 0 and np.isfinite(train[-1]["Train/total_loss"])
    assert np.isfinite(rows(pixel_run.run_dir)[-1]["Eval/episodic mean reward"])
    obs = np.asarray(pixel_run.state.buffer.obs)  # [seeds, episodes, T + 1, 64, 64, 3]
    assert obs.dtype == np.uint8 and obs.shape[-3:] == (64, 64, 3)
    assert set(np.unique(obs)) == {0, 255}
    written = obs[0, :2]  # the two episodes collected: every row shows the 3 x 3 target
    assert (written[..., 1].sum(axis=(-1, -2)) == 9 * 255).all()
    carry_mean, carry_stack = pixel_run.state.collector.policy_carry
    assert carry_stack.dtype == np.uint8 and carry_stack.shape[-3:] == (64, 64, 9)


def test_pixel_probe_killed_then_relaunched_is_bit_identical(pixel_run, tmp_path):
    run_dir = tmp_path / "killed"
    args = [*PIXELS, "logger.progress=false", f"hydra.run.dir={run_dir}"]
    proc = launcher(*args, cwd=tmp_path, check=False, WMRL_KILL_AT="trained:2")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    launcher(*args, cwd=tmp_path)
    assert rows(run_dir) == rows(pixel_run.run_dir)


DMC_PIXELS = ["agent=tdmpc2", "env=cartpole_balance", "env.obs=image", "protocol=smoke"]
DMC_PIXELS += ["logger=disabled", "logger.progress=false"]


@pytest.fixture(scope="module")
def dmc_pixel_run(tmp_path_factory):
    """The DMC pixel smoke through the command line's ``main`` in this process: its run dir."""
    run_dir = tmp_path_factory.mktemp("dmc_pixels") / "cartpole"
    args = [*DMC_PIXELS, "hydra/job_logging=none", "hydra/hydra_logging=none"]
    assert main([*args, f"hydra.run.dir={run_dir}"]) == 0
    return run_dir


@pytest.mark.slow
def test_dmc_pixels_smoke_from_the_command_line(dmc_pixel_run):
    train = [r for r in rows(dmc_pixel_run) if r["kind"] == "train"]
    assert [r["timestep"] for r in train] == [20, 40]
    assert train[-1]["Train/n_updates"] > 0 and np.isfinite(train[-1]["Train/total_loss"])
    assert np.isfinite(rows(dmc_pixel_run)[-1]["Eval/episodic mean reward"])


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("MUJOCO_GL") == "disable", reason="no OpenGL: apt-get install libosmesa6"
)
def test_dmc_pixels_killed_then_relaunched_is_bit_identical(dmc_pixel_run, tmp_path):
    """Killed after its second chunk trained, relaunched: the frames drawn on the host after
    the restore and the stacks rebuilt from the restored buffer give the uninterrupted rows."""
    run_dir = tmp_path / "killed"
    args = [*DMC_PIXELS, f"hydra.run.dir={run_dir}"]
    # MUJOCO_GL="" leaves it unset in the launcher (real_agents drops empty values)
    proc = launcher(*args, cwd=tmp_path, check=False, WMRL_KILL_AT="trained:2", MUJOCO_GL="")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    launcher(*args, cwd=tmp_path, MUJOCO_GL="")
    assert rows(run_dir) == rows(dmc_pixel_run)
