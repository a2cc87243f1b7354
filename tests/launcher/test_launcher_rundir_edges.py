"""The run directory's edge cases (issue 45 item 6), as a careless or hostile user tries
them: each refused path exits 2 with one ``error:`` line naming the problem and the fix,
and touches nothing (the folder's bytes unchanged, nothing created beside it). A metrics
line cut by a kill is dropped on resume with one warning, not in silence. Every hint of
a refusal that suggests a value suggests one inside that field's bounds."""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

import pytest
from launcher_fakes import launch, one_error_line, tree_digest
from test_launcher_reliability import CLI_FAKE

from agent_api.rules import field_bounds
from launcher.cli import main as cli_main
from launcher.config.compose import compose, job_config
from launcher.config.schema import SECTIONS
from launcher.config.validate import load_entry
from launcher.errors import ConfigError
from launcher.store.rundir import check_path, read_metrics


def refused(run_dir: Path, capsys) -> str:
    """The one error line of a CLI launch of the fake agent into ``run_dir`` (exit 2)."""
    code = cli_main([*CLI_FAKE, f"hydra.run.dir={run_dir}"])
    err = capsys.readouterr().err
    assert code == 2, err
    return one_error_line(err)


def test_a_folder_of_ones_own_files_is_refused_and_left_alone(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "thesis"
    (mine / "figures").mkdir(parents=True)
    (mine / "draft.tex").write_text("\\section{Results}\n")
    (mine / "figures" / "a.png").write_bytes(b"\x89PNG")
    before = tree_digest(tmp_path)
    err = refused(mine, capsys)
    assert f"hydra.run.dir: {mine} holds other files (draft.tex, figures/) and no run.json" in err
    assert "choose a new or empty folder, or move those files out" in err
    assert tree_digest(tmp_path) == before


def test_a_folder_with_only_the_layouts_folders_is_a_run_killed_early(tmp_path):
    """A launch killed before its first file left at most the layout's folders and a
    temporary file of an atomic write: still a run directory (its relaunch resumes)."""
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / ".run.json.k2j3.tmp").write_text("{")
    check_path(run_dir)  # accepted
    (run_dir / "notes.txt").write_text("mine\n")
    with pytest.raises(ConfigError, match="holds other files"):
        check_path(run_dir)
    (run_dir / "launches.jsonl").write_text("{}\n")  # a launch's own file: a run's dir
    check_path(run_dir)


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="no /proc")
def test_a_path_where_no_directory_can_be_made_is_one_line(capsys, tmp_path, monkeypatch):
    """/proc takes no new entry; as root ``os.access`` still says writable, and Hydra's
    mkdir raised a 39-line traceback."""
    monkeypatch.chdir(tmp_path)
    err = refused(Path("/proc/x"), capsys)
    if os.geteuid() == 0:
        assert err == (
            "error: hydra.run.dir: /proc/x cannot be created: /proc takes no new directory "
            "(No such file or directory); choose another path\n"
        )
    else:  # os.access already refuses it
        assert "hydra.run.dir: /proc/x: its parent /proc is not writable" in err
    assert not Path("/proc/x").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("folder", ["checkpoints", "metrics"])
def test_a_layout_folder_replaced_by_a_file_is_named_as_such(full, folder, tmp_path, capsys):
    full_dir, _ = full
    run_dir = tmp_path / "run"
    shutil.copytree(full_dir, run_dir)
    shutil.rmtree(run_dir / folder)
    (run_dir / folder).write_text("oops\n")
    before = tree_digest(tmp_path)
    err = refused(run_dir, capsys)
    what = {"checkpoints": "its checkpoints", "metrics": "its metrics files"}[folder]
    assert f"hydra.run.dir: {run_dir / folder} is a file, where a run directory keeps {what}" in err
    assert "not writable" not in err and "move that file away" in err
    assert tree_digest(tmp_path) == before


