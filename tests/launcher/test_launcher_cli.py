"""The bad-input battery: each case gives one clear ``error:`` line and exit status 2,
before anything is written; plus ``--cfg job`` and the real exit status of a process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest
from launcher_fakes import FAKE_CLI, one_error_line
from test_launcher_rundir_edges import suggested_values

from analysis.cli import main as report_main
from launcher.cli import check_overrides, compose_spec, main
from launcher.errors import ConfigError
from launcher.store.rundir import RunDir
from launcher.tools.evaluate import main as evaluate_main

ROOT = Path(__file__).parents[2]
SMOKE = ["protocol=smoke", "env=pendulum", "logger=disabled"]
# The test agent, plugged in by YAML only (tests/launcher/fake_conf/agent/fake.yaml).
FAKE = FAKE_CLI

# (argv, a fragment the message must contain: the key, and where useful the valid values)
BATTERY = [
    (["env=walker_wlak"], "env=walker_wlak: unknown option; did you mean walker_walk"),
    (["agent=sac"], "agent=sac: unknown option; choose one of: dreamerv3, tdmpc2"),
    (["model_size=5"], "model_size=5: unknown option for agent=tdmpc2; did you mean tdmpc2_5"),
    # the chosen agent's presets only (the line ends after them: no other agent's)
    (
        ["agent=dreamerv3", "model_size=5"],
        "model_size=5: unknown option for agent=dreamerv3; choose one of: dreamerv3_100m, "
        "dreamerv3_12m, dreamerv3_1m, dreamerv3_200m, dreamerv3_25m, dreamerv3_400m, "
        "dreamerv3_50m\n",
    ),
    (["model_size=dreamerv3_12m"], "belongs to agent=dreamerv3, not agent=tdmpc2; choose"),
    (
        ["protocol=fast"],
        "protocol=fast: unknown option; choose one of: crafter, dmc_vision, learning_check",
    ),
    (["logger=wandb"], "logger=wandb: unknown option; choose one of: disabled, offline, online"),
    (["agent.mlpdim=3"], "agent.mlpdim: unknown key; did you mean mlp_dim?"),
    (["+agent.foo=1"], "agent.foo: unknown key; valid keys: enc_dim"),
    (["agent.mlp_dim=abc"], "agent.mlp_dim: expected int or null, got 'abc' (str)"),
    (["agent.horizon=2.5"], "agent.horizon: expected int, got 2.5 (float)"),
    (["agent.learning_rate=inf"], "agent.learning_rate: expected a finite float, got inf"),
    (["agent.dropout=2"], "agent.dropout: 2.0 is outside the valid range [0, 1]"),
    (["agent.num_elites=1000"], "agent: num_elites must not exceed num_samples"),
    (["agent.batch_size=0"], "agent.batch_size: 0 is outside the valid range [1, inf]"),
    (["protocol.eval_at_start=maybe"], "protocol.eval_at_start: expected bool"),
    (["protocol.n_timesteps=-5"], "protocol.n_timesteps: -5 is outside the valid range [1, inf]"),
    (["protocol.seeds=[]"], "protocol.seeds: expected a non-empty list"),
    (["protocol.seeds=[0,0]"], "protocol.seeds: seeds must be distinct"),
    (["protocol.seeds=7"], "protocol.seeds: expected a list of int, got 7 (int); write a list"),
    (["protocol.seeds=3"], "e.g. protocol.seeds=[3] for seed 3 alone, or protocol.seeds=[0,1,2]"),
    (["protocol.eval_frequency=15"], "protocol.eval_frequency: 15 is not a multiple of"),
    (["protocol.log_frequency=100"], "protocol.log_frequency: 100 exceeds protocol.n_timesteps"),
    (["env.action_repeat=0"], "env.action_repeat: 0 is outside the valid range [1, inf]"),
    (["env.action_repeat=2"], "env.action_repeat: pendulum: gymnax envs support only"),
    (["env.id=pendulm"], "env.id: unknown env id 'pendulm'; did you mean pendulum"),
    # the agent that runs it comes before the envs this one runs (issue 44 item 8)
    (
        ["env=cartpole"],
        "agent=tdmpc2 needs continuous actions and fixed-length episodes; run it with "
        "agent=dreamerv3, or choose env= one of: pendulum",
    ),
    (["env=mountain_car_continuous"], "env=mountain_car_continuous: can terminate"),
    # issue 46's game backends: refused in the same one line, before anything is built
    (["env=breakout_minatar"], "env=breakout_minatar: has discrete actions and can terminate"),
    (["env=craftax_classic"], "env=craftax_classic: has discrete actions and can terminate"),
    (["env=walker_walk", "env.episode_length=21"], "env.episode_length: 21 backend steps"),
    (["logger.mode=loud"], "logger.mode: 'loud' is not a W&B mode; choose one of: offline"),
    (["logger.tensorbord=true"], "logger.tensorbord: unknown key; did you mean tensorboard?"),
    (["logger.tensorboard=maybe"], "logger.tensorboard: expected bool, got 'maybe' (str)"),
    (["tensorboard=true"], "tensorboard: unknown key; it is logger.tensorboard=true"),
    (["+callbacks.on_target=[a:b]"], "callbacks.on_target: unsupported callback phase"),
    (["callbacks.pretrain=[nomodule]"], "callbacks.pretrain[0]: 'nomodule' is not an import"),
    (["resume=force"], "resume: a run-control key, given with a leading '+': +resume="),
    (["+resume=maybe"], "resume: 'maybe' is not a resume mode; choose one of: auto, force"),
    (["+stop_after_chunks=0"], "stop_after_chunks: 0 is outside the valid range [1, inf]"),
    (["+oops=1"], "oops: unknown top-level key"),
    (["agent.mlp_dim=[1,"], "cannot parse the override 'agent.mlp_dim=[1,'"),
    (["env=pendulum,walker_walk"], "a sweep (a,b,...) needs multirun: python -m launcher -m"),
    (["-m", "env=pendulum,cartpole"], "env=cartpole: has discrete actions"),
    (["-m", "logger=disabled,offline"], "would share the run dir"),
    # misplaced keys, sweeps, CPU budget, agents that do not run
    (["seed=1"], "seed: unknown key; it is protocol.seeds (a list, e.g. protocol.seeds=[1])"),
    (["+sweep=tdmpc2_learning_checks"], "a sweep (env over several values); run it with multirun"),
    (["protocol=paper"], "no accelerator, and 2,000,000 steps x 3 seed(s) of agent=tdmpc2"),
    # 275 h of the smoke model: far past the 4 h budget however fast the box (2M: 2.8 h, run)
    (
        ["protocol.n_timesteps=200000000"],
        "cost.py); for a CPU, run python -m launcher agent=tdmpc2",
    ),
    (["-m", "protocol=paper", "env=pendulum,cartpole_balance"], "add +allow_long_cpu_run=true"),
    (["agent=dreamerv3", "agent.train_ratio=-1"], "agent.train_ratio: -1.0 is outside the valid"),
    (["agent=dreamerv3", "agent.deter=30"], "deter=30 must be divisible by blocks=4"),
    (["agent=dreamerv3", "protocol=paper"], "250,000 steps x 5 seed(s) of agent=dreamerv3"),
    (["model_size=dreamerv3_1m"], "belongs to agent=dreamerv3, not agent=tdmpc2; choose"),
    # run-control keys: named as typed
    (["+max_abs_loss=0"], "max_abs_loss: 0.0 is outside the valid range (0, inf]"),
    (["+max_abs_loss=big"], "max_abs_loss: expected float or null, got 'big' (str)"),
    (["+allow_long_cpu_run=maybe"], "allow_long_cpu_run: expected bool, got 'maybe' (str)"),
    (["allow_long_cpu_run=true"], "a run-control key, given with a leading '+': +allow_long"),
    (["+stop_after_chunks=x"], "stop_after_chunks: expected int or null, got 'x' (str)"),
    (["+from_artifact=latest"], "from_artifact: 'latest' is not a W&B artifact reference"),
    (
        ["-m", "+from_artifact=e/p/run:latest", "protocol.seeds=[0],[1]"],
        "an artifact holds one run",
    ),
    (["logger.checkpoint_artifact=true"], "logger.checkpoint_artifact: needs W&B, but logger"),
    # the plug-in entry (agent.entry) and a YAML-only agent (tests/launcher/fake_conf)
    (["agent.entry=nomodule:X"], "agent.entry: cannot load 'nomodule:X' (No module named"),
    (["agent.entry=nocolon"], "agent.entry: cannot load 'nocolon' ('nocolon' is not an import"),
    (["agent.entry=launcher_fakes:FakeConfig"], "'launcher_fakes:FakeConfig' is a type, not an"),
    (["agent.entry=launcher_fakes:FAKE_ENTRY"], "is agent 'fake', not 'tdmpc2'"),
    (["agent=fake"], "agent=fake: unknown option; choose one of: dreamerv3, tdmpc2"),
    (["model_size=fake_1"], "model_size=fake_1: unknown option for agent=tdmpc2; choose one"),
    ([*FAKE, "model_size=fake_2"], "model_size=fake_2: unknown option for agent=fake; did you"),
    ([*FAKE, "agent.entry=nomodule:X"], "agent.entry: cannot load 'nomodule:X'"),
    ([*FAKE, "model_size=tdmpc2_5"], "belongs to agent=tdmpc2, not agent=fake; choose model"),
    ([*FAKE, "agent.width=wide"], "agent.width: expected int, got 'wide' (str)"),
    ([*FAKE, "+agent.foo=1"], "agent.foo: unknown key; valid keys: width, lr"),
    ([*FAKE, "env=cartpole"], "env=cartpole: has discrete actions, and agent=fake needs"),
    # more ranges
    (
        ["protocol.keep_checkpoints=0"],
        "protocol.keep_checkpoints: 0 is outside the valid range [1, inf]",
    ),
    (
        ["protocol.checkpoint_frequency=-20"],
        "protocol.checkpoint_frequency: -20 is outside the valid range [0, inf]",
    ),
    (["env.episode_length=0"], "env.episode_length: 0 is outside the valid range [1, inf]"),
    (["logger.project="], "logger.project: must be a non-empty string"),
    # bounds on the config fields, cross-field and run-length rules (issue 31)
    ([*FAKE, "agent.lr=0"], "agent.lr: 0.0 is outside the valid range (0, inf]"),
    (["agent=dreamerv3", "agent.train_ratio=0"], "range (0, inf] (a train ratio of 0 never"),
    (["agent=dreamerv3", "agent.batch_length=100"], "agent.batch_length: the first update"),
    (["agent=dreamerv3", "agent.train_ratio=333.3333"], "agent: train_ratio=333.3333 gives"),
    (["agent=dreamerv3", "agent.replay_capacity=3"], "replay_capacity=3 rows cannot hold one"),
    (["agent=dreamerv3", "agent.retnorm_percentiles=[95.0,5.0]"], "two increasing percentiles"),
    (["agent=dreamerv3", "agent.retnorm_percentiles=[5.0]"], "retnorm_percentiles=[5.0] must"),
    (["agent=dreamerv3", "agent.minstd=2.0"], "agent: minstd=2.0 exceeds maxstd=1.0"),
    (["agent=dreamerv3", "agent.n_envs=3"], "protocol.n_timesteps=40 is not a multiple of"),
    (["agent.n_envs=3"], "use protocol.n_timesteps=39 or 42, or an agent.n_envs that divides"),
    (["agent.gamma=1.0"], "agent.gamma: 1.0 is outside the valid range [0, 1) (the TD targets"),
    (["agent.discount_min=0.999"], "agent: discount_min=0.999 exceeds discount_max=0.995"),
    (["agent.buffer_size=1e11"], "agent.buffer_size: 100000000000 is outside the valid range"),
    (["agent=dreamerv3", "agent.eval_episodes=3"], "unknown key; it is protocol.eval_episodes"),
    (["callbacks.eval_metrics=[nomodule:f]"], "callbacks.eval_metrics[0]: cannot import"),
    # hints within their fields' bounds; learning rates bounded (issue 45 item 6)
    (["agent=dreamerv3", "agent.n_envs=1000000000"], "no replay_capacity holds that many"),
    (["agent.learning_rate=1e6"], "agent.learning_rate: 1000000.0 is outside the valid range [0,"),
    (["agent=dreamerv3", "agent.learning_rate=2"], "agent.learning_rate: 2.0 is outside the"),
    (["agent.enc_lr_scale=1e6"], "exceeds 1 (an Adam step moves each weight by about the rate"),
]
# Refused by the CPU budget only on a machine without an accelerator.
CPU_ONLY = {"protocol=paper", "protocol.n_timesteps=200000000", "env=pendulum,cartpole_balance"}


def case_id(argv) -> str:
    return " ".join(argv).replace(" ".join(FAKE), "<fake agent>")


def run_main(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(("argv", "fragment"), BATTERY, ids=[case_id(a) for a, _ in BATTERY])
def test_bad_input_exits_2_with_one_message(argv, fragment, capsys, tmp_path, monkeypatch):
    if CPU_ONLY & set(argv) and jax.default_backend() != "cpu":
        pytest.skip("the CPU budget applies to machines without an accelerator")
    monkeypatch.chdir(tmp_path)

    def accepted(*_a, **_k):  # fail at once instead of training an accepted case
        raise AssertionError(f"accepted: {argv}")

    monkeypatch.setattr("launcher.loop.run.run", accepted)
    multirun = argv[0] == "-m"
    args = (["-m"] if multirun else []) + SMOKE + argv[1 if multirun else 0 :]
    if multirun:
        args.remove("env=pendulum")
    code, out, err = run_main(args, capsys)
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert fragment in err
    assert not (tmp_path / "runs").exists()  # nothing written
    suggested_values(args, err)  # a value the message suggests lies within its bounds


def test_at_least_40_cases():
    assert len(BATTERY) >= 40
    assert len({case_id(a) for a, _ in BATTERY}) == len(BATTERY)


def test_one_edit_adds_a_hyperparameter(capsys, tmp_path, monkeypatch):
    """``FakeConfig.momentum`` is one line of launcher_fakes.py (type, default, bound); no
    YAML names it, yet the command line sets it, ``--cfg job`` prints it and its bound
    and type refuse bad values with one line each."""
    monkeypatch.chdir(tmp_path)
    base = [*FAKE, "protocol=smoke", "env=pendulum", "logger=disabled"]
    assert compose_spec(base).agent.momentum == 0.9
    assert compose_spec([*base, "agent.momentum=0.5"]).agent.momentum == 0.5
    code, out, _ = run_main(["--cfg", "job", *base, "agent.momentum=0.25"], capsys)
    assert code == 0 and "momentum: 0.25" in out
    for value, fragment in [
        ("1", "agent.momentum: 1.0 is outside the valid range [0, 1) (1 never forgets)"),
        ("abc", "agent.momentum: expected float, got 'abc' (str)"),
    ]:
        code, _, err = run_main([*base, f"agent.momentum={value}"], capsys)
        assert code == 2 and fragment in one_error_line(err)
    assert not (tmp_path / "runs").exists()


def test_changed_config_into_the_same_run_dir_exits_2(capsys, tmp_path):
    run_dir = tmp_path / "run"
    old = compose_spec([*SMOKE, "agent.horizon=4"])
    RunDir(run_dir).write_run(old, {})
    before = (run_dir / "run.json").read_text()
    # Hydra leaves logging alone (its handlers would outlive pytest's captured streams)
    args = [
        *SMOKE,
        f"hydra.run.dir={run_dir}",
        "hydra/job_logging=none",
        "hydra/hydra_logging=none",
    ]
    code, _, err = run_main(args, capsys)
    assert code == 2 and err.count("\n") == 1
    assert "holds a run with another config: agent.horizon: 4 -> 3" in err
    code, _, err = run_main([*args, "+resume=force"], capsys)
    assert code == 2 and "+resume=force may change only protocol.n_timesteps" in err
    assert (run_dir / "run.json").read_text() == before


def test_report_and_evaluate_refuse_missing_run_dirs(capsys, tmp_path):
    assert report_main([str(tmp_path / "nope")]) == 2
    assert evaluate_main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"error: {tmp_path / 'nope'}: no such run directory",
        f"error: {tmp_path / 'nope'}: no such run directory",
    ]
    RunDir(tmp_path / "new").write_run(compose_spec(SMOKE), {})
    assert evaluate_main([str(tmp_path / "new")]) == 2
    assert "no checkpoint to evaluate yet" in capsys.readouterr().err


def test_cfg_job_prints_the_composed_config(capsys):
    code, out, _ = run_main(["--cfg", "job", "protocol=smoke", "env=cartpole_balance"], capsys)
    assert code == 0
    assert "name: smoke" in out and "id: cartpole_balance" in out and "mlp_dim: 32" in out


def test_cfg_job_says_what_the_null_widths_resolve_to(capsys):
    """DreamerV3's widths are null in the YAML (the model_size preset fills them): the
    printout ends with their values; an explicit width is not listed."""
    argv = ["--cfg", "job", "agent=dreamerv3", "env=pendulum", "model_size=dreamerv3_1m"]
    code, out, _ = run_main([*argv, "agent.units=100"], capsys)
    assert code == 0 and "units: 100" in out
    # 1m: d = 64, deter = 8 d, classes = d / 16, cnn_depth = d / 16 (agents/dreamerv3/config.py
    # MODEL_SIZES; cnn_depth: issue 47, D42)
    note = "# null above resolves to (model_size 1m): agent.hidden=64, agent.deter=512, "
    assert out.endswith(note + "agent.classes=4, agent.cnn_depth=4\n")
    code, out, _ = run_main(["--cfg", "job", "protocol=smoke"], capsys)  # TD-MPC2: no nulls
    assert code == 0 and "resolves to" not in out


def test_cfg_with_multirun_is_one_error(capsys):
    code, out, err = run_main(["-m", "--cfg", "hydra", "env=pendulum,cartpole_balance"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: --cfg hydra prints one job's config") and err.count("\n") == 1


def test_process_exit_status_is_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (
        ["-m", "launcher", "env=walker_wlak"],
        ["-m", "launcher.report", str(tmp_path / "missing")],
        ["-m", "launcher", "-m", "protocol=smoke", "env=pendulum,cartpole"],
    ):
        proc = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, env=env, cwd=tmp_path
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
        assert proc.stdout == "", proc.stdout  # no JAX backend lines before a refusal


def test_cfg_job_shows_the_env_quick_runs(capsys):
    code, out, _ = run_main(["--cfg", "job", "protocol=quick"], capsys)
    assert code == 0
    assert "id: pendulum" in out and "name: quick" in out


@pytest.mark.parametrize("what", ["job", "hydra"])
def test_cfg_prints_a_config_the_cpu_budget_would_refuse_to_run(what, capsys):
    long_run = ["agent=dreamerv3", "env=walker_walk"]  # the paper protocol: days on a CPU
    if jax.default_backend() == "cpu":
        with pytest.raises(ConfigError, match="allow_long_cpu_run"):
            check_overrides(long_run)
    code, out, err = run_main(["--cfg", what, *long_run], capsys)
    assert (code, err) == (0, "")
    assert ("name: paper" in out) if what == "job" else ("run:" in out)
