"""DreamerV3 on an image env under ``protocol=smoke`` (issue 47 item 3): Breakout-MinAtar
observed as its 10 x 10 x 4 grid image (``env.obs=image``; a CNN sized to it,
``agent.cnn_mults=[1,2] agent.cnn_minres=5``), 40 rows in 2 chunks:

* in process: the replay holds uint8 images, the run trains and evaluates;
* ``python -m launcher ...`` killed with SIGKILL after its second chunk trained and relaunched:
  its metrics rows equal the in-process run's (the subprocesses load the programs the
  in-process run compiled, from the session's persistent compilation cache), as
  ``test_launcher_games.py`` does for the vector env;
* TD-MPC2 refuses it in one line for its discrete actions (images it takes since issue 48:
  ``test_launcher_tdmpc2_pixels.py``);
* the DMC vision command, ``python -m launcher agent=dreamerv3 env=cartpole_balance
  env.obs=image protocol=smoke`` (64 x 64 x 3 frames drawn on the host, envs/pixels.py; the
  reference's CNN at its default size), with ``MUJOCO_GL`` unset: the launcher picks the GL.
"""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest
from real_agents import launcher, rows

from launcher.cli import compose_spec
from launcher.config.identity import config_hash, identity
from launcher.errors import ConfigError
from launcher.loop import build
from launcher.loop.run import run

IMAGE = [
    "agent=dreamerv3",
    "protocol=smoke",
    "logger=disabled",
    "env=breakout_minatar",
    "env.obs=image",
    "agent.cnn_mults=[1,2]",
    "agent.cnn_minres=5",
]


DMC_IMAGE = [
    "agent=dreamerv3",
    "env=cartpole_balance",
    "env.obs=image",
    "protocol=smoke",
    "logger=disabled",
    "logger.progress=false",
]


@pytest.fixture(scope="module")
def breakout_image(tmp_path_factory):
    spec = compose_spec(IMAGE)
    return run(spec, tmp_path_factory.mktemp("image") / "breakout", plot=False)


def test_breakout_image_smoke(breakout_image):
    train = [r for r in rows(breakout_image.run_dir) if r["kind"] == "train"]
    assert [r["timestep"] for r in train] == [20, 40]
    assert train[-1]["Train/n_updates"] == 16 and np.isfinite(train[-1]["Train/loss"])
    assert np.isfinite(rows(breakout_image.run_dir)[-1]["Eval/episodic mean reward"])
    obs = np.asarray(breakout_image.state.replay.obs)
    assert obs.dtype == np.uint8 and obs.shape[-3:] == (10, 10, 4)
    assert set(np.unique(obs)) == {0, 255}


def test_breakout_image_killed_then_relaunched_is_bit_identical(breakout_image, tmp_path):
    run_dir = tmp_path / "killed"
    args = [*IMAGE, "logger.progress=false", f"hydra.run.dir={run_dir}"]
    proc = launcher(*args, cwd=tmp_path, check=False, WMRL_KILL_AT="trained:2")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    launcher(*args, cwd=tmp_path)
    assert rows(run_dir) == rows(breakout_image.run_dir)


def test_image_mode_is_part_of_the_run_identity():
    vector, image = compose_spec(IMAGE[:4]), compose_spec(IMAGE[:5])
    assert vector.env.obs == "vector" and image.env.obs == "image"
    assert "obs" not in identity(vector)["env"]  # added_later: vector runs keep their names
    assert identity(image)["env"]["obs"] == "image"
    assert config_hash(identity(image)) != config_hash(identity(vector))
    assert build.env_facts(image.env).obs_mode == "image"


def test_tdmpc2_refuses_the_discrete_image_env():
    spec = compose_spec(["agent=tdmpc2", "env=breakout_minatar", "env.obs=image"])
    with pytest.raises(ConfigError, match="has discrete actions") as err:
        build.precheck(spec)
    assert "observed as images" not in str(err.value)  # images are no longer refused


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("MUJOCO_GL") == "disable", reason="no OpenGL: apt-get install libosmesa6"
)
def test_dmc_image_smoke_from_the_command_line(tmp_path):
    run_dir = tmp_path / "cartpole"
    # MUJOCO_GL="" leaves it unset in the launcher (real_agents drops empty values)
    launcher(*DMC_IMAGE, f"hydra.run.dir={run_dir}", cwd=tmp_path, MUJOCO_GL="")
    train = [r for r in rows(run_dir) if r["kind"] == "train"]
    assert [r["timestep"] for r in train] == [20, 40]
    assert train[-1]["Train/n_updates"] > 0 and np.isfinite(train[-1]["Train/loss"])
    assert np.isfinite(rows(run_dir)[-1]["Eval/episodic mean reward"])
    spec = json.loads((run_dir / "run.json").read_text())["env_spec"]
    assert (spec["obs_mode"], spec["image_shape"], spec["obs_size"]) == ("image", [64, 64, 3], 0)


def test_dmc_image_without_opengl_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "disable")
    spec = compose_spec(DMC_IMAGE)
    with pytest.raises(ConfigError, match="env.obs=image: MUJOCO_GL=disable turns MuJoCo's"):
        build.make_env(spec)
