"""The launcher as a user meets it: sweeps without -m, the CPU budget, the compile cache,
relaunching a finished run, refused launches that leave nothing behind, tab completion,
Ctrl-C, the documented command lines, and an agent plugged in by YAML alone.

Launches go through the CLI (``launcher.cli.main``, in process, or ``python -m launcher``
in a subprocess) with the fake agent of ``launcher_fakes`` registered only by
``tests/launcher/fake_conf`` (``agent=fake`` + ``hydra.searchpath``): it compiles in well
under a second, so each launch costs the JAX import and little else.
"""

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

import jax
import pytest
from launcher_fakes import fake_config, make_fake_env, tree_digest

from launcher import cache, guards
from launcher.cli import check_overrides, group_options, main
from launcher.config import resolve
from launcher.errors import ConfigError
from launcher.evaluate import main as evaluate_main
from launcher.progress import Progress
from launcher.report import main as report_main
from launcher.run import run
from launcher.rundir import read_metrics
from launcher.summary import summary

ROOT = Path(__file__).parents[2]
HERE = Path(__file__).parent
FAKE_CONF = HERE / "fake_conf"
FAKE = ["agent=fake", f"hydra.searchpath=[pkg://sweeps,file://{FAKE_CONF}]"]
# In process, Hydra's logging config would leave handlers on pytest's captured streams.
QUIET = ["hydra/job_logging=none", "hydra/hydra_logging=none", "logger.progress=false"]
SMOKE = [*FAKE, "protocol=smoke"]  # 2 chunks of 20 env steps on pendulum (its default env)
INTERRUPTED = (
    "interrupted: stopped without saving a partial checkpoint; relaunch the same command "
    "to resume from the latest one"
)
ON_CPU = jax.default_backend() == "cpu"


def launch(argv, capsys) -> tuple[int, str, str]:
    """``python -m launcher ARGV`` in process: (exit status, stdout, stderr)."""
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def process_env(**extra: str) -> dict[str, str]:
    """The environment of a ``python -m launcher`` subprocess: the fake agent importable,
    and the test suite's compile cache unless ``extra`` says otherwise."""
    env = {k: v for k, v in os.environ.items() if k not in ("WMRL_COMPILE_CACHE",)}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT)])
    env["JAX_COMPILATION_CACHE_DIR"] = str(jax.config.jax_compilation_cache_dir or "")
    env.update(extra)
    return {k: v for k, v in env.items() if v != ""}


def own_cache_env(xdg: Path, **extra: str) -> dict[str, str]:
    """A subprocess left to the launcher's own compile-cache choice: JAX's variable unset
    (tests/conftest.py and the Makefile set it), ``XDG_CACHE_HOME=xdg``, and every compile
    written (the fake agent's take well under JAX's default 1 s threshold)."""
    import matplotlib

    env = process_env(XDG_CACHE_HOME=str(xdg), **extra)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    env["MPLCONFIGDIR"] = matplotlib.get_cachedir()  # XDG_CACHE_HOME would move its font cache
    return env


def train_rows(run_dir: Path, seed: int = 0) -> list[dict]:
    return [
        r for r in read_metrics(run_dir / "metrics" / f"seed_{seed}.jsonl") if r["kind"] == "train"
    ]


def checkpoint_steps(run_dir: Path) -> list[int]:
    ckpts = run_dir / "checkpoints"
    return (
        sorted(int(p.name) for p in ckpts.iterdir() if p.name.isdigit()) if ckpts.is_dir() else []
    )


def final_fingerprint(run_dir: Path) -> str:
    step = max(checkpoint_steps(run_dir))
    return json.loads((run_dir / "checkpoints" / str(step) / "meta" / "metadata").read_text())[
        "fingerprint"
    ]


