"""Carrying a run to another machine (issue 33, item 4), offline, with the fake agent.

* ``logger.checkpoint_artifact=true``: each checkpoint save logs a W&B artifact of type
  ``checkpoint`` from the first seed's run, named for the run, aliases ``latest`` and
  ``step_<t>``, holding the step's checkpoint, run.json, the metrics up to it,
  launches.jsonl and wandb_ids.json. Read back from the offline run's transaction log
  (the artifact records' manifests, :mod:`launcher.logger.wandb_history`'s framing) and W&B's
  staged copies of the files.
* ``+from_artifact=REF``: the one W&B fetch (``launcher.logger.wandb_logger.download_artifact``)
  replaced by a copy of the staged files of the artifact logged above; the resumed run
  ends bit-identical to an uninterrupted one, with its metrics rows. Refused (exit 2, one
  ``error:`` line, nothing touched): an artifact of another config, a run dir that
  already holds checkpoints.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from launcher_fakes import FAKE_CLI, QUIET_HYDRA, launch, one_error_line, tree_digest
from test_launcher_process import rows

from launcher.cli import main as cli_main
from launcher.logger import wandb_history
from launcher.store.checkpoint import fingerprint

SEEDS = (0, 1)
LOGGER = {"mode": "offline", "progress": False, "checkpoint_artifact": True}
STOP = 3  # the carried launch stops after chunk 3: checkpoints 20 and 30, both logged
CLI_SMOKE = [*FAKE_CLI, "protocol=smoke", "env=pendulum", "logger=disabled", *QUIET_HYDRA]


def logged_artifacts(run_dir: Path, seed: int) -> list[dict]:
    """The artifacts the seed's W&B run logged, in order: name, type, aliases, metadata
    and ``files`` (path in the artifact -> W&B's staged copy)."""
    from wandb.proto import wandb_internal_pb2 as pb

    run_id = json.loads((run_dir / "wandb_ids.json").read_text())[str(seed)]
    out = []
    for log in wandb_history.run_logs(run_dir / "wandb", run_id):
        for data in wandb_history.records(log.read_bytes()):
            record = pb.Record()
            record.ParseFromString(data)
            if record.WhichOneof("record_type") != "artifact":
                continue
            art = record.artifact
            out.append(
                {
                    "name": art.name,
                    "type": art.type,
                    "aliases": set(art.aliases),
                    "metadata": json.loads(art.metadata),
                    "files": {e.path: Path(e.local_path) for e in art.manifest.contents},
                }
            )
    return out


@pytest.fixture(scope="module")
def carried(tmp_path_factory):
    """A fake run stopped after chunk 3 with W&B offline and the option on (W&B's staging
    directory kept under the test's tmp): its run dir."""
    root = tmp_path_factory.mktemp("carried")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_DATA_DIR", str(root / "wandb_data"))
        mp.setenv("WANDB_SILENT", "true")
        launch(root / "run", stop_after_chunks=STOP, logger=LOGGER)
    return root / "run"


def test_each_save_logs_the_checkpoint_as_an_artifact(carried):
    arts = logged_artifacts(carried, 0)
    assert [a["metadata"]["timestep"] for a in arts] == [20, 30]
    name = json.loads((carried / "run.json").read_text())["run_name"]
    for art, step, chunk in zip(arts, (20, 30), (2, 3), strict=True):
        assert art["name"] == name and art["type"] == "checkpoint"
        assert art["aliases"] == {"latest", f"step_{step}"}
        small = {"run.json", "launches.jsonl", "wandb_ids.json"}
        metrics = {f"metrics/seed_{s}.jsonl" for s in SEEDS}
        ckpt = {p for p in art["files"] if p.startswith(f"checkpoints/{step}/")}
        assert set(art["files"]) == small | metrics | ckpt
        assert f"checkpoints/{step}/meta/metadata" in ckpt and len(ckpt) > 5
        # the metrics as they were at the save: rows up to its chunk
        staged = json.loads(art["files"]["metrics/seed_0.jsonl"].read_text().splitlines()[-1])
        assert staged["chunk"] == chunk
    # the newest one is the run dir's files, byte for byte
    for path, copy in arts[-1]["files"].items():
        assert copy.read_bytes() == (carried / path).read_bytes(), path
    assert logged_artifacts(carried, 1) == []  # one artifact per save: the first seed's run


@pytest.fixture
def fetch_from(carried, monkeypatch):
    """Replace W&B's fetch with a copy of the carried run's artifact named by the
    reference's alias (the staged files, where the manifest says); the refs fetched."""
    fetched: list[str] = []

    def download(ref: str, root: Path) -> None:
        fetched.append(ref)
        alias = ref.rpartition(":")[2]
        art = [a for a in logged_artifacts(carried, 0) if alias in a["aliases"]][-1]
        for path, copy in art["files"].items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(copy, root / path)

    monkeypatch.setattr("launcher.logger.wandb_logger.download_artifact", download)
    return fetched


def test_resume_from_an_artifact_equals_the_uninterrupted_run(full, fetch_from, tmp_path):
    """Fetched once, stopped after one more chunk, then requeued with the same command
    line (+from_artifact included): the requeue resumes the local checkpoint, no second
    download, and the run ends bit-identical to an uninterrupted one."""
    run_dir = tmp_path / "elsewhere" / "run"
    ref = "me/wmrl/fake-run:latest"
    first = launch(run_dir, from_artifact=ref, stop_after_chunks=1)
    assert fetch_from == [ref] and first.resumed_from == STOP
    result = launch(run_dir, from_artifact=ref)
    assert fetch_from == [ref]  # the requeue fetched nothing
    assert result.resumed_from == STOP + 1 and result.chunks_done == 6
    full_dir, full_fp = full
    assert fingerprint(result.state) == full_fp
    for seed in SEEDS:
        assert rows(run_dir, seed) == rows(full_dir, seed), f"seed {seed}"
    launches = (run_dir / "launches.jsonl").read_text().splitlines()
    assert len(launches) == 3  # carried + the fetching launch + the requeue
    assert [json.loads(r).get("from_artifact") for r in launches] == [None, ref, ref]
    assert not list(run_dir.parent.glob(".*artifact-*"))  # the download's directory removed


def test_an_artifact_of_another_config_is_refused(fetch_from, tmp_path, capsys):
    """The CLI's smoke config is not the carried run's: exit 2, one line naming the keys,
    no run dir made and nothing left beside it."""
    parent = tmp_path / "runs"
    parent.mkdir()
    argv = [*CLI_SMOKE, f"hydra.run.dir={parent / 'run'}", "+from_artifact=me/wmrl/x:step_20"]
    assert cli_main(argv) == 2
    err = one_error_line(capsys.readouterr().err)
    assert "from_artifact: me/wmrl/x:step_20 holds a run with another config: " in err
    assert "env.id: 'probe_constant_reward' -> 'pendulum'" in err
    assert fetch_from == ["me/wmrl/x:step_20"]
    assert list(parent.iterdir()) == []


def test_a_run_dir_with_checkpoints_is_refused(fetch_from, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert cli_main([*CLI_SMOKE, f"hydra.run.dir={run_dir}"]) == 0
    capsys.readouterr()
    before = tree_digest(run_dir)
    argv = [*CLI_SMOKE, f"hydra.run.dir={run_dir}", "+from_artifact=me/wmrl/x:latest"]
    assert cli_main(argv) == 2
    err = one_error_line(capsys.readouterr().err)
    assert f"from_artifact: {run_dir} already holds checkpoints (steps 20, 40)" in err
    assert "relaunch without +from_artifact" in err
    assert fetch_from == []  # refused before any download
    assert tree_digest(run_dir) == before
