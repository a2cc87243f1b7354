"""TensorBoard logging (``logger.tensorboard``): the presets, one event-file directory per
seed whose scalars and steps, read back with TensorBoard's own loader, are the metrics
files' rows at their timesteps; also after a resume that rolled a chunk back, and for
TensorBoard turned on for a run under way. The fake agent runs (no real agent compiles)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from launcher_fakes import launch

from launcher.cli import compose_spec
from launcher.config.schema import LoggerSpec
from launcher.logger.tensorboard_logger import TensorBoardRuns, event_files, seed_dir
from launcher.loop import faults
from launcher.loop.summary import summary
from launcher.store.rundir import read_metrics

TB = {"mode": "disabled", "tensorboard": True, "progress": False}
SEEDS = (0, 1)  # launcher_fakes.fake_config's


def read_back(directory, purge: bool = True) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value)]}`` of the run in ``directory`` as TensorBoard's Python
    loader shows it (``purge=False``: every event on disk, restarts not applied)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(directory), size_guidance={"scalars": 0}, purge_orphaned_data=purge)
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def from_metrics(path, skip: tuple[str, ...] = ()) -> dict[str, list[tuple[int, float]]]:
    """What W&B gets from a metrics file, as ``{tag: [(timestep, value)]}``: every number
    of every row (a null is the NaN it was written for), lists and ``chunk``/``kind`` left
    out, ``timestep`` the step."""
    out: dict[str, list[tuple[int, float]]] = {}
    for row in read_metrics(path):
        for key, value in row.items():
            if key in ("chunk", "kind", "timestep") or key.startswith(skip):
                continue
            if value is None or isinstance(value, int | float):
                point = (row["timestep"], math.nan if value is None else float(value))
                out.setdefault(key, []).append(point)
    return out


def assert_same(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for tag, points in want.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in points], tag  # no step twice
        # TensorBoard keeps float32 values
        np.testing.assert_array_equal(
            np.float32([v for _, v in got[tag]]), np.float32([v for _, v in points]), tag
        )


def test_presets_turn_tensorboard_on_with_or_without_wandb():
    base = ["protocol=smoke", "env=pendulum"]
    default = compose_spec(base).logger
    assert (default.mode, default.tensorboard) == ("offline", False)
    alone = compose_spec([*base, "logger=tensorboard"]).logger
    assert (alone.mode, alone.tensorboard) == ("disabled", True)
    both = compose_spec([*base, "logger=offline", "logger.tensorboard=true"]).logger
    assert (both.mode, both.tensorboard) == ("offline", True)


class Cut(Exception):
    """The first launch ends here: after the last chunk's rows, before its checkpoint."""


def test_a_resumed_run_reads_back_as_its_metrics_with_no_step_twice(full, tmp_path, monkeypatch):
    full_dir, _ = full
    run_dir = tmp_path / "run"

    def cut_before_the_last_checkpoint(name: str, chunk: int) -> None:
        if (name, chunk) == ("evaluated", 6):  # chunk 6's rows logged, step 60 not saved
            raise Cut

    monkeypatch.setattr(faults, "point", cut_before_the_last_checkpoint)
    with pytest.raises(Cut):
        launch(run_dir, logger=TB)
    monkeypatch.undo()
    on_disk = read_back(seed_dir(run_dir, 0), purge=False)
    assert [s for s, _ in on_disk["Train/loss"]] == [10, 20, 30, 40, 50, 60]

    result = launch(run_dir, logger=TB)
    assert result.resumed_from == 4  # the checkpoint at step 40: chunks 5 and 6 again
    assert "TensorBoard:  tensorboard --logdir " in summary(result)
    for seed in SEEDS:
        directory = seed_dir(run_dir, seed)
        assert len(event_files(directory)) == 2  # one per launch
        raw = read_back(directory, purge=False)  # the rolled-back rows are still on disk
        assert [s for s, _ in raw["Train/loss"]] == [10, 20, 30, 40, 50, 60, 50, 60]
        shown = read_back(directory)
        assert_same(shown, from_metrics(run_dir / "metrics" / f"seed_{seed}.jsonl"))
        # = the uninterrupted run's (its timings aside)
        untimed = {tag: points for tag, points in shown.items() if not tag.startswith("time/")}
        assert_same(untimed, from_metrics(full_dir / "metrics" / f"seed_{seed}.jsonl", ("time/",)))
    assert set(shown) >= {"Eval/episodic mean reward", "Train/episodic mean reward", "env_frames"}
    assert not (full_dir / "tensorboard").exists()  # logger.tensorboard=false: none


def test_turned_on_for_a_run_under_way_it_holds_the_whole_run(tmp_path):
    run_dir = tmp_path / "run"
    launch(run_dir, logger={"progress": False, "mode": "disabled"}, stop_after_chunks=2)
    assert not (run_dir / "tensorboard").exists()
    launch(run_dir, logger=TB)
    for seed in SEEDS:
        shown = read_back(seed_dir(run_dir, seed))
        assert [s for s, _ in shown["Train/loss"]] == [10, 20, 30, 40, 50, 60]
        assert_same(shown, from_metrics(run_dir / "metrics" / f"seed_{seed}.jsonl"))


def test_the_paper_curve_is_a_run_of_its_own_written_once(tmp_path):
    rows = [
        {"timestep": 500.0, "env_frames": 1000.0, "Paper/x (mean)": 1.5},
        {"timestep": 1000.0, "env_frames": 2000.0, "Paper/x (mean)": 2.5},
    ]
    for _ in range(2):  # a relaunch adds nothing
        tb = TensorBoardRuns(LoggerSpec(tensorboard=True), [0], tmp_path, None, [tmp_path / "m"])
        tb.log_reference(rows)
        tb.finish()
    paper = tmp_path / "tensorboard" / "paper"
    assert len(event_files(paper)) == 1
    assert read_back(paper)["Paper/x (mean)"] == [(500, 1.5), (1000, 2.5)]
    off = TensorBoardRuns(LoggerSpec(), [0], tmp_path / "off", None, [tmp_path / "m"])
    off.log_reference(rows)
    off.finish()
    assert not (tmp_path / "off").exists()
