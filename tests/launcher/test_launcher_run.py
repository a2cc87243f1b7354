"""The run loop with the fake agent, in process: chunks, compile count, metrics files,
resume (stop / relaunch, corrupt checkpoint, changed config, force extension),
checkpoints kept, callbacks, W&B offline files, report and evaluate."""

from __future__ import annotations

import json
import logging
import shutil
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest
from launcher_fakes import (
    benchmark_script,
    fake_config,
    launch,
    make_fake_env,
    state_arrays,
    tree_digest,
)

from analysis.cli import main as report_main
from analysis.report import plot_run
from launcher.config.validate import resolve
from launcher.errors import ConfigError
from launcher.loop.callbacks import Callbacks
from launcher.loop.run import TIMING_KEYS
from launcher.loop.summary import summary
from launcher.store.rundir import read_metrics
from launcher.tools.evaluate import evaluate_run


def metric_rows(run_dir: Path, seed: int) -> list[dict]:
    rows = read_metrics(Path(run_dir) / "metrics" / f"seed_{seed}.jsonl")
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


def assert_same_run(a, b) -> None:
    sa, sb = state_arrays(a.state), state_arrays(b.state)
    assert sa.keys() == sb.keys()
    for key in sa:
        np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)
    for seed in a.spec.protocol.seeds:
        assert metric_rows(a.run_dir, seed) == metric_rows(b.run_dir, seed)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """An uninterrupted 6-chunk run of 2 seeds (eval at start and every 2 chunks)."""
    return launch(tmp_path_factory.mktemp("base") / "run", plot=True)


def test_chunks_metrics_and_no_recompilation(base):
    assert base.chunks_done == base.n_chunks == 6
    assert base.compiles == {"init": 1, "train": 1, "evaluate": 1}
    rows = metric_rows(base.run_dir, 0)
    train = [r for r in rows if r["kind"] == "train"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [r["chunk"] for r in train] == [1, 2, 3, 4, 5, 6]
    assert [r["timestep"] for r in train] == [10, 20, 30, 40, 50, 60]
    assert [(r["chunk"], r["timestep"]) for r in evals] == [(0, 0), (2, 20), (4, 40), (6, 60)]
    assert all(len(r["Eval/episode returns"]) == 2 for r in evals)
    # per-seed files differ (independent seeds)
    assert metric_rows(base.run_dir, 0) != metric_rows(base.run_dir, 1)
    # the replay-like leaf is sized by the run's total length (docs/design.md §9.4)
    assert base.state.buffer.shape == (2, 60)
    stored = json.loads((base.run_dir / "run.json").read_text())
    assert stored["config_hash"] == base.spec.config_hash
    assert stored["memory_bytes_per_seed"] == {"replay": 240, "train_state": 16}
    assert base.plot is not None and base.plot.stat().st_size > 1000


def test_keeps_last_k_checkpoints(base):
    # named by env step: chunks 4 and 6 of 10 steps
    steps = sorted(int(p.name) for p in (base.run_dir / "checkpoints").iterdir())
    assert steps == [40, 60]


def test_stop_and_relaunch_is_bit_identical(base, tmp_path):
    first = launch(tmp_path / "run", stop_after_chunks=3)
    assert first.stopped_early and first.chunks_done == 3
    second = launch(tmp_path / "run")
    assert second.resumed_from == 3 and second.chunks_done == 6
    assert_same_run(base, second)


def test_run_carried_to_a_new_dir_resumes_bit_identical(base, tmp_path):
    carry = benchmark_script("carry_run")
    first = launch(tmp_path / "here", stop_after_chunks=4)  # checkpoints at steps 20 and 40
    archive = tmp_path / "carry.tar.gz"
    carry.main(["pack", str(first.run_dir), str(archive)])
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert {n.split("/")[1] for n in names if n.startswith("checkpoints/")} == {"40"}
    assert "run.json" in names and "metrics/seed_1.jsonl" in names
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("x")
    with pytest.raises(SystemExit, match="not empty"):
        carry.main(["unpack", str(archive), str(tmp_path / "taken")])
    assert sorted(p.name for p in (tmp_path / "taken").iterdir()) == ["keep.txt"]
    carry.main(["unpack", str(archive), str(tmp_path / "there")])
    resumed = launch(tmp_path / "there")
    assert resumed.resumed_from == 4 and resumed.chunks_done == 6
    assert_same_run(base, resumed)


def test_relaunch_of_a_finished_run_does_nothing(base, tmp_path):
    shutil.copytree(base.run_dir, tmp_path / "run")
    before = tree_digest(tmp_path / "run")
    again = launch(tmp_path / "run", logger={"mode": "offline"})
    assert again.already_complete and again.chunks_done == 6 and again.resumed_from is None
    assert again.upload_dirs == {} and not (tmp_path / "run" / "wandb").exists()
    assert (
        again.final_eval[0]["Eval/episodic mean reward"]
        == base.final_eval[0]["Eval/episodic mean reward"]
    )
    assert "already complete" in summary(again)
    assert tree_digest(tmp_path / "run") == before  # nothing written


@pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning"
)  # orbax, after a failed read
def test_corrupt_latest_checkpoint_falls_back_with_warning(base, tmp_path, caplog):
    launch(tmp_path / "run", stop_after_chunks=4)  # checkpoints at steps 20 and 40
    state_dir = tmp_path / "run" / "checkpoints" / "40" / "state"
    for f in state_dir.rglob("*"):
        if f.is_file() and f.parent.name == "d":
            f.write_bytes(b"\0" * 7)
    with caplog.at_level(logging.WARNING, logger="launcher.store.checkpoint"):
        resumed = launch(tmp_path / "run")
    assert resumed.resumed_from == 2
    assert any("checkpoint 40 is unreadable" in r.message for r in caplog.records)
    assert len(list((tmp_path / "run" / "corrupt_checkpoints").iterdir())) == 1
    assert_same_run(base, resumed)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_no_readable_checkpoint_stops_and_moves_nothing(base, tmp_path):
    shutil.copytree(base.run_dir, tmp_path / "run")
    for f in (tmp_path / "run" / "checkpoints").rglob("*"):
        if f.is_file() and f.parent.name == "d":
            f.write_bytes(b"\0" * 7)
    with pytest.raises(ConfigError, match="no checkpoint in .* can be restored"):
        launch(tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == ["40", "60"]
    assert not (tmp_path / "run" / "corrupt_checkpoints").exists()


def test_silently_altered_checkpoint_is_caught_by_the_fingerprint(tmp_path, caplog):
    launch(tmp_path / "run", stop_after_chunks=4)
    meta_file = tmp_path / "run" / "checkpoints" / "40" / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    meta["fingerprint"] = "0" * len(meta["fingerprint"])
    meta_file.write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING, logger="launcher.store.checkpoint"):
        resumed = launch(tmp_path / "run")
    assert resumed.resumed_from == 2
    assert any("fingerprint" in r.message for r in caplog.records)


