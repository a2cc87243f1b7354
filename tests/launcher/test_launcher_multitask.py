"""The launcher with the offline multi-task agent (``agent=tdmpc2_multitask``, docs/design.md §7.6).

In process, on the probe task set (``env=probe_tasks``: two probes, T 20) with a synthetic
dataset: a smoke run trains and evaluates every task, its train program takes the dataset
as a shared argument and compiles once, a run split by a relaunch is bit-identical to an
uninterrupted one, and run.json pins the dataset's hash. Refusals: a task set for a
single-task agent, a single env or no dataset for the multi-task agent.
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from real_agents import rows

from agents.tdmpc2.dataset import TaskInfo
from agents.tdmpc2.offline import synthetic_dataset
from launcher.cli import compose_spec
from launcher.errors import ConfigError
from launcher.loop.run import run
from launcher.store.checkpoint import fingerprint, to_raw

SMOKE = ["protocol=smoke", "logger=disabled", "env.episode_length=null"]


def args(dataset, *extra):
    return [
        "agent=tdmpc2_multitask",
        "env=probe_tasks",
        *SMOKE,
        f"agent.dataset={dataset}",
        *extra,
    ]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    import envs

    infos = [TaskInfo.from_spec(envs.make(n).spec) for n in envs.make("probe_tasks").names]
    path = tmp_path_factory.mktemp("data") / "probes"
    digest = synthetic_dataset(infos, episodes_per_task=3, seed=1).save(path)
    return path, digest


@pytest.fixture(scope="module")
def runs(dataset, tmp_path_factory):
    base = tmp_path_factory.mktemp("mt")
    full = run(compose_spec(args(dataset[0])), base / "full", plot=False)
    half = run(compose_spec(args(dataset[0], "+stop_after_chunks=1")), base / "split", plot=False)
    rest = run(compose_spec(args(dataset[0])), base / "split", plot=False)
    return full, half, rest


def test_smoke_trains_and_evaluates_every_task(runs, dataset):
    full, _, _ = runs
    assert full.compiles == {"init": 1, "train": 1, "evaluate": 1}
    train = [r for r in rows(full.run_dir) if r["kind"] == "train"]
    assert [r["timestep"] for r in train] == [20, 40]  # n_timesteps counts updates
    assert [r["Train/n_updates"] for r in train] == [20, 40]
    assert all(np.isfinite(r["Train/total_loss"]) for r in train)
    (ev,) = [r for r in rows(full.run_dir) if r["kind"] == "eval"]
    # probe_constant_reward: 1 per step whatever the action, 20 steps
    assert ev["Eval/probe_constant_reward/episodic mean reward"] == pytest.approx(20.0)
    assert -20 <= ev["Eval/probe_reward_is_action/episodic mean reward"] <= 20
    assert len(ev["Eval/episode returns"]) == 4  # 2 episodes x 2 tasks
    stored = json.loads((full.run_dir / "run.json").read_text())
    assert stored["resolved_agent"]["dataset_sha256"] == dataset[1]
    assert stored["memory_bytes_per_seed"]["dataset_shared"] > 0


def test_resume_is_bit_identical(runs):
    full, half, rest = runs
    assert half.stopped_early and rest.resumed_from == 1
    a = jax.tree.leaves(to_raw(full.state))
    b = jax.tree.leaves(to_raw(rest.state))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert fingerprint(full.state) == fingerprint(rest.state)
    assert rows(full.run_dir) == rows(rest.run_dir)


def test_refusals(dataset, tmp_path):
    with pytest.raises(ConfigError, match="is a task set"):
        run(compose_spec(["agent=tdmpc2", "env=probe_tasks", *SMOKE]), tmp_path / "a")
    with pytest.raises(ConfigError, match="not a task set"):
        run(
            compose_spec(
                [
                    "agent=tdmpc2_multitask",
                    "env=pendulum",
                    "protocol=smoke",
                    f"agent.dataset={dataset[0]}",
                ]
            ),
            tmp_path / "b",
        )
    with pytest.raises(ConfigError, match="agent.dataset is empty"):
        run(compose_spec(["agent=tdmpc2_multitask", "env=probe_tasks", *SMOKE]), tmp_path / "c")
    with pytest.raises(ConfigError, match="dataset_sha256"):
        run(compose_spec(args(dataset[0], "agent.dataset_sha256=abc")), tmp_path / "d")
    with pytest.raises(ConfigError, match=r"agent.tasks=\['nope'\]: nope not in the task set"):
        run(compose_spec(args(dataset[0], "agent.tasks=[nope]")), tmp_path / "e")
    assert not any(tmp_path.iterdir())  # nothing left behind