# ------------------------------------------------------------- 1. a sweep needs -m
def test_a_sweep_config_without_multirun_is_refused_and_says_add_m():
    with pytest.raises(ConfigError) as err:
        check_overrides(["+sweep=tdmpc2_learning_checks"])
    assert "run it with multirun: python -m launcher -m +sweep=tdmpc2_learning_checks" in str(
        err.value
    )
    assert len(check_overrides(["+sweep=tdmpc2_learning_checks"], multirun=True)) == 2


# ---------------------------------------------------------------- 2. the CPU budget
@pytest.mark.skipif(not ON_CPU, reason="the CPU budget applies to machines without an accelerator")
def test_the_bare_launch_is_refused_on_a_cpu_with_the_estimate_and_a_cpu_sized_override(capsys):
    with pytest.raises(ConfigError) as err:
        check_overrides([])  # the paper protocol: 2M agent steps x 3 seeds, TD-MPC2 5M
    message = str(err.value)
    for part in (
        "protocol=paper: this machine has no accelerator",
        "2,000,000 steps x 3 seed(s) of agent=tdmpc2 would take",
        "(0.95 s per step per seed, measured)",
        "run protocol=quick env=pendulum for a CPU-sized job",
        "add +allow_long_cpu_run=true to start it anyway",
    ):
        assert part in message
    # the CLI: one line, exit 2
    code, _, err_text = launch([], capsys)
    assert code == 2 and err_text == f"error: {message}\n"
    # confirmed, or CPU-sized: accepted (not run)
    (spec,) = check_overrides(["+allow_long_cpu_run=true"])
    assert spec.control.allow_long_cpu_run and spec.protocol.n_timesteps == 2_000_000
    (quick,) = check_overrides(guards.CPU_SIZED.split())
    assert (quick.protocol.name, quick.env.id) == ("quick", "pendulum")


def test_cpu_budget_estimate_and_backends():
    spec = resolve(fake_config(protocol={"n_timesteps": 10**9}))  # 1e-4 s/step, 2 seeds
    wall, per_step, measured = guards.estimate_cpu_seconds(spec, cores=1)
    assert (per_step, measured) == (1e-4, True) and wall == pytest.approx(2e5)
    assert guards.estimate_cpu_seconds(spec, cores=8)[0] == pytest.approx(1e5)  # 2 seeds, 2 cores
    with pytest.raises(ConfigError, match=r"would take [\d.,]+ (hours|days) on its CPU"):
        guards.check_cpu_budget(spec, backend="cpu")
    guards.check_cpu_budget(spec, backend="gpu")  # an accelerator: no estimate
    allowed = resolve(fake_config(protocol={"n_timesteps": 10**9}, allow_long_cpu_run=True))
    guards.check_cpu_budget(allowed, backend="cpu")


