"""W&B history across a resume (issue 30, item 4), with the fake agent and W&B offline.

A launch killed (``kill -9``, :mod:`launcher.loop.faults`) then relaunched leaves W&B
transaction logs (``wandb/offline-run-*-<id>/run-<id>.wandb``, one per launch) whose
history rows, read back in launch order (:mod:`launcher.logger.wandb_history`), equal the
uninterrupted run's: the same rows (timestep and every metric), each once, ``_step``
0, 1, 2, ... across the launches. The kills: after a chunk's rows were written to the
metrics files but before its checkpoint (those rows are rolled back), after a checkpoint
but before W&B got its rows, after W&B got them (not logged again), and after the final
checkpoint (the relaunch finds the run complete and logs only what W&B lacks). A launch
stopped with every row in W&B's logs: the next one logs none of them again. The paper's
reference rows are matched apart from the metrics rows.

wandb 0.31 ships no Python reader of its transaction log: the logs are read with
launcher.logger.wandb_history, checked here against the metrics files of an uninterrupted run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from launcher_fakes import launch
from test_launcher_process import TIMING, drive, rows
from test_launcher_reliability import kill_at_point

from launcher.config.schema import LoggerSpec
from launcher.logger import wandb_history
from launcher.logger.wandb_logger import WandbRuns

OFFLINE = {"logger": {"mode": "offline", "progress": False}}
SEEDS = (0, 1)
# W&B's own clock keys, and our timings: the only values a relaunch may change
VOLATILE = ("_runtime", "_timestamp", *TIMING)


def wandb_rows(run_dir: Path, seed: int) -> list[dict]:
    """The seed's W&B history rows over every launch, in order, less the clock keys."""
    run_id = json.loads((run_dir / "wandb_ids.json").read_text())[str(seed)]
    rows_read = wandb_history.history(run_dir / "wandb", run_id)
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows_read]


@pytest.fixture(scope="module")
def full_offline(tmp_path_factory):
    """The uninterrupted fake run (6 chunks, 2 seeds) with W&B offline."""
    run_dir = tmp_path_factory.mktemp("full_offline") / "run"
    launch(run_dir, **OFFLINE)
    return run_dir


def test_uninterrupted_history_is_the_metrics_rows_in_order(full_offline):
    """The reader against the metrics files: one W&B row per metrics row, in order, with
    the same values, at ``_step`` 0, 1, 2, ..."""
    for seed in SEEDS:
        got = wandb_rows(full_offline, seed)
        want = [
            {k: v for k, v in r.items() if k not in ("chunk", "kind")}
            for r in rows(full_offline, seed)
        ]
        assert len(want) == 10  # eval 0, train 1, train 2, eval 2, ... eval 6
        assert [r.pop("_step") for r in got] == list(range(len(want)))
        assert got == want, f"seed {seed}"


# checkpoints at chunks 2, 4, 6; each kill's relaunch resumes after chunk 4, 2 or 6
KILLS = [
    "evaluated:4",  # chunk 4's rows written, its checkpoint not: chunks 3-4 roll back
    "saved:4",  # checkpoint 40 saved, chunks 3-4 not yet handed to W&B
    "saved:6",  # the final checkpoint saved, chunks 5-6 not handed to W&B: run complete
]


@pytest.mark.parametrize("point", KILLS)
def test_history_after_kill_and_resume_equals_the_uninterrupted_one(
    point, full_offline, tmp_path, monkeypatch
):
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    kill_at_point(run_dir, OFFLINE, point)
    out = drive(run_dir, OFFLINE)
    assert out["chunks_done"] == 6
    ids = json.loads((run_dir / "wandb_ids.json").read_text())
    for seed in SEEDS:
        logs = wandb_history.run_logs(run_dir / "wandb", ids[str(seed)])
        assert len(logs) == 2, f"seed {seed}: one W&B log per launch, got {logs}"
        got = wandb_rows(run_dir, seed)
        assert [r["_step"] for r in got] == list(range(len(got))), f"seed {seed}: _step"
        assert got == wandb_rows(full_offline, seed), f"seed {seed}"


def test_rows_w_and_b_holds_are_not_logged_again(full_offline, tmp_path):
    """A launch stopped after chunk 3 (checkpoint at chunk 3, every row in W&B's logs),
    then the rest: the resumed launch logs none of chunks 0-3 again."""
    run_dir = tmp_path / "run"
    launch(run_dir, stop_after_chunks=3, **OFFLINE)
    ids = json.loads((run_dir / "wandb_ids.json").read_text())
    first = {s: len(wandb_rows(run_dir, s)) for s in SEEDS}
    assert first == {0: 5, 1: 5}  # eval 0, train 1, train 2, eval 2, train 3
    time.sleep(1.1)  # W&B names offline dirs by the second
    launch(run_dir, **OFFLINE)
    for seed in SEEDS:
        assert len(wandb_history.run_logs(run_dir / "wandb", ids[str(seed)])) == 2
        assert wandb_rows(run_dir, seed) == wandb_rows(full_offline, seed), f"seed {seed}"


def test_reference_and_metrics_rows_are_counted_apart(tmp_path, monkeypatch):
    """The paper's reference rows and the metrics rows are matched against W&B's logs
    each on their own: a relaunch offering more reference rows (a run extended with
    ``+resume=force``) logs only the new ones, after what W&B holds; rows staged but
    never committed (their checkpoint not saved) are not logged."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    ref = [{"timestep": t, "Paper/eval (mean)": t / 2} for t in (0, 50, 100)]

    def row(chunk: int) -> dict:
        return {"kind": "train", "chunk": chunk, "timestep": 10 * chunk, "Train/loss": chunk / 4}

    logger, ids = LoggerSpec(mode="offline", progress=False), {0: "refs0001"}
    wb = WandbRuns(logger, "name", [0], ids, {}, tmp_path)
    wb.log_reference(ref[:2])
    wb.stage([row(1)])
    wb.commit()
    wb.finish()
    time.sleep(1.1)  # W&B names offline dirs by the second
    wb = WandbRuns(logger, "name", [0], ids, {}, tmp_path)
    wb.log_reference(ref)
    wb.catch_up([[row(1)]])
    wb.stage([row(2)])
    wb.commit()
    wb.stage([row(3)])  # its checkpoint never saved
    wb.finish()

    got = wandb_history.history(tmp_path / "wandb", "refs0001")
    got = [{k: v for k, v in r.items() if k not in VOLATILE} for r in got]
    plain = [{k: v for k, v in row(c).items() if k not in ("chunk", "kind")} for c in (1, 2)]
    want = [ref[0], ref[1], plain[0], ref[2], plain[1]]
    assert got == [{**r, "_step": i} for i, r in enumerate(want)]
