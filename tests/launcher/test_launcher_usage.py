"""The launcher as a user meets it, part 1 (part 2: test_launcher_shell.py): sweeps
without -m, the CPU budget, the compile cache and the compiling phase, relaunching a
finished run, refused launches that leave nothing behind.

Launches go through the CLI (``launcher.cli.main``, in process, or ``python -m launcher``
in a subprocess) with the fake agent of ``launcher_fakes`` registered only by
``tests/launcher/fake_conf`` (``agent=fake`` + ``hydra.searchpath``): it compiles in well
under a second, so each launch costs the JAX import and little else.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jax
import pytest
from launcher_fakes import (
    FAKE_CLI,
    QUIET_HYDRA,
    checkpoint_steps,
    fake_config,
    make_fake_env,
    tree_digest,
)

from launcher.cli import check_overrides, main
from launcher.config import guards
from launcher.config.validate import resolve
from launcher.errors import ConfigError
from launcher.loop import cache
from launcher.loop.progress import Progress
from launcher.loop.run import run
from launcher.loop.summary import summary
from launcher.store.rundir import read_metrics

ROOT = Path(__file__).parents[2]
HERE = Path(__file__).parent
FAKE = FAKE_CLI
# In process, Hydra's logging config would leave handlers on pytest's captured streams.
QUIET = [*QUIET_HYDRA, "logger.progress=false"]
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
        # what the estimate is made of: TD-MPC2's CPU model of the composed config
        # (agents/tdmpc2/cost.py; test_launcher_guards.py checks its figures)
        " s per step per seed: 1,999,999 updates x ",
        "modelled from the config by agents/tdmpc2/cost.py)",
        "for a CPU, run python -m launcher agent=tdmpc2 env=pendulum protocol=quick instead",
        "; or shorten this run to protocol.n_timesteps=",
        "; or add +allow_long_cpu_run=true to start it anyway",
    ):
        assert part in message
    # the run that learns on a CPU first, then the shortened paper run (issue 44 item 5)
    assert message.index("protocol=quick") < message.index("shorten this run")
    # the CLI: one line, exit 2
    code, _, err_text = launch([], capsys)
    assert code == 2 and err_text == f"error: {message}\n"
    # confirmed, or CPU-sized: accepted (not run)
    (spec,) = check_overrides(["+allow_long_cpu_run=true"])
    assert spec.control.allow_long_cpu_run and spec.protocol.n_timesteps == 2_000_000
    offered = guards.cpu_sized_command(spec).removeprefix("python -m launcher ").split()
    (quick,) = check_overrides(offered)
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
