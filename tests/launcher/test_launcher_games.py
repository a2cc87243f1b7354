"""DreamerV3 on issue 46's game envs under ``protocol=smoke`` (the tiny agent, 2 envs, 40 rows
in 2 chunks of 20-step episodes):

* Breakout-MinAtar in process (episodes end at the game's own variable lengths), then
  ``python -m launcher agent=dreamerv3 env=breakout_minatar protocol=smoke`` killed with
  SIGKILL after its second chunk trained and relaunched: its metrics rows equal the
  uninterrupted run's (the subprocesses load the program the in-process run compiled, from
  the session's persistent compilation cache);
* ``launcher.evaluate RUN --video`` on the Breakout run: gymnax's MinAtar drawing.

Craftax-Classic's smoke through the command line is test_launcher_craftax_eval.py's run.
"""

from __future__ import annotations

import re
import signal

import numpy as np
import pytest
from real_agents import assert_episode_video, launcher, rows

from launcher.cli import compose_spec
from launcher.loop.run import run
from launcher.tools.evaluate import main as evaluate_main

SMOKE = ["agent=dreamerv3", "protocol=smoke", "logger=disabled"]


def train_rows(run_dir):
    return [r for r in rows(run_dir) if r["kind"] == "train"]


@pytest.fixture(scope="module")
def breakout(tmp_path_factory):
    spec = compose_spec([*SMOKE, "env=breakout_minatar"])
    return run(spec, tmp_path_factory.mktemp("games") / "breakout", plot=False)


def test_breakout_minatar_smoke(breakout):
    train = train_rows(breakout.run_dir)
    assert [r["timestep"] for r in train] == [20, 40]
    assert train[-1]["Train/n_updates"] == 16 and np.isfinite(train[-1]["Train/loss"])
    assert np.isfinite(rows(breakout.run_dir)[-1]["Eval/episodic mean reward"])
    replay = breakout.state.replay
    assert replay.obs.shape[-1] == 400  # the 10 x 10 x 4 grid, flattened
    terminal, last = np.asarray(replay.is_terminal), np.asarray(replay.is_last)
    assert not (terminal & ~last).any()
    obs = np.asarray(replay.obs)
    assert set(np.unique(obs)) <= {0.0, 1.0}  # the grid's booleans, stored as float32


def test_breakout_minatar_killed_then_relaunched_is_bit_identical(breakout, tmp_path):
    run_dir = tmp_path / "killed"
    args = ["env=breakout_minatar", *SMOKE, "logger.progress=false", f"hydra.run.dir={run_dir}"]
    proc = launcher(*args, cwd=tmp_path, check=False, WMRL_KILL_AT="trained:2")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    launcher(*args, cwd=tmp_path)
    assert rows(run_dir) == rows(breakout.run_dir)


def test_breakout_minatar_episode_video(breakout, capsys):
    run_dir = breakout.run_dir
    assert evaluate_main([str(run_dir), "--video"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("seed 0 ")]
    steps = int(re.search(r"over (\d+) steps", line)[1])
    assert line.endswith(
        " frames at 10 fps -> " + str(run_dir / "videos" / "step_40" / "seed_0_episode_0.mp4")
    )
    assert_episode_video(run_dir / "videos" / "step_40" / "seed_0_episode_0.mp4", steps + 1)