def test_changed_config_is_refused_naming_the_keys(base, tmp_path):
    shutil.copytree(base.run_dir, tmp_path / "run")
    before = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    with pytest.raises(ConfigError, match=r"agent\.lr: 0\.1 -> 0\.2"):
        launch(tmp_path / "run", agent={"lr": 0.2})
    with pytest.raises(ConfigError, match=r"protocol\.n_timesteps: 60 -> 80.*\+resume=force"):
        launch(tmp_path / "run", protocol={"n_timesteps": 80})
    with pytest.raises(ConfigError, match=r"may change only protocol\.n_timesteps"):
        launch(tmp_path / "run", agent={"lr": 0.2}, resume="force")
    after = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert before == after  # nothing saved is lost


def test_force_extension_equals_the_longer_run(base, tmp_path):
    short = launch(tmp_path / "run", protocol={"n_timesteps": 40})
    assert short.state.buffer.shape == (2, 40)
    longer = launch(tmp_path / "run", protocol={"n_timesteps": 60}, resume="force")
    assert longer.resumed_from == 4 and longer.state.buffer.shape == (2, 60)
    stored = json.loads((tmp_path / "run" / "run.json").read_text())
    assert stored["identity"]["protocol"]["n_timesteps"] == 60
    sa, sb = state_arrays(base.state), state_arrays(longer.state)
    for key in sa:
        np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)
    train = [r for r in metric_rows(tmp_path / "run", 0) if r["kind"] == "train"]
    assert train == [r for r in metric_rows(base.run_dir, 0) if r["kind"] == "train"]


