"""``wmrl --help`` and tab completion (issue 30 item 7): the help opens with the
project's own top (what the launcher does, example commands, where runs go) above Hydra's
help, every example command is valid, and ``model_size=<TAB>`` offers only the chosen
agent's presets (``conf/hydra/help/launcher.yaml``, :mod:`launcher.tools.completion`)."""

from __future__ import annotations

import importlib
import shlex

import pytest
from launcher_fakes import QUIET_HYDRA
from test_launcher_shell import command_overrides
from test_launcher_usage import FAKE

from launcher.cli import check_overrides, main

TOP = "wmrl (= python -m launcher) trains a model-based RL agent in JAX"


def help_text(capsys, *overrides: str) -> str:
    """What ``wmrl --help OVERRIDES`` prints (Hydra exits 0 after printing it; in process,
    Hydra's logging left alone)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["--help", *QUIET_HYDRA, *overrides])
    out = capsys.readouterr().out
    assert exit_.value.code == 0, out
    return out


def help_examples(text: str) -> list[tuple[str, str]]:
    """``(command, comment)`` of each line of the help's Examples section."""
    lines = text.split("== Examples ==\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [(cmd.strip(), note.strip()) for cmd, _, note in (ln.partition(" #") for ln in lines)]


def test_help_starts_with_the_projects_top_and_keeps_hydras_help(capsys):
    text = help_text(capsys)
    assert text.startswith(TOP), text[:300]
    top, sep, hydra_part = text.partition("== Configuration groups ==")
    assert sep, text  # Hydra's own help follows the top, unchanged
    for part in ("== Examples ==", "== Where runs go ==", "runs/<agent>-<env>-<protocol>-"):
        assert part in top, part
    assert 'eval "$(wmrl -sc install=bash)"' in top  # the template's $$ came out as $
    groups = hydra_part.split("== Config ==")[0]
    listed = [line.split(":")[0] for line in groups.splitlines() if ": " in line]
    assert listed == ["agent", "env", "protocol", "model_size", "logger", "+sweep (with -m)"]
    assert "tdmpc2_paper_dmc" in groups  # the +sweep= files, found on the search path
    for internal in ("schema", "agent_protocol", "env/default", "model_size/tdmpc2"):
        assert f"\n{internal}:" not in groups, internal  # Hydra's own list would show them
    assert "== Config ==" in hydra_part and "Powered by Hydra" in hydra_part
    assert "name: tdmpc2" in hydra_part  # the composed config, overrides applied:
    assert "name: dreamerv3" in help_text(capsys, "agent=dreamerv3").split("== Config ==")[1]


def test_every_help_example_is_a_valid_command(tmp_path, capsys, monkeypatch):
    """Without training: the launcher examples pass the pre-check as written (those
    marked for an accelerator with ``+allow_long_cpu_run=true``, as in the docs' test); the
    report and evaluate examples' arguments parse (argparse would exit), and the command
    gets as far as looking for ``RUN_DIR`` (absent here: its one ``error:`` line)."""
    examples = help_examples(help_text(capsys))
    commands = [cmd for cmd, _ in examples]
    assert len(examples) >= 5, examples
    for wanted in ("protocol=smoke", "protocol=quick", "wmrl -m ", "python -m analysis RUN_DIR"):
        assert any(wanted in cmd for cmd in commands), wanted
    assert any("paper" in note for _, note in examples)
    assert any("launcher.evaluate RUN_DIR" in cmd for cmd in commands)
    run_dir = tmp_path / "no_run"
    monkeypatch.chdir(tmp_path)
    for command, note in examples:
        words = shlex.split(command)
        if words[0] == "wmrl":
            overrides, multirun = command_overrides(command)
            if "accelerator" in note:
                overrides = [*overrides, "+allow_long_cpu_run=true"]
            check_overrides(overrides, multirun=multirun)  # raises ConfigError if invalid
            continue
        assert words[:2] == ["python", "-m"], command
        args = [str(run_dir) if w == "RUN_DIR" else w for w in words[3:]]
        capsys.readouterr()
        assert importlib.import_module(words[2]).main(args) == 2, command
        err = capsys.readouterr().err
        assert err.startswith("error: ") and str(run_dir) in err, (command, err)


def completions(line: str, monkeypatch, capsys) -> set[str]:
    """The words ``wmrl -sc query=bash`` offers for the command line ``line``."""
    monkeypatch.setenv("COMP_LINE", line)
    monkeypatch.setenv("COMP_POINT", str(len(line)))
    capsys.readouterr()
    assert main(["-sc", "query=bash"]) == 0
    return set(capsys.readouterr().out.split())


def test_model_size_completion_offers_only_the_chosen_agents_sizes(monkeypatch, capsys):
    tdmpc2 = {f"model_size=tdmpc2_{s}" for s in (1, 5, 19, 48, 317)}
    assert completions("wmrl agent=tdmpc2 model_size=", monkeypatch, capsys) == tdmpc2
    assert completions("wmrl model_size=", monkeypatch, capsys) == tdmpc2  # the default agent
    dreamer = {f"model_size=dreamerv3_{s}" for s in ("1m", "12m", "25m", "50m", "100m")}
    dreamer |= {"model_size=dreamerv3_200m", "model_size=dreamerv3_400m"}
    assert completions("wmrl agent=dreamerv3 model_size=", monkeypatch, capsys) == dreamer
    line = "wmrl agent=dreamerv3 model_size=dreamerv3_1"  # a prefix typed
    assert completions(line, monkeypatch, capsys) == {
        f"model_size=dreamerv3_{s}" for s in ("1m", "12m", "100m")
    }
    line = "wmrl -m agent=tdmpc2,dreamerv3 model_size="  # a sweep over agents: both
    assert completions(line, monkeypatch, capsys) == tdmpc2 | dreamer
    fake = completions(f"wmrl {' '.join(FAKE)} model_size=", monkeypatch, capsys)
    assert fake == {"model_size=fake_1"}  # an agent plugged in by YAML alone
    # other completions are Hydra's, untouched
    agents = completions("wmrl agent=dreamerv3 agent=", monkeypatch, capsys)
    assert {"agent=tdmpc2", "agent=dreamerv3"} <= agents