def test_a_cut_last_metrics_line_is_dropped_in_one_warning(tmp_path, caplog):
    run_dir = tmp_path / "run"
    launch(run_dir, stop_after_chunks=3)
    path = run_dir / "metrics" / "seed_1.jsonl"
    whole = read_metrics(path)
    with path.open("a") as f:  # a kill in the middle of writing chunk 4's row
        f.write('{"kind": "train", "chunk": 4, "timest')
    with caplog.at_level(logging.WARNING, logger="launcher.store.rundir"):
        launch(run_dir)
    said = [r.getMessage() for r in caplog.records if r.name == "launcher.store.rundir"]
    assert len(said) == 1 and "\n" not in said[0], said
    assert said[0].startswith("dropped a metrics line cut by a kill mid-write (seed_1.jsonl in")
    rows = read_metrics(path)
    assert path.read_text().endswith("}\n") and rows[: len(whole)] == whole
    assert [r["chunk"] for r in rows if r["kind"] == "train"] == [1, 2, 3, 4, 5, 6]


# ---------------------------------------------------------------- hints within bounds
# A hint that suggests a value: "agent.key=V", "agent.key >= V", "agent.key <= V".
HINT = re.compile(r"\b(agent|env|protocol|logger)\.(\w+) ?(=|>=|<=) ?(-?\d[\d.e+-]*)")


def suggested_values(argv: list[str], message: str) -> list[tuple[str, str, float]]:
    """``(section, key, value)`` of each value ``message`` suggests, each checked to lie
    within its field's bound (the agent's fields: its config class, from ``argv``). The
    bad-input battery (test_launcher_cli.py) checks every refusal's message with it."""
    hints = HINT.findall(message)
    if not hints:
        return []
    words = [a for a in argv if a.startswith(("agent=", "hydra.searchpath="))]
    entry = load_entry(job_config(compose(words))["agent"])
    classes = {**SECTIONS, "agent": entry.config_cls}
    found = []
    for section, key, op, text in hints:
        value = float(text.rstrip(".e+-"))
        bound = field_bounds(classes[section]).get(key)
        if bound is None:  # an unbounded field: any number is valid
            continue
        if op == "=":  # the value itself
            assert bound.contains(value), f"{section}.{key}={value} outside {bound}: {message}"
        elif op == ">=":  # a nonempty range: its least value within the bound
            assert bound.high is None or value <= bound.high, message
        else:
            assert bound.low is None or value >= bound.low, message
        found.append((section, key, value))
    return found


def test_the_hint_check_reads_each_form_and_catches_a_hint_out_of_bounds():
    dreamer = ["agent=dreamerv3"]
    ok = "use agent.replay_capacity >= 6500 or agent.n_envs <= 3, or protocol.n_timesteps=40"
    assert suggested_values(dreamer, ok) == [
        ("agent", "replay_capacity", 6500),
        ("agent", "n_envs", 3),
        ("protocol", "n_timesteps", 40),
    ]
    # the huge-n_envs refusal's old hint: above replay_capacity's own maximum (2**31 - 1)
    with pytest.raises(AssertionError):
        suggested_values(dreamer, "use agent.replay_capacity >= 6500000000")
    with pytest.raises(AssertionError):
        suggested_values([], "use agent.learning_rate=3")  # TD-MPC2's: at most 1
    with pytest.raises(AssertionError):
        suggested_values(dreamer, "use agent.n_envs <= 0")


def test_the_huge_n_envs_refusal_suggests_fewer_envs_within_the_replays_bound():
    from agents.dreamerv3.config import DreamerV3Config

    with pytest.raises(ValueError) as err:
        DreamerV3Config(n_envs=10**8)
    (hint,) = suggested_values(["agent=dreamerv3"], str(err.value))
    assert hint[:2] == ("agent", "n_envs")
    fewest_rows = DreamerV3Config().batch_length + 1  # per env, with n_envs >= batch_size
    most = int(hint[2])
    DreamerV3Config(n_envs=most, replay_capacity=most * fewest_rows)  # the hint is valid
    assert (most + 1) * fewest_rows > 2**31 - 1  # and the largest that is
