"""The sweep's all-jobs pre-check runs in Hydra's sweeper (launcher/config/sweeper.py): every job
of a ``-m`` sweep is composed and checked before the configured launcher gets any."""

from __future__ import annotations

import pytest
from hydra.core.plugins import Plugins
from launcher_fakes import QUIET_HYDRA, one_error_line

from launcher.cli import main
from launcher.config.sweeper import sweep_jobs

SMOKE = ["protocol=smoke", "logger=disabled", *QUIET_HYDRA]


@pytest.fixture
def launches(monkeypatch, tmp_path):
    """The batches the sweeper hands to its launcher (a recorder here: it runs nothing).
    Patched where the sweeper asks for its launcher: Hydra re-imports its plugin
    modules when it scans them, so their classes cannot be patched."""
    monkeypatch.chdir(tmp_path)
    batches: list[list[list[str]]] = []

    class Recorder:
        def launch(self, job_overrides, initial_job_idx):
            batches.append([list(job) for job in job_overrides])
            return []

    monkeypatch.setattr(Plugins, "instantiate_launcher", lambda self, **_: Recorder())
    return batches


def test_jobs_are_hydras_basic_sweeper_product_a_command_line_key_replacing_params():
    params = {"env": "walker_walk,cheetah_run", "agent": "tdmpc2"}
    batches = sweep_jobs(params, ["protocol=smoke", "env=pendulum,cartpole_balance"])
    assert batches == [
        [
            ["env=pendulum", "agent=tdmpc2", "protocol=smoke"],
            ["env=cartpole_balance", "agent=tdmpc2", "protocol=smoke"],
        ]
    ]
    assert [len(b) for b in sweep_jobs(None, ["a=1,2,3", "b=4,5"], max_batch_size=4)] == [4, 2]


def test_the_sweeper_hands_every_checked_job_to_the_launcher(launches, capsys):
    assert main(["-m", *SMOKE, "env=pendulum,cartpole_balance"]) == 0, capsys.readouterr().err
    jobs = [[o for o in job if not o.startswith("hydra")] for job in launches[0]]
    assert len(launches) == 1
    assert jobs == [
        ["protocol=smoke", "logger=disabled", "env=pendulum"],
        ["protocol=smoke", "logger=disabled", "env=cartpole_balance"],
    ]


def test_a_sweep_of_integral_floats_reaches_an_int_field_as_ints(launches, capsys):
    """``1e5`` is a float to Hydra's grammar; a swept int field gets the ints, as one value does
    (launcher.config.compose.normalize)."""
    assert main(["-m", *SMOKE, "agent.buffer_size=1e5,2e5"]) == 0, capsys.readouterr().err
    sizes = [o for job in launches[0] for o in job if o.startswith("agent.buffer_size")]
    assert sizes == ["agent.buffer_size=100000", "agent.buffer_size=200000"]


def test_one_bad_job_refuses_the_sweep_naming_it_and_launches_nothing(launches, capsys, tmp_path):
    # --config-dir: the command line's own pre-check stands aside; the sweeper still checks.
    extra = tmp_path / "extra_conf"
    extra.mkdir()
    argv = ["-m", "--config-dir", str(extra), *SMOKE, "env=pendulum,cartpole"]
    assert main(argv) == 2
    err = one_error_line(capsys.readouterr().err)
    assert "env=cartpole: has discrete actions" in err
    assert "[sweep job #1: protocol=smoke logger=disabled env=cartpole]" in err
    assert launches == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["extra_conf"]  # no runs/
