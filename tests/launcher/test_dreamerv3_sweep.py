"""The DreamerV3 paper DMC-proprio sweep (``sweeps/sweep/dreamerv3_paper_dmc.yaml``): its
envs are the task map of its comments, every task of the reference's curves is mapped or
listed as missing, and each job composes into the paper protocol at action repeat 2.
Composition and validation only: nothing is built, trained or compiled."""

from __future__ import annotations

import importlib.resources
import re

import yaml

import envs
from launcher.cli import check_overrides
from launcher.config.structured import env_options

SWEEP = importlib.resources.files("sweeps") / "sweep" / "dreamerv3_paper_dmc.yaml"

# The 18 tasks of the reference's DreamerV3 DMC-proprio curves: the `task` values of
# reference_results/dreamerv3/dmc_proprio-dreamerv3.json.gz (danijar/dreamerv3 @ 2411f7d,
# scores/; 5 seeds each).
REFERENCE_TASKS = (
    "dmc_acrobot_swingup",
    "dmc_ball_in_cup_catch",
    "dmc_cartpole_balance",
    "dmc_cartpole_balance_sparse",
    "dmc_cartpole_swingup",
    "dmc_cartpole_swingup_sparse",
    "dmc_cheetah_run",
    "dmc_finger_spin",
    "dmc_finger_turn_easy",
    "dmc_finger_turn_hard",
    "dmc_hopper_hop",
    "dmc_hopper_stand",
    "dmc_pendulum_swingup",
    "dmc_reacher_easy",
    "dmc_reacher_hard",
    "dmc_walker_run",
    "dmc_walker_stand",
    "dmc_walker_walk",
)


def task_map(text: str) -> tuple[dict[str, str], list[str]]:
    """The sweep's comments: ``#   <task> -> <env id>`` lines and the one
    ``# Reference tasks that ... lacks: a, b`` line (``none.`` when empty)."""
    mapped = dict(re.findall(r"^#\s+(dmc_\w+) -> (\w+)\s*$", text, re.MULTILINE))
    (lacks,) = re.findall(r"^# Reference tasks that .* lacks: (.*)$", text, re.MULTILINE)
    missing = [] if lacks.strip() == "none." else [t.strip() for t in lacks.split(",")]
    return mapped, missing


def test_every_reference_task_is_mapped_or_listed_missing():
    mapped, missing = task_map(SWEEP.read_text())
    assert not set(mapped) & set(missing)
    assert sorted([*mapped, *missing]) == sorted(REFERENCE_TASKS)


def test_sweep_envs_are_the_mapped_ids_registered_at_repeat_2():
    text = SWEEP.read_text()
    mapped, _ = task_map(text)
    sweep_envs = yaml.safe_load(text)["hydra"]["sweeper"]["params"]["env"].split(",")
    assert sweep_envs == list(mapped.values())
    assert len(set(sweep_envs)) == len(sweep_envs)
    options = env_options()  # the env= options, generated from the registry
    for env_id in sweep_envs:
        assert env_id in envs.list_envs()
        assert options[env_id] == {"id": env_id, "action_repeat": 2}, env_id


def test_sweep_jobs_compose_into_the_paper_protocol():
    # On a CPU-only machine the CPU budget refuses the paper protocol; the flag only
    # lifts that guard (the specs are checked, nothing runs).
    specs = check_overrides(
        ["+sweep=dreamerv3_paper_dmc", "+allow_long_cpu_run=true"], multirun=True
    )
    mapped, _ = task_map(SWEEP.read_text())
    assert [s.env.id for s in specs] == list(mapped.values())
    for spec in specs:
        assert spec.agent_name == "dreamerv3" and spec.protocol.name == "paper"
        assert spec.env.action_repeat == 2
        assert spec.config["model_size"] == {"agent": "dreamerv3", "size": "12m"}
        assert spec.protocol.seeds == (0, 1, 2, 3, 4)
        assert spec.protocol.n_timesteps == 250_000  # rows: 500K env frames at repeat 2
        assert (spec.agent.n_envs, spec.agent.train_ratio) == (16, 512.0)
