"""The closing lines of ``python -m launcher`` (launcher/loop/summary.py): one value column,
and a TensorBoard hint that works where the viewer is not installed (issue 44 items 7, 8)."""

from __future__ import annotations

import dataclasses

from launcher_fakes import fake_config

from launcher.config.validate import resolve
from launcher.loop import summary as summary_module
from launcher.loop.summary import LABEL, RunResult, summary


def _result(tmp_path, **logger) -> RunResult:
    spec = resolve(fake_config())
    spec = dataclasses.replace(spec, logger=dataclasses.replace(spec.logger, **logger))
    key_train, key_eval = "Train/episodic mean reward", "Eval/episodic mean reward"
    return RunResult(
        run_dir=tmp_path,
        spec=spec,
        n_chunks=3,
        chunks_done=3,
        resumed_from=None,
        stopped_early=False,
        final_train=[{key_train: -10.0}, {key_train: -20.0}],
        final_eval=[{key_eval: -1.0}, {key_eval: -2.0}],
        metrics_files=[],
        plot=tmp_path / "curves.png",
        upload_dirs={"wandb": ["wandb/offline-run-x"]},
        compiles={},
        n_devices=1,
        compile_seconds=3.0,
    )


def test_every_value_starts_in_one_column(tmp_path):
    """The labels are padded to LABEL characters: ``final eval:`` (one character shorter
    than ``final train:``) and ``W&B online:`` included."""
    for mode in ("offline", "online"):
        text = summary(_result(tmp_path, mode=mode, tensorboard=True))
        lines = [ln for ln in text.splitlines() if not ln.startswith(" ")]  # not continuations
        labels = {ln.split(":")[0] for ln in lines}
        assert {"final train", "final eval", f"W&B {mode}", "TensorBoard", "run dir"} <= labels
        for line in lines:
            label, _, _ = line.partition(":")
            assert len(label) + 1 < LABEL, line
            assert line[LABEL - 1] == " " and line[LABEL] != " ", line
    continuation = [ln for ln in text.splitlines() if ln.startswith(" ")]
    assert all(len(ln) - len(ln.lstrip()) == LABEL for ln in continuation)


def test_the_tensorboard_hint_names_the_install_where_the_viewer_is_missing(tmp_path, monkeypatch):
    logdir = tmp_path / "tensorboard"
    monkeypatch.setattr(summary_module, "tensorboard_installed", lambda: True)
    (line,) = [x for x in summary(_result(tmp_path, tensorboard=True)).splitlines() if "Board" in x]
    assert line == f"TensorBoard:  tensorboard --logdir {logdir}"
    monkeypatch.setattr(summary_module, "tensorboard_installed", lambda: False)
    (line,) = [x for x in summary(_result(tmp_path, tensorboard=True)).splitlines() if "Board" in x]
    assert line == (
        f"TensorBoard:  pip install tensorboard (not installed here), then "
        f"tensorboard --logdir {logdir}"
    )


def test_tensorboard_installed_follows_the_import_machinery(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name)
    )
    assert summary_module.tensorboard_installed() is False
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert summary_module.tensorboard_installed() is True  # the test extra installs it