# ----------------------------------------------------------- 3. the compile cache
def test_compile_cache_directory_choice(monkeypatch, tmp_path):
    for var in ("JAX_COMPILATION_CACHE_DIR", cache.VARIABLE, "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "wmrl" / "jax"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "wmrl" / "jax"
    monkeypatch.setenv(cache.VARIABLE, "~/mine")
    assert cache.cache_dir() == tmp_path / "home" / "mine"
    monkeypatch.setenv(cache.VARIABLE, "off")
    assert cache.cache_dir() is None
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
    assert cache.cache_dir() == tmp_path / "jax"  # JAX's own variable wins
    # a directory JAX already uses (tests/conftest.py sets one) is kept
    assert cache.enable_compile_cache() == Path(jax.config.jax_compilation_cache_dir)


def test_a_launch_fills_the_default_compile_cache_and_shows_compiling(tmp_path):
    xdg, run_dir = tmp_path / "xdg", tmp_path / "run"
    # a 2 s compile (the fake agent sleeps while train is traced); the progress bar is on
    argv = [*SMOKE, "logger=disabled", "agent.trace_sleep_s=2", f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(
        [sys.executable, "-m", "launcher", *argv],
        capture_output=True,
        text=True,
        env=own_cache_env(xdg),
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    entries = [p.name for p in (xdg / "wmrl" / "jax").iterdir()]
    assert any(name.startswith("jit_train") for name in entries), entries
    assert re.search(r"fake-pendulum-smoke-\w+ \[compiling\]", proc.stderr)  # what it waits on
    seconds = float(re.search(r"compile: +([\d.]+) s \(not in steps/s\)", proc.stdout)[1])
    assert seconds >= 2
    # steps/s of each chunk excludes the compile: far above 20 steps / 2 s
    assert all(r["time/steps_per_second"] > 4 * 20 / 2 for r in train_rows(run_dir))


def test_compile_seconds_are_reported_and_kept_out_of_steps_per_second(tmp_path):
    short = {"seeds": [0], "n_timesteps": 20, "eval_frequency": 0, "eval_at_start": False}
    spec = resolve(fake_config(agent={"trace_sleep_s": 2.0}, protocol=short))
    result = run(spec, tmp_path / "run", make_env=make_fake_env, plot=False)
    assert result.compile_seconds >= 2
    assert "compile:" in summary(result)
    chunk = spec.protocol.log_frequency
    rates = [r["time/steps_per_second"] for r in train_rows(result.run_dir)]
    assert len(rates) == result.n_chunks and min(rates) > 4 * chunk / 2


def test_progress_bar_shows_the_phase(capsys):
    bar = Progress(40, 0, True, "fake-run")
    bar.phase("compiling")
    assert "fake-run [compiling]" in capsys.readouterr().err
    bar.phase(None)
    bar.update(20, 321.0)
    bar.close()
    last = capsys.readouterr().err.split("\r")[-1]
    assert "321 steps/s" in last and "[compiling]" not in last
    Progress(40, 0, False, "quiet").phase("compiling")  # disabled: a no-op
    assert capsys.readouterr().err == ""


# ------------------------------------------------- 4. relaunching a finished run
def test_relaunching_a_finished_run_via_the_cli_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    argv = [*SMOKE, *QUIET, "logger=offline", f"hydra.run.dir={run_dir}"]
    code, out, err = launch(argv, capsys)
    assert code == 0, err
    offline = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 1
    before = tree_digest(run_dir)
    time.sleep(1.1)  # W&B names offline dirs by the second: a second start would show
    code, out, err = launch(argv, capsys)
    assert code == 0, err
    assert "chunks:       2/2 (already complete; nothing to do)" in out
    assert re.search(r"final train: +seed 0: -?\d", out) and re.search(r"final eval: +seed 0:", out)
    assert f"curves:       {run_dir / 'plots' / 'learning_curves.png'}" in out
    assert "W&B" not in out and sorted((run_dir / "wandb").glob("offline-run-*")) == offline
    assert tree_digest(run_dir) == before


# ------------------------------------------------- 5. refused launches leave nothing
def _wandb_fails(monkeypatch) -> None:
    import wandb

    def refuse(*args, **kwargs):
        raise RuntimeError("the network is down (test)")

    monkeypatch.setattr(wandb, "init", refuse)


def test_a_launch_failing_before_training_leaves_no_run_dir(tmp_path, capsys, monkeypatch):
    # W&B online without an API key (none in the environment, none under HOME)
    for var in ("WANDB_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "home" / "wandb"))
    run_dir = tmp_path / "runs" / "new"
    code, _, err = launch([*SMOKE, *QUIET, "logger=online", f"hydra.run.dir={run_dir}"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("error: logger.mode=online: W&B could not start")
    assert not run_dir.exists()
    # W&B failing to start for any other reason
    _wandb_fails(monkeypatch)
    code, _, err = launch([*SMOKE, *QUIET, "logger=offline", f"hydra.run.dir={run_dir}"], capsys)
    assert code == 2 and "the network is down (test)" in err and err.count("\n") == 1
    assert not run_dir.exists()
    # a bad env: refused by the pre-check
    code, _, err = launch([*SMOKE, *QUIET, "env=cartpole", f"hydra.run.dir={run_dir}"], capsys)
    assert code == 2 and "env=cartpole: has discrete actions" in err
    assert not run_dir.exists()


def test_refused_launches_never_touch_a_run_dir_with_checkpoints(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    base = [*SMOKE, *QUIET, f"hydra.run.dir={run_dir}"]
    code, _, err = launch([*base, "logger=offline", "+stop_after_chunks=1"], capsys)
    assert code == 0, err
    assert checkpoint_steps(run_dir) == [20]
    before = tree_digest(run_dir)
    refusals = [
        (["logger=offline", "agent.lr=0.2"], "holds a run with another config: agent.lr"),
        (["logger=offline", "agent.lr=0.2", "+resume=force"], "+resume=force may change only"),
        (["logger=offline", "env=cartpole"], "env=cartpole: has discrete actions"),
    ]
    for extra, fragment in refusals:
        code, _, err = launch([*base, *extra], capsys)
        assert code == 2 and fragment in err and err.count("\n") == 1, (extra, err)
        assert tree_digest(run_dir) == before, extra
    _wandb_fails(monkeypatch)
    code, _, err = launch([*base, "logger=offline"], capsys)
    assert code == 2 and "W&B could not start" in err
    assert tree_digest(run_dir) == before
    monkeypatch.undo()
    # the run dir still resumes
    code, out, err = launch([*base, "logger=disabled"], capsys)
    assert code == 0 and "chunks:       2/2 (resumed after chunk 1)" in out, err


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


def test_ctrl_c_exits_130_with_one_line_and_the_run_resumes(tmp_path, capsys):
    """SIGINT mid-run (inside the fake agent's host callback, where JAX wraps it): exit
    130, one line on stderr; the relaunch resumes from the last checkpoint and ends with
    the same state as an uninterrupted run. Also: ``WMRL_COMPILE_CACHE=off`` writes no
    compile cache."""
    run_dir, xdg = tmp_path / "run", tmp_path / "xdg"
    argv = [*SMOKE, "logger=disabled", "protocol.n_timesteps=120", "agent.sleep_s=0.5"]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "launcher",
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
        while not checkpoint_steps(run_dir) and proc.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint after 240 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)  # in chunk 2 (of 6; most of it the 0.5 s callback)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (out[-2000:], err[-2000:])
    assert err == f"{INTERRUPTED}\n"
    saved = checkpoint_steps(run_dir)
    assert saved and max(saved) < 120
    assert not (xdg / "wmrl").exists()  # WMRL_COMPILE_CACHE=off
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


def test_the_readme_says_which_agents_run():
    readme = (ROOT / "README.md").read_text()
    assert "not implemented yet" in readme.split("## Layout")[0]  # DreamerV3, up front
    with pytest.raises(ConfigError, match="agent=dreamerv3: not implemented yet"):
        check_overrides(["agent=dreamerv3", "protocol=smoke"])


# ------------------------------------------------ 8. the launcher names no agent
AGENT_NAMES = re.compile(r"tdmpc2|dreamerv3|td-mpc2|dreamer", re.IGNORECASE)


def test_launcher_source_names_no_agent_and_imports_only_the_agent_api():
    for path in sorted((ROOT / "launcher").rglob("*.py")):
        text = path.read_text()
        hits = [ln for ln in text.splitlines() if AGENT_NAMES.search(ln)]
        assert not hits, (path.name, hits)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
                if node.module == "agents":
                    modules = [f"agents.{a.name}" for a in node.names]
            else:
                continue
            for module in modules:
                if module.split(".")[0] == "agents":
                    assert module == "agents.api", (path.name, module)


def test_importing_the_launcher_imports_no_agent_package():
    code = (
        "import sys, launcher.cli, launcher.run, launcher.evaluate, launcher.report\n"
        "import json\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'agents')))"
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
    assert json.loads(proc.stdout.splitlines()[-1]) == ["agents", "agents.api"]


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
