"""The launcher as a new user meets it, part 2 (part 1: test_launcher_usage.py): tab
completion and the ``wmrl`` script, Ctrl-C, no module shadowing a package, every
documented command line, and a launcher that names no agent (an agent plugged in by
YAML alone runs smoke, resume and report)."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import tomllib
import types
from pathlib import Path

import pytest
from launcher_fakes import (
    checkpoint_steps,
)
from test_launcher_usage import (
    FAKE,
    INTERRUPTED,
    QUIET,
    ROOT,
    SMOKE,
    final_fingerprint,
    launch,
    own_cache_env,
    process_env,
    train_rows,
)

from analysis.cli import main as report_main
from launcher.cli import check_overrides, group_options
from launcher.errors import ConfigError
from launcher.tools.evaluate import main as evaluate_main


# --------------------------------------- 6. completion, the script, Ctrl-C, shadowing
def test_tab_completion_lists_the_agents():
    wmrl = Path(sys.executable).parent / "wmrl"
    for argv, line in (
        ([str(wmrl)], "wmrl agent="),
        (
            [sys.executable, str(ROOT / "launcher" / "__main__.py")],
            "python launcher/__main__.py agent=",
        ),
    ):
        env = {**process_env(), "COMP_LINE": line, "COMP_POINT": str(len(line))}
        proc = subprocess.run(
            [*argv, "-sc", "query=bash"], capture_output=True, text=True, env=env, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        assert set(proc.stdout.split()) >= {"agent=tdmpc2", "agent=dreamerv3"}, proc.stdout


def test_the_wmrl_console_script_is_declared_and_installed():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["wmrl"] == "launcher.cli:console_main"
    (entry,) = importlib.metadata.entry_points(group="console_scripts", name="wmrl")
    assert entry.value == "launcher.cli:console_main"
    script = Path(sys.executable).parent / "wmrl"
    assert script.is_file() and os.access(script, os.X_OK)


def _make_rule(makefile: str, target: str) -> tuple[list[str], list[str]]:
    """(prerequisites, recipe lines) of ``target`` in a Makefile's text."""
    lines = makefile.splitlines()
    (i,) = [k for k, line in enumerate(lines) if line.startswith(f"{target}:")]
    recipe = []
    for line in lines[i + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return lines[i].split(":", 1)[1].split(), recipe


def test_make_run_installs_the_package_without_the_test_extras():
    makefile = (ROOT / "Makefile").read_text()
    variables = dict(re.findall(r"^(\w+) :?= (.+)$", makefile, re.M))
    (stamp,) = _make_rule(makefile, "run")[0]
    assert stamp == "$(RUN_STAMP)" and variables["RUN_STAMP"] == "$(VENV)/.installed-run"
    _, recipe = _make_rule(makefile, "$(RUN_STAMP)")
    installs = [line for line in recipe if " install " in line]
    assert installs[-1].endswith("pip install -q -e .") and "[test]" not in " ".join(recipe)
    assert _make_rule(makefile, "test")[0] == ["$(STAMP)"]
    assert _make_rule(makefile, "$(STAMP)")[0] == ["$(RUN_STAMP)"]  # tests on top of run


def test_the_license_is_an_spdx_string_so_setuptools_does_not_warn():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT"  # a table is deprecated (PEP 639)
    assert "setuptools>=77" in pyproject["build-system"]["requires"]


def test_no_launcher_module_shadows_a_top_level_package():
    """``python launcher/__main__.py`` puts launcher/ first on sys.path: a module there
    named like a package the project or a dependency imports (``agents.py``) would hide it."""
    names = {p.stem for p in (ROOT / "launcher").glob("*.py")}
    names |= {
        p.name for p in (ROOT / "launcher").iterdir() if p.is_dir() and p.name != "__pycache__"
    }
    project = {"agents", "envs", "conf", "sweeps", "launcher", "tests", "benchmarks"}
    installed = set(importlib.metadata.packages_distributions())
    imported = set()
    for path in (p for top in sorted(project) for p in (ROOT / top).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    shadowed = names & (project | installed | imported | set(sys.stdlib_module_names))
    assert not shadowed


# ``python -m launcher`` with SIGINT at its default, as from a terminal: by this point of a
# suite the xdist worker may have SIGINT ignored (seen in a clean-clone run; set by a library,
# not by this project), and a child started with it ignored keeps ignoring it (the old flaky
# 6/6, exit 0). Reset in the child, not by ``preexec_fn``: that forks the multithreaded
# worker, which JAX warns may deadlock.
SIGINT_DEFAULT_LAUNCHER = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "runpy.run_module('launcher', run_name='__main__', alter_sys=True)"
)


def test_ctrl_c_exits_130_with_one_line_and_the_run_resumes(tmp_path, capsys):
    """SIGINT mid-run (inside the fake agent's host callback, where JAX wraps it): exit
    130, one line on stderr; the relaunch resumes from the last checkpoint and ends with
    the same state as an uninterrupted run. Also: ``WMRL_COMPILE_CACHE=off`` writes no
    compile cache. The run is held inside chunk 2's train call (its first tick is 21: T =
    20 agent steps + the hold tick) until the signal has been sent, so the run cannot
    finish first."""
    run_dir, xdg, hold = tmp_path / "run", tmp_path / "xdg", tmp_path / "go"
    argv = [*SMOKE, "logger=disabled", "protocol.n_timesteps=120"]
    argv += [f"agent.hold_file={hold}", "agent.hold_at=21"]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SIGINT_DEFAULT_LAUNCHER,
            *argv,
            "logger.progress=false",
            f"hydra.run.dir={run_dir}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=own_cache_env(xdg, WMRL_COMPILE_CACHE="off"),
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 240
        waiting = Path(f"{hold}.waiting")
        while not (waiting.exists() and checkpoint_steps(run_dir)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not reach chunk 2 in 240 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)  # held in chunk 2's train call
        time.sleep(0.5)
        # The callback runs off the main thread: Python raises the KeyboardInterrupt in the
        # main thread once the jitted call returns, so let the call finish.
        hold.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    hold.touch()  # the relaunch and the uninterrupted run below pass straight through
    assert proc.returncode == 130, (out[-2000:], err[-2000:])
    assert err == f"{INTERRUPTED}\n"
    saved = checkpoint_steps(run_dir)
    assert saved and max(saved) < 120
    assert not (xdg / "wmrl" / "jax").exists()  # WMRL_COMPILE_CACHE=off (env_listing: beside it)
    # relaunch (in process): resumes and completes, bit-identical to an uninterrupted run
    code, out, err = launch([*argv, *QUIET, f"hydra.run.dir={run_dir}"], capsys)
    assert code == 0, err
    assert re.search(r"chunks: +6/6 \(resumed after chunk \d\)", out), out
    code, _, err = launch([*argv, *QUIET, f"hydra.run.dir={tmp_path / 'whole'}"], capsys)
    assert code == 0, err
    assert final_fingerprint(run_dir) == final_fingerprint(tmp_path / "whole")
    strip = ("time/steps_per_second", "time/chunk_seconds")
    assert [{k: v for k, v in r.items() if k not in strip} for r in train_rows(run_dir)] == [
        {k: v for k, v in r.items() if k not in strip} for r in train_rows(tmp_path / "whole")
    ]


def test_ctrl_c_inside_a_host_callback_is_one_line_and_130(tmp_path, capsys, monkeypatch, caplog):
    """JAX hands a KeyboardInterrupt raised in a host callback back as a JaxRuntimeError
    (and logs it with a traceback): still exit 130 and the one line, deterministically
    (the fake agent's per-chunk ``time.sleep`` callback raises it)."""
    import launcher_fakes

    def ctrl_c(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(launcher_fakes, "time", types.SimpleNamespace(sleep=ctrl_c))
    argv = [*SMOKE, *QUIET, "logger=disabled", "agent.sleep_s=0.1"]
    code, _, err = launch([*argv, f"hydra.run.dir={tmp_path / 'run'}"], capsys)
    assert code == 130 and err == f"{INTERRUPTED}\n"
    assert not [r for r in caplog.records if r.name.startswith("jax")]  # no traceback logged


def test_ctrl_c_swallowed_where_it_lands_still_stops_the_run(tmp_path, capsys, monkeypatch):
    """A Ctrl-C whose KeyboardInterrupt is swallowed where it lands (here a host
    callback that catches it; in the wild a ``__del__`` or weakref callback) still ends
    the run with 130 and the one line at that chunk's end, before its checkpoint: the
    launcher's SIGINT handler records it (the flaky-Ctrl-C diagnosis of stop 10)."""
    import launcher_fakes

    def swallowing_sleep(seconds):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)  # the main thread takes the signal here (or after the call)
        except KeyboardInterrupt:
            pass

    monkeypatch.setattr(launcher_fakes, "time", types.SimpleNamespace(sleep=swallowing_sleep))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # the worker's may be
    try:  # SIG_IGN by now (see the test above), which the launcher leaves alone
        argv = [*SMOKE, *QUIET, "logger=disabled", "agent.sleep_s=0.1"]
        code, _, err = launch([*argv, f"hydra.run.dir={tmp_path / 'run'}"], capsys)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 130 and err == f"{INTERRUPTED}\n"
    assert not checkpoint_steps(tmp_path / "run")  # stopped in chunk 1, nothing saved


def test_a_run_started_with_ctrl_c_ignored_keeps_ignoring_it(tmp_path, capsys, monkeypatch):
    """SIGINT ignored at launch (a background job of a non-interactive shell): the run
    loop does not take it over, and finishes."""
    import launcher_fakes

    def sigint_sleep(seconds):
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(launcher_fakes, "time", types.SimpleNamespace(sleep=sigint_sleep))
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        argv = [*SMOKE, *QUIET, "logger=disabled", "agent.sleep_s=0.1"]
        code, _, err = launch([*argv, f"hydra.run.dir={tmp_path / 'run'}"], capsys)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 0, err


# ---------------------------------------------- 7. the documented command lines
DOCS = ("README.md", "docs/launcher.md", "Makefile")
SUBMITIT = importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is not None
COMMAND = re.compile(r"(?:^|\s|\$\(BIN\)/)(python -m launcher|wmrl)(?=\s|$)(.*)")


def documented_commands() -> list[tuple[str, str, str]]:
    """``(file:line, command, the whole source line)`` of every ``python -m launcher`` /
    ``wmrl`` command in the docs: code-block lines and inline code. A template (``...``,
    ``<placeholder>``) is not a command."""
    found = []
    for name in DOCS:
        block = name == "Makefile"
        for n, line in enumerate((ROOT / name).read_text().splitlines(), 1):
            if line.strip().startswith("```"):
                block = not block
                continue
            spans = [line.split(" #")[0]] if block else re.findall(r"`([^`]+)`", line)
            for span in spans:
                match = COMMAND.search(span)
                if match is None or "..." in span or "<" in span:
                    continue
                if not block and not match[2].strip():  # the command's name in prose
                    continue
                found.append((f"{name}:{n}", f"{match[1]}{match[2]}".strip(), line))
    return found


def command_overrides(command: str) -> tuple[list[str], bool] | None:
    """(overrides, multirun) of a launcher command line; None for -sc / --help ones."""
    words = shlex.split(command)
    words = words[3:] if words[0] == "python" else words[1:]
    overrides, multirun, skip = [], False, False
    for word in words:
        if skip:
            skip = False
        elif word in ("-m", "--multirun"):
            multirun = True
        elif word in ("--cfg", "-c", "--package", "-p"):
            skip = True
        elif word in ("-sc", "--shell-completion", "--help", "-h", "--hydra-help", "--info"):
            return None
        elif word.startswith("-"):
            continue
        else:
            overrides.append(word)
    return overrides, multirun


def test_every_documented_command_line_passes_the_pre_check(tmp_path, monkeypatch):
    """Each passes ``check_overrides`` as written, or with ``+allow_long_cpu_run=true`` when
    its line says it is for an accelerator; one marked "not runnable yet" must be refused."""
    monkeypatch.chdir(tmp_path)
    commands = documented_commands()
    assert len(commands) >= 15, commands
    checked, seen = 0, set()
    for where, command, line in commands:
        parsed = command_overrides(command)
        if parsed is None:
            continue
        overrides, multirun = parsed
        key = (tuple(overrides), multirun, "accelerator" in line, "not runnable yet" in line)
        if key in seen:  # the same command in another file
            continue
        seen.add(key)
        if "hydra/launcher=submitit_slurm" in overrides and not SUBMITIT:
            continue
        if "not runnable yet" in line:
            with pytest.raises(ConfigError):
                check_overrides(overrides, multirun=multirun)
            continue
        if "accelerator" in line:
            overrides = [*overrides, "+allow_long_cpu_run=true"]
        try:
            check_overrides(overrides, multirun=multirun)
        except ConfigError as err:
            pytest.fail(f"{where}: {command}: {err}")
        checked += 1
    assert checked >= 8


def test_the_help_groups_are_listed_once_per_hydra_initialisation():
    """Every compose evaluates ``hydra.help.template`` (a merge dereferences it), so its group
    lines are listed once per config loader (launcher.config.compose._group_lines): the three
    jobs of one ``compose_all`` list them once, and the lines, like ``group_listing``'s
    (one config repository for several groups), are the loader's own ``get_group_options``
    answer for each group."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.object_type import ObjectType

    from launcher.config import compose as composing

    composing.compose(["protocol=smoke"])  # the agents' schemas stored (composed apart)
    before = composing._group_lines.cache_info().misses
    composing.compose_all([["protocol=smoke"], ["protocol=quick"], ["env=pendulum"]])
    assert composing._group_lines.cache_info().misses == before + 1
    with composing._hydra_context():
        loader = GlobalHydra.instance().config_loader()
        lines = composing._config_groups().splitlines()
        public = {
            group: sorted(loader.get_group_options(group, ObjectType.CONFIG, config_name="config"))
            for group in composing.HELP_GROUPS
        }
    for group, line in zip(composing.HELP_GROUPS, lines, strict=True):
        assert line.split(": ", 1)[1] == ", ".join(public[group]), group
    assert composing.group_listing(composing.HELP_GROUPS) == public
    assert "tdmpc2" in lines[0] and "walker_walk" in lines[1]


def test_a_group_options_command_reuses_its_checked_config():
    """``check_overrides`` of a command of group options only checks the config
    ``check_command`` composed (no second compose): its RunSpec is the job composed alone."""
    from launcher.config.compose import compose_spec

    for overrides in (["agent=tdmpc2", "protocol=smoke"], ["env=pendulum", "protocol=smoke"]):
        (spec,) = check_overrides(overrides)
        assert spec == compose_spec(overrides), overrides


def test_the_readme_says_which_agents_run():
    """Both agents run: the README's introduction shows each one's launcher command, says
    nothing is unimplemented, and both commands pass the pre-check."""
    intro = (ROOT / "README.md").read_text().split("## Layout")[0]
    assert "not implemented yet" not in intro
    for name in ("tdmpc2", "dreamerv3"):
        assert f"agent={name}" in intro, name
        check_overrides([f"agent={name}", "protocol=smoke"])


def test_the_readme_says_what_the_project_does_not_do_yet():
    """A section before the layout (issue 44 item 2): each line points at where to read
    more, every cited file and deviation exists, and it keeps up with what changed
    (DreamerV3 is no longer float32 only: D30)."""
    text = (ROOT / "README.md").read_text()
    head = "## What it does not do yet"
    assert text.count(head) == 1 and text.index(head) < text.index("## Layout")
    section = text.split(head)[1].split("\n## ")[0]
    items = re.split(r"\n- ", section)[1:]
    assert len(items) >= 6
    for topic in ("DMC vision at CPU speed only", "game suites", "own env", "released checkpoints"):
        assert topic in section, topic
    assert "Vector observations only" not in section  # images came with issue 47
    assert "Images only for DreamerV3" not in section  # TD-MPC2 pixels came with issue 48
    for item in items:
        cited = re.findall(r"docs/[\w.]+\.md|deviation D\d+|Environments below", item)
        assert cited, item
    for path in set(re.findall(r"docs/[\w.]+\.md", section)):
        assert (ROOT / path).is_file(), path
    deviations = (ROOT / "docs" / "deviations.md").read_text()
    for dev in re.findall(r"deviation (D\d+)", section):
        assert f"### {dev}:" in deviations, dev
    assert "float32 only" not in section and "bfloat16" in section
    # your own env has a path now (issue 45): the section says how, not "no path"
    assert "env.factory=" in section and "No path for your own env" not in section


# ------------------------------------------------ 8. the launcher names no agent
AGENT_NAMES = re.compile(r"tdmpc2|dreamerv3|td-mpc2|dreamer", re.IGNORECASE)


def test_launcher_source_names_no_agent_and_imports_no_agents_module():
    for path in sorted((ROOT / "launcher").rglob("*.py")):
        text = path.read_text()
        hits = [ln for ln in text.splitlines() if AGENT_NAMES.search(ln)]
        assert not hits, (path.name, hits)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                assert module.split(".")[0] != "agents", (path.name, module)


def test_importing_the_launcher_imports_no_agent_package():
    code = (
        "import sys, launcher.cli, launcher.loop.run, launcher.evaluate, launcher.report\n"
        "import json\n"
        "tops = {m.split('.')[0] for m in sys.modules}\n"
        "print(json.dumps(sorted(t for t in tops if t in ('agents', 'agent_api'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=process_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # The protocol package is imported; no agents* module is.
    assert json.loads(proc.stdout.splitlines()[-1]) == ["agent_api"]


def test_an_agent_plugged_in_by_yaml_alone_runs_smoke_resume_report(tmp_path, capsys):
    assert "fake" not in group_options("agent")
    assert "fake" in group_options("agent", FAKE)
    run_dir = tmp_path / "run"
    argv = [*SMOKE, *QUIET, "logger=disabled", f"hydra.run.dir={run_dir}"]
    code, out, err = launch([*argv, "+stop_after_chunks=1"], capsys)
    assert code == 0, err
    assert "chunks:       1/2 (stopped early; relaunch to continue)" in out
    code, out, err = launch(argv, capsys)
    assert code == 0, err
    assert "chunks:       2/2 (resumed after chunk 1)" in out
    stored = json.loads((run_dir / "run.json").read_text())
    assert stored["identity"]["agent"]["name"] == "fake"
    assert stored["config"]["agent"]["entry"] == "launcher_fakes:FAKE_ENTRY"
    assert stored["run_name"].startswith("fake-pendulum-smoke-")
    assert [r["timestep"] for r in train_rows(run_dir)] == [20, 40]
    assert report_main([str(run_dir)]) == 0
    assert (run_dir / "plots" / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert evaluate_main([str(run_dir), "--episodes", "2"]) == 0


def test_the_gpu_extras_pin_jax_to_the_core_pin():
    """``pip install -e '.[gpu]'`` must not move JAX off the version the suite runs: each GPU
    extra names a ``jax[cuda...]`` with the same bounds as the core ``jax`` requirement, and
    a CUDA flavour that jax itself declares at the installed version."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (core,) = [r for r in project["dependencies"] if re.match(r"jax[><=]", r)]
    bounds = core.removeprefix("jax")
    jax_extras = importlib.metadata.metadata("jax").get_all("Provides-Extra")
    for name in ("gpu", "gpu-cuda13"):
        (req,) = project["optional-dependencies"][name]
        flavour, rest = re.fullmatch(r"jax\[(\w+)\](.+)", req).groups()
        assert rest == bounds and flavour in jax_extras, (name, req, core)
