"""The launcher with the real TD-MPC2 agent (tiny smoke configs).

* ``python -m launcher agent=tdmpc2 env=cartpole_balance protocol=smoke`` runs on CPU, and a
  relaunch restores its final checkpoint (MJX state, zero-size leaves included) exactly
  (cartpole: the smallest Playground model; walker's compile took ~200 s of CI here, and
  walker is launched by the DreamerV3 CLI smoke and built by the registry smoke);
  ``python -m launcher.evaluate RUN --video`` renders that run's episode to MP4 (MuJoCo, EGL);
* ``python -m launcher -m env=pendulum,probe_constant_reward protocol=smoke`` runs a
  multirun with the basic launcher (the README's multirun sweeps ``cartpole_balance``
  instead of the probe: the same sweep machinery, and a Playground launch is what the
  walker smoke above runs; the probe saves that second MJX compile, about 120 s of CI);
* in process: a run split by a relaunch is bit-identical to an uninterrupted one, and the
  train function is compiled once.

The subprocesses share the test session's persistent compilation cache (and its matmul
precision), so a program compiled by one launch is loaded by the next.
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest
from launcher_fakes import checkpoint_steps, one_error_line
from real_agents import (
    assert_episode_video,
    assert_judged_off_protocol,
    checkpoint_meta,
    launcher,
    rows,
)

from envs.pixels import default_mujoco_gl
from launcher.cli import compose_spec
from launcher.loop.run import run
from launcher.store.checkpoint import fingerprint, to_raw
from launcher.tools.evaluate import main as evaluate_main

SMOKE = ["protocol=smoke", "logger.progress=false"]


@pytest.fixture(scope="module")
def cartpole_balance(tmp_path_factory):
    """The Playground smoke run through the command line: (run dir, its args, the launch)."""
    base = tmp_path_factory.mktemp("tdmpc2_playground")
    run_dir = base / "cartpole"
    args = ["agent=tdmpc2", "env=cartpole_balance", *SMOKE, f"hydra.run.dir={run_dir}"]
    return run_dir, args, launcher(*args, cwd=base)


@pytest.mark.slow
def test_playground_smoke_runs_and_its_checkpoint_restores(cartpole_balance):
    run_dir, args, first = cartpole_balance
    assert "chunks:       2/2" in first.stdout and "W&B offline" in first.stdout
    kinds = [(r["kind"], r["chunk"]) for r in rows(run_dir)]
    assert kinds == [("train", 1), ("train", 2), ("eval", 2)]
    last = rows(run_dir)[1]
    assert last["timestep"] == 40 and last["env_frames"] == 80 and last["Train/n_updates"] > 0
    assert np.isfinite(rows(run_dir)[2]["Eval/episodic mean reward"])
    ids = json.loads((run_dir / "wandb_ids.json").read_text())
    assert list((run_dir / "wandb").glob(f"offline-run-*-{ids['0']}"))
    assert (run_dir / "plots" / "learning_curves.png").exists()
    stored = json.loads((run_dir / "run.json").read_text())
    assert stored["env_spec"]["episode_length"] == 10 and stored["resolved_agent"]["mlp_dim"] == 32
    # relaunching the same command restores the final checkpoint (verified bit for bit
    # against its fingerprint), says the run is complete and writes nothing: no new
    # W&B offline run, no metrics rows
    offline = sorted((run_dir / "wandb").glob("offline-run-*"))
    again = launcher(*args, cwd=run_dir.parent)
    assert "already complete" in again.stdout and "final eval:" in again.stdout
    assert sorted((run_dir / "wandb").glob("offline-run-*")) == offline
    assert not (run_dir / "corrupt_checkpoints").exists()
    assert len(rows(run_dir)) == 3
    assert_judged_off_protocol(run_dir, "tdmpc2", "cartpole_balance", reference=True)


@pytest.mark.slow
def test_playground_episode_video(cartpole_balance, monkeypatch, capsys):
    """``python -m launcher.evaluate RUN --video`` on the Playground run: MuJoCo's renderer
    with the GL the launcher picks when ``MUJOCO_GL`` is unset (NVIDIA egl, else osmesa, else
    Mesa egl: envs.pixels.default_mujoco_gl), in a subprocess (this session's MuJoCo is
    imported already)."""
    run_dir = cartpole_balance[0]
    # rendering switched off: one error line naming the setting and the fix, nothing written
    monkeypatch.setenv("MUJOCO_GL", "disable")
    assert evaluate_main([str(run_dir), "--video"]) == 2
    err = one_error_line(capsys.readouterr().err)
    assert err.startswith("error: --video: MUJOCO_GL=disable turns MuJoCo's renderer off")
    assert "MUJOCO_GL=egl" in err and "apt install libegl1" in err
    assert not (run_dir / "videos").exists()
    if default_mujoco_gl() == "disable":
        pytest.skip("no OpenGL library: apt install libosmesa6 (make install does, as root)")
    proc = launcher(  # MUJOCO_GL="" leaves it unset (real_agents drops empty values)
        str(run_dir), "--video", cwd=run_dir.parent, module="launcher.evaluate", MUJOCO_GL=""
    )
    path = run_dir / "videos" / "step_40" / "seed_0_episode_0.mp4"
    assert f"over 10 steps, 11 frames at 50 fps -> {path}" in proc.stdout, proc.stdout
    assert_episode_video(path, 11)  # T = 10 agent steps (20 control steps at repeat 2) + reset


@pytest.mark.slow
def test_multirun_smoke_with_the_basic_launcher(tmp_path):
    sweep = "env=pendulum,probe_constant_reward"
    proc = launcher("-m", sweep, *SMOKE, "logger=disabled", cwd=tmp_path)
    dirs = sorted(
        p.name for p in (tmp_path / "runs").iterdir() if p.is_dir() and p.name != ".sweeps"
    )
    names = [s.run_name for s in (compose_spec([f"env={e}", *SMOKE]) for e in ("pendulum",))]
    assert names[0] in dirs and len(dirs) == 2
    assert any(d.startswith("tdmpc2-probe_constant_reward-") for d in dirs)
    for d in dirs:
        assert [r["kind"] for r in rows(tmp_path / "runs" / d)] == ["train", "train", "eval"]
    assert proc.stdout.count("chunks:       2/2") == 2
    assert (tmp_path / "runs" / "multirun.yaml").exists()


@pytest.fixture(scope="module")
def pendulum_runs(tmp_path_factory):
    """Pendulum smoke (2 chunks), uninterrupted and split by a relaunch, in process."""
    spec = compose_spec(["env=pendulum", *SMOKE, "logger=disabled"])
    base = tmp_path_factory.mktemp("tdmpc2")
    full = run(spec, base / "full", plot=False)
    stop = compose_spec(["env=pendulum", *SMOKE, "logger=disabled", "+stop_after_chunks=1"])
    half = run(stop, base / "split", plot=False)
    rest = run(spec, base / "split", plot=False)
    return full, half, rest


def test_tdmpc2_resume_is_bit_identical(pendulum_runs):
    full, half, rest = pendulum_runs
    assert half.stopped_early and rest.resumed_from == 1
    assert rest.chunks_done == full.chunks_done == 2
    a = jax.tree_util.tree_flatten_with_path(to_raw(full.state))[0]
    b = jax.tree.leaves(to_raw(rest.state))
    for (path, x), y in zip(a, b, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), jax.tree_util.keystr(path))
    assert fingerprint(full.state) == fingerprint(rest.state)
    assert rows(full.run_dir) == rows(rest.run_dir)


def test_tdmpc2_counters_compiles_and_capacity(pendulum_runs):
    full, _, _ = pendulum_runs
    assert full.compiles == {"init": 1, "train": 1, "evaluate": 1}
    train = [r for r in rows(full.run_dir) if r["kind"] == "train"]
    assert [r["timestep"] for r in train] == [20, 40]
    assert train[-1]["Train/n_updates"] > 0
    stored = json.loads((full.run_dir / "run.json").read_text())
    # replay sized from the run's 40 steps (2 rounds of T=20 + staging), not 1M
    assert stored["memory_bytes_per_seed"]["replay"] < 10_000
    assert checkpoint_meta(full.run_dir)["n_timesteps"] == 40


def test_tdmpc2_seeds_sharded_over_4_cpu_devices_match_unsharded(pendulum_runs, tmp_path):
    """Seed 0 of a 4-seed run sharded over 4 CPU devices against the unsharded 1-seed run:
    the same episodes and counters, the losses equal to float32 rounding (the partitioned
    program is another XLA program; the fake-agent test shows the launcher's part is
    bit-exact)."""
    full, _, _ = pendulum_runs
    run_dir = tmp_path / "sharded"
    launcher(
        "env=pendulum",
        *SMOKE,
        "logger=disabled",
        "protocol.seeds=[0,1,2,3]",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
        XLA_FLAGS=os.environ["XLA_FLAGS"] + " --xla_force_host_platform_device_count=4",
    )
    assert json.loads((run_dir / "run.json").read_text())["n_devices"] == 4
    sharded, single = rows(run_dir, 0), rows(full.run_dir, 0)
    assert [r.keys() for r in sharded] == [r.keys() for r in single]
    for a, b in zip(sharded, single, strict=True):
        for key in a:
            # None: a NaN update mean of a chunk without updates (the seed phase)
            if isinstance(a[key], str | None) or key in ("chunk", "timestep", "Train/n_updates"):
                assert a[key] == b[key], key
            else:
                np.testing.assert_allclose(a[key], b[key], rtol=1e-4, atol=1e-6, err_msg=key)
    finals = [rows(run_dir, s)[-1]["Eval/episodic mean reward"] for s in range(4)]
    assert np.isfinite(finals).all() and len(set(finals)) == 4


def test_export_round_trip_from_a_run(pendulum_runs, tmp_path):
    """``python -m launcher.export``: every committed episode of the run, in collection
    order, as a dataset whose load gives the ring's arrays back and whose hash is stable."""
    from agents.tdmpc2.dataset import MultiTaskDataset
    from launcher.tools.export import export_run, main

    full, _, _ = pendulum_runs
    res = export_run(full.run_dir, tmp_path / "d")
    data = MultiTaskDataset.load(tmp_path / "d")
    assert res["episodes"] == data.num_episodes == 2 and data.names == ("pendulum",)
    assert data.tasks[0].episode_length == 20 and data.tasks[0].obs_dim == 3
    buf = jax.tree.map(np.asarray, jax.device_get(full.state.buffer))
    # the smoke run's 42 ticks fill rounds 0 and 1 of the ring (+ a staging round): in order
    np.testing.assert_array_equal(data.obs, buf.obs[0][:2])
    np.testing.assert_array_equal(data.action, buf.action[0][:2])
    np.testing.assert_array_equal(data.reward, buf.reward[0][:2])
    assert data.obs[:, :, :].any(axis=-1).all()  # real observations on every row
    assert res["sha256"] == data.content_hash()
    assert export_run(full.run_dir, tmp_path / "again")["sha256"] == res["sha256"]
    evals = [r for r in rows(full.run_dir) if r["kind"] == "eval"]
    assert data.source["final_eval_return"] == {"0": evals[-1]["Eval/episodic mean reward"]}
    assert main([str(full.run_dir), str(tmp_path / "d")]) == 2  # refuses an existing OUT


def test_two_envs_end_on_a_hold_tick_without_a_chunk_of_its_own(tmp_path):
    """Two envs on T 20: 21 ticks (20 steps per env + the reset after the last one) in
    chunks of 10. The one tick left takes no env step; as a chunk of its own its checkpoint
    had the previous one's name (orbax StepAlreadyExistsError). It joins the last chunk."""
    spec = compose_spec(["env=pendulum", *SMOKE, "logger=disabled", "agent.n_envs=2"])
    result = run(spec, tmp_path / "run", plot=False)
    assert result.n_chunks == result.chunks_done == 2
    assert checkpoint_steps(result.run_dir) == [20, 40]
    assert [r["timestep"] for r in rows(result.run_dir) if r["kind"] == "train"] == [20, 40]
