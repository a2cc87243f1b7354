"""The launcher with the real DreamerV3 agent (``protocol=smoke``: the tiny agent of
``conf/agent_protocol/dreamerv3_smoke.yaml``, 2 envs, 40 rows in 2 chunks).

* one run per kind of env: discrete gymnax (cartpole), continuous gymnax (pendulum), a
  terminating brax env (inverted_pendulum), and ``python -m launcher agent=dreamerv3
  env=walker_walk protocol=smoke`` (Playground DMC) as a subprocess;
* CartPole: a run whose ring must grow (launched for 20 rows, resumed for 40 with
  ``+resume=force``; in process, the states compared leaf by leaf) and a run killed with
  SIGKILL after its second chunk trained, then relaunched (subprocesses, the metrics rows
  compared), are each bit-identical to the uninterrupted run.
* ``launcher.evaluate RUN --video`` on the CartPole run: an MP4 drawn by gymnax's renderer.

The subprocesses share the test session's persistent compilation cache, so the kill test's
launches load the program the in-process run compiled.
"""

from __future__ import annotations

import json
import re
import signal

import jax
import numpy as np
import pytest
from real_agents import assert_episode_video, assert_judged_off_protocol, launcher, rows

from launcher.cli import compose_spec
from launcher.loop.run import run
from launcher.store.checkpoint import to_raw
from launcher.tools.evaluate import main as evaluate_main

SMOKE = ["agent=dreamerv3", "protocol=smoke", "logger=disabled"]


def spec_for(*extra: str):
    return compose_spec([*SMOKE, *extra])


def assert_states_equal(a, b, skip: tuple[str, ...] = ()):
    flat = jax.tree_util.tree_flatten_with_path(to_raw(a))[0]
    for (path, x), y in zip(flat, jax.tree.leaves(to_raw(b)), strict=True):
        name = jax.tree_util.keystr(path)
        if not any(s in name for s in skip):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y), name)


def train_rows(run_dir):
    return [r for r in rows(run_dir) if r["kind"] == "train"]


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    base = tmp_path_factory.mktemp("dreamerv3")
    full = run(spec_for("env=cartpole"), base / "full", plot=False)
    short = run(spec_for("env=cartpole", "protocol.n_timesteps=20"), base / "grow", plot=False)
    grown = run(spec_for("env=cartpole", "+resume=force"), base / "grow", plot=False)
    return dict(full=full, short=short, grown=grown)