def test_one_restore_path_reads_a_checkpoint_saved_with_another_run_length(tmp_path, monkeypatch):
    """An extension (+resume=force) killed before its first checkpoint leaves run.json at
    the new length and the checkpoint of the old one. The readers (restore_run, evaluate)
    and the resume restore it through the one path, launcher.store.restore.restore_latest, with
    the agent that saved it; only the resume moves unreadable checkpoints aside and
    migrates the state."""
    from launcher.store import restore
    from launcher.store.rundir import RunDir

    launch(tmp_path / "run", protocol={"n_timesteps": 40})
    longer = resolve(fake_config(protocol={"n_timesteps": 60}, resume="force"))
    RunDir(tmp_path / "run").write_run(longer, {})  # what the killed extension wrote
    calls, real = [], restore.restore_latest

    def spy(ckpt, spec, env, program, *, set_aside, at_most=None):
        out = real(ckpt, spec, env, program, set_aside=set_aside, at_most=at_most)
        calls.append((spec.protocol.n_timesteps, set_aside, out.agent.total_env_steps))
        return out

    monkeypatch.setattr(restore, "restore_latest", spy)
    read = restore.restore_run(tmp_path / "run", make_env=make_fake_env)
    assert read.spec.protocol.n_timesteps == 60 and read.program.agent is read.agent
    assert read.agent.total_env_steps == 40 and read.state.buffer.shape == (2, 40)
    assert evaluate_run(tmp_path / "run", make_env=make_fake_env)["timestep"] == 40
    resumed = launch(tmp_path / "run", protocol={"n_timesteps": 60}, resume="force")
    assert resumed.resumed_from == 4 and resumed.state.buffer.shape == (2, 60)
    assert calls == [(60, False, 40), (60, False, 40), (60, True, 40)]