def test_cartpole_smoke_counts_and_metrics(cartpole):
    full = cartpole["full"]
    assert full.compiles == {"init": 1, "train": 1, "evaluate": 1}
    train = train_rows(full.run_dir)
    assert [r["timestep"] for r in train] == [20, 40]  # rows: 2 envs x 10 ticks per chunk
    # smoke: B 2, T 4, ratio 4 -> r = 1/2 per row; the gate opens at tick 4 (transition 10)
    assert [r["Train/n_updates"] for r in train] == [1 + (20 - 10) // 2, 1 + (40 - 10) // 2]
    assert all(np.isfinite(r["Train/loss"]) for r in train)
    for r in train:  # NaN (JSON null) exactly when no training episode ended in the chunk
        ret = r["Train/episodic mean reward"]
        assert (ret is not None and np.isfinite(ret)) == (r["Train/episodes"] > 0)
    assert np.isfinite(rows(full.run_dir)[-1]["Eval/episodic mean reward"])
    stored = json.loads((full.run_dir / "run.json").read_text())
    assert stored["resolved_agent"]["deter"] == 32 and stored["resolved_agent"]["n_envs"] == 2
    memory = stored["memory_bytes_per_seed"]
    assert 0 < memory["replay"] < 20_000 and memory["train_state"] > 0  # ring: 20 rows/env


def test_resumed_run_whose_ring_grows_is_bit_identical(cartpole):
    """Launched for 20 rows (a 10-row ring per env), resumed for 40 (20 rows): the ring is
    zero-padded and the run continues as if it had been sized for 40 from the start. The
    first launch's final evaluation is extra (it counts in ``n_evals`` only)."""
    full, short, grown = cartpole["full"], cartpole["short"], cartpole["grown"]
    assert short.state.replay.obs.shape[2] == 10 and grown.state.replay.obs.shape[2] == 20
    assert grown.resumed_from == 1
    assert_states_equal(full.state, grown.state, skip=("n_evals",))
    assert int(full.state.n_evals[0]) == 1 and int(grown.state.n_evals[0]) == 2
    assert train_rows(full.run_dir) == train_rows(grown.run_dir)


def test_gymnax_episode_video(cartpole, capsys):
    """``python -m launcher.evaluate RUN --video`` on the gymnax CartPole run: one episode
    of the sampling policy drawn by gymnax's renderer, the reset state + one frame a step
    until the pole falls or T = 20."""
    run_dir = cartpole["full"].run_dir
    assert evaluate_main([str(run_dir), "--video"]) == 0
    out = capsys.readouterr().out
    path = run_dir / "videos" / "step_40" / "seed_0_episode_0.mp4"
    (line,) = [x for x in out.splitlines() if x.startswith("seed 0 episode 0:")]
    steps = int(re.search(r"over (\d+) steps", line)[1])
    assert line.endswith(f"{steps + 1} frames at 50 fps -> {path}") and 1 <= steps <= 20
    assert_episode_video(path, steps + 1)


def test_killed_after_training_then_relaunched_is_bit_identical(cartpole, tmp_path):
    run_dir = tmp_path / "killed"
    args = ["env=cartpole", *SMOKE, "logger.progress=false", f"hydra.run.dir={run_dir}"]
    proc = launcher(*args, cwd=tmp_path, check=False, WMRL_KILL_AT="trained:2")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    launcher(*args, cwd=tmp_path)
    assert rows(run_dir) == rows(cartpole["full"].run_dir)


@pytest.mark.parametrize(
    "env_id",
    ["pendulum", pytest.param("inverted_pendulum", marks=pytest.mark.slow)],
)
def test_smoke_on_other_kinds_of_env(env_id, tmp_path):
    """Continuous gymnax (never terminates) and a terminating brax env: a random
    inverted_pendulum drops its pole within a few steps, so the ring holds is_terminal
    rows (the cheapest terminating brax compile; hopper cost about 100 s more)."""
    result = run(spec_for(f"env={env_id}"), tmp_path / env_id, plot=False)
    train = train_rows(result.run_dir)
    assert [r["timestep"] for r in train] == [20, 40]
    assert train[-1]["Train/n_updates"] == 16 and np.isfinite(train[-1]["Train/loss"])
    assert np.isfinite(rows(result.run_dir)[-1]["Eval/episodic mean reward"])
    terminal = np.asarray(result.state.replay.is_terminal)
    assert terminal.any() == (env_id == "inverted_pendulum")
    assert not (terminal & ~np.asarray(result.state.replay.is_last)).any()


@pytest.mark.slow
def test_walker_walk_smoke_through_the_command_line(tmp_path):
    run_dir = tmp_path / "walker"
    args = ["agent=dreamerv3", "env=walker_walk", "protocol=smoke", "logger.progress=false"]
    proc = launcher(*args, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert "chunks:       2/2" in proc.stdout and "W&B offline" in proc.stdout
    train = train_rows(run_dir)
    assert [(r["timestep"], r["env_frames"]) for r in train] == [(20, 40), (40, 80)]
    assert train[-1]["Train/n_updates"] == 16 and np.isfinite(train[-1]["Train/loss"])
    stored = json.loads((run_dir / "run.json").read_text())
    assert stored["env_spec"]["episode_length"] == 10  # 20 control steps at repeat 2
    # the paper's first bin is at 10K env frames: nothing to compare an 80-frame run with
    assert_judged_off_protocol(run_dir, "dreamerv3", "walker_walk", reference=False)