def test_restore_run_reads_an_earlier_checkpoint_on_request(tmp_path):
    """``at_most``: the latest checkpoint at or before that step (a point earlier in the
    run); none that early is a ConfigError naming the saved steps."""
    from launcher.store import restore

    launch(tmp_path / "run", protocol={"n_timesteps": 40})
    steps = sorted(int(p.name) for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert len(steps) >= 2

    def read(**kw):
        return restore.restore_run(tmp_path / "run", make_env=make_fake_env, **kw)

    assert read().meta["timestep"] == steps[-1]
    assert read(at_most=steps[-1] - 1).meta["timestep"] == steps[-2]
    assert read(at_most=steps[0]).meta["timestep"] == steps[0]
    with pytest.raises(ConfigError, match=f"no checkpoint at step {steps[0] - 1} or earlier"):
        read(at_most=steps[0] - 1)


def test_terminations_are_refused_and_keep_checkpoints(tmp_path):
    with pytest.raises(ConfigError, match="terminated"):
        launch(tmp_path / "run", agent={"terminate_at": 35})
    steps = sorted(int(p.name) for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert steps == [20]


# --------------------------------------------------------------------- callbacks
CALLS: list[tuple] = []


def hook_pretrain(state, spec):
    CALLS.append(("pretrain", spec.agent_name))
    return state.replace(params=state.params * 0)


def hook_post_update(metrics, chunk):
    CALLS.append(("post_update", chunk))
    return {"custom/double": metrics["timestep"] * 2}


def hook_eval(metrics, chunk):
    CALLS.append(("eval_metrics", chunk))
    return {"custom/eval_chunk": np.full(2, chunk)}


def test_callbacks_run_at_their_phases(tmp_path):
    CALLS.clear()
    mod = __name__
    result = launch(
        tmp_path / "run",
        protocol={"n_timesteps": 20, "eval_at_start": False},
        callbacks={
            "pretrain": [f"{mod}:hook_pretrain"],
            "post_update": [f"{mod}:hook_post_update"],
            "eval_metrics": [f"{mod}.hook_eval"],
        },
    )
    assert CALLS == [
        ("pretrain", "fake"),
        ("post_update", 1),
        ("post_update", 2),
        ("eval_metrics", 2),
    ]
    rows = metric_rows(result.run_dir, 1)
    assert [r.get("custom/double") for r in rows if r["kind"] == "train"] == [20, 40]
    assert [r.get("custom/eval_chunk") for r in rows if r["kind"] == "eval"] == [2]


REFERENCE = [{"timestep": 0.0, "Paper/x (mean)": 1.5}, {"timestep": 20.0, "Paper/x (mean)": 2.5}]


def hook_reference(spec):
    CALLS.append(("reference_rows", spec.env.id))
    return REFERENCE


def hook_run_end_fails(run_dir):
    raise RuntimeError("no figure today")


def hook_run_end(run_dir):
    CALLS.append(("run_end", Path(run_dir).name))
    out = Path(run_dir) / "plots" / "mine.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text("mine")
    return out


def test_output_hooks_give_the_reference_rows_and_the_runs_figure(tmp_path, caplog):
    """The seam the analysis package plugs into: ``reference_rows`` reaches the loggers
    (TensorBoard's paper run), ``run_end`` makes the run's figure; a failing one warns."""
    from launcher.logger.tensorboard_logger import event_files

    CALLS.clear()
    mod = __name__
    with caplog.at_level(logging.WARNING, logger="launcher"):
        result = launch(
            tmp_path / "run",
            plot=True,
            protocol={"n_timesteps": 20, "eval_at_start": False},
            logger={"mode": "disabled", "tensorboard": True, "progress": False},
            callbacks={
                "reference_rows": [f"{mod}:hook_reference"],
                "run_end": [f"{mod}:hook_run_end_fails", f"{mod}.hook_run_end"],
            },
        )
    assert CALLS == [("reference_rows", "probe_constant_reward"), ("run_end", "run")]
    assert result.plot == tmp_path / "run" / "plots" / "mine.txt"
    assert "no figure today" in caplog.text
    assert event_files(tmp_path / "run" / "tensorboard" / "paper")
    assert not (tmp_path / "run" / "plots" / "learning_curves.png").exists()  # replaced


def test_output_hooks_default_to_analysis_and_are_not_the_runs_identity():
    from launcher.cli import compose_spec
    from launcher.config.identity import identity
    from launcher.config.schema import CallbackSpec

    spec = compose_spec(["agent=tdmpc2", "protocol=smoke"])  # conf/config.yaml's defaults
    assert spec.callbacks == CallbackSpec()
    assert spec.callbacks.reference_rows == ("analysis.paper_line:paper_rows",)
    assert spec.callbacks.run_end == ("analysis.report:plot_run",)
    base = resolve(fake_config())
    off = resolve(fake_config(callbacks={"reference_rows": [], "run_end": []}))
    assert off.callbacks.run_end == () and off.run_name == base.run_name
    assert identity(off) == identity(base) and "run_end" not in identity(base)["callbacks"]
    hooked = resolve(fake_config(callbacks={"post_update": [f"{__name__}:hook_post_update"]}))
    assert hooked.run_name != base.run_name  # a hook that changes what is logged still counts


def test_callbacks_refuse_other_phases_and_bad_paths():
    with pytest.raises(ConfigError, match="supported phases: pretrain, post_update, eval_metrics"):
        Callbacks.build({"on_target": ["x:y"]})
    with pytest.raises(ConfigError, match="callbacks.pretrain"):
        resolve(fake_config(callbacks={"pretrain": ["nomodule"]}))
    with pytest.raises(ConfigError, match=r"callbacks.post_update\[0\]: cannot import"):
        Callbacks.build({"post_update": ["no_such_module_xyz:fn"]})


# ---------------------------------------------------------------------------- W&B
def test_wandb_offline_one_run_per_seed_resumed_with_the_same_ids(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    sections = {"logger": {"mode": "offline", "progress": False}}
    first = launch(run_dir, stop_after_chunks=2, **sections)
    ids = json.loads((run_dir / "wandb_ids.json").read_text())
    assert sorted(ids) == ["0", "1"] and len(set(ids.values())) == 2
    assert len(first.upload_dirs["wandb"]) == 2
    # W&B names offline dirs offline-run-<YYYYmmdd_HHMMSS>-<id>: two launches within one
    # second (a warm compile cache) would share the dir and hide the second launch
    time.sleep(1.1)
    launch(run_dir, **sections)
    assert json.loads((run_dir / "wandb_ids.json").read_text()) == ids
    offline = sorted((run_dir / "wandb").glob("offline-run-*"))
    for run_id in ids.values():
        mine = [d for d in offline if d.name.endswith(run_id)]
        assert len(mine) == 2  # one per launch, the same W&B run
        assert all((d / f"run-{run_id}.wandb").stat().st_size > 0 for d in mine)


# ------------------------------------------------------------ report and evaluate
def test_report_writes_png_and_refuses_missing_dirs(base, tmp_path, capsys):
    out = plot_run(base.run_dir, tmp_path / "curves.png")
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert report_main([str(base.run_dir), "--out", str(tmp_path / "c2.png")]) == 0
    assert report_main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such run directory" in err
    (tmp_path / "empty").mkdir()
    assert report_main([str(tmp_path / "empty")]) == 2


def test_evaluate_latest_checkpoint(base, tmp_path):
    out = evaluate_run(base.run_dir, 3, make_env=make_fake_env)
    assert out["chunk"] == 6 and out["timestep"] == 60 and out["seeds"] == [0, 1]
    assert [len(r) for r in out["returns"]] == [3, 3]
    params = np.asarray(base.state.params).sum(axis=1)
    np.testing.assert_allclose(np.mean(out["returns"], axis=1), params, atol=3.0)
    with pytest.raises(ConfigError, match="no such run directory"):
        evaluate_run(tmp_path / "missing", make_env=make_fake_env)


def test_evaluation_draws_are_fresh_episodes_and_draw_zero_is_the_default(base):
    first = evaluate_run(base.run_dir, 3, make_env=make_fake_env)
    assert (
        evaluate_run(base.run_dir, 3, make_env=make_fake_env, draw=0)["returns"] == first["returns"]
    )
    other = evaluate_run(base.run_dir, 3, make_env=make_fake_env, draw=1)
    assert other["draw"] == 1 and other["returns"] != first["returns"]
    with pytest.raises(ConfigError, match="--draw: must be >= 0"):
        evaluate_run(base.run_dir, 3, make_env=make_fake_env, draw=-1)


def test_progress_bar_shows_steps_rate_returns_and_eta(capsys):
    from launcher.loop.run import Progress

    bar = Progress(total=100, initial=20, enabled=True, name="demo")
    bar.train, bar.eval = -123.4, -98.7
    bar.update(30, 456.0)
    bar.close()
    err = capsys.readouterr().err
    assert "demo" in err and "50/100" in err and "456 steps/s" in err
    assert "train -123.4" in err and "eval -98.7" in err and "<" in err  # elapsed<ETA


def test_final_train_shows_the_last_finite_return_and_its_step_when_the_last_chunk_had_none(
    tmp_path,
):
    """No episode ended in the last chunk (NaN by contract): the summary shows the last
    finite return and its step from the seed's metrics file, never ``nan``."""
    from launcher.loop.summary import RunResult

    spec = resolve(fake_config())
    key = "Train/episodic mean reward"
    files = [tmp_path / "seed_0.jsonl", tmp_path / "seed_1.jsonl"]
    rows0 = [
        {"kind": "train", "timestep": 20, key: -300.0},
        {"kind": "eval", "timestep": 20, "Eval/episodic mean reward": -100.0},
        {"kind": "train", "timestep": 40, key: -250.5},
        {"kind": "train", "timestep": 60, key: float("nan")},
    ]
    files[0].write_text("\n".join(json.dumps(r) for r in rows0) + "\n")
    files[1].write_text(json.dumps({"kind": "train", "timestep": 60, key: None}) + "\n")
    result = RunResult(
        run_dir=tmp_path,
        spec=spec,
        n_chunks=3,
        chunks_done=3,
        resumed_from=None,
        stopped_early=False,
        final_train=[{key: float("nan")}, {key: -7.25}],
        final_eval=[],
        metrics_files=files,
        plot=None,
        upload_dirs={},
        compiles={},
        n_devices=1,
    )
    (line,) = [x for x in summary(result).splitlines() if x.startswith("final train")]
    assert line == (
        "final train:  seed 0: -250.5 at step 40 (no episode ended after it), seed 1: -7.2"
    )
    result.final_train = [{key: float("nan")}, {key: float("nan")}]
    (line,) = [x for x in summary(result).splitlines() if x.startswith("final train")]
    assert line.endswith("seed 1: n/a (no train episode has ended)") and "nan" not in line


def test_a_rest_of_one_tick_joins_the_last_chunk():
    from launcher.loop.run import chunk_count

    assert chunk_count(42, 21) == 2  # whole chunks
    assert chunk_count(21, 10) == 2  # 10 + 11, not 10 + 10 + 1
    assert chunk_count(22, 10) == 3  # 10 + 10 + 2
    assert chunk_count(1, 10) == chunk_count(11, 10) == 1
