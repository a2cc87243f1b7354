"""Offline multi-task TD-MPC2 (docs/design.md §7.6): datasets and the offline trainer.

* Datasets (``agents/tdmpc2/dataset.py``): save -> load round trip with a stable content
  hash, memory-mapped loading, tampering and broken padding refused, pooling and selecting
  tasks re-pad exactly.
* Trainer (``agents/tdmpc2/offline.py``) on an in-memory synthetic dataset of 3 toy tasks of
  different obs / action dims and episode lengths (``conftest.TOY_TASKS``), through the
  launcher's seed program (2 seeds): the sampler's windows stay inside each episode, train
  and per-task evaluation run and are finite, and the dataset is one unbatched parameter of
  the lowered train program (not a constant, not copied per seed).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.tdmpc2.dataset import (
    DatasetError,
    MultiTaskDataset,
    TaskInfo,
    from_episodes,
    pool_tasks,
    select_tasks,
)
from agents.tdmpc2.multitask_config import MultiTaskConfig
from agents.tdmpc2.offline import TDMPC2MultiTask, sample_windows, synthetic_dataset
from launcher.loop.program import SeedProgram, seed_keys
from tests.agents.tdmpc2.conftest import TOY_TASKS

INFOS = [TaskInfo.from_spec(TOY_TASKS.member_env(i).spec) for i in range(3)]
TINY = MultiTaskConfig(
    model_size=1,
    enc_dim=16,
    mlp_dim=32,
    latent_dim=16,
    num_q=2,
    batch_size=8,
    iterations=2,
    num_samples=16,
    num_elites=4,
    num_pi_trajs=2,
    task_dim=4,
    eval_episodes=2,
)


@pytest.fixture(scope="module")
def data():
    return synthetic_dataset(INFOS, episodes_per_task=4, seed=3)


# ---------------------------------------------------------------------- datasets
def test_schema_of_a_pooled_dataset(data):
    assert data.names == ("toy-a", "toy-b", "toy-c")
    assert data.obs.shape == (12, 10, 5) and data.action.shape == (12, 10, 3)
    assert data.reward.shape == (12, 10) and data.task.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert data.episode_lengths().tolist() == [6] * 4 + [9] * 4 + [7] * 4
    # padding: toy-a (obs 3, act 1, T 6) is zero beyond its dims and its last row
    a = data.task == 0
    assert not data.obs[a][:, :, 3:].any() and not data.obs[a][:, 7:].any()
    assert not data.action[a][:, :, 1:].any() and not data.action[a][:, 6].any()
    assert data.obs[a][:, :7, :3].all()


def test_save_load_round_trip_hash_and_mmap(data, tmp_path):
    digest = data.save(tmp_path / "d")
    assert digest == data.content_hash()
    back = MultiTaskDataset.load(tmp_path / "d")
    assert isinstance(back.obs, np.memmap)
    for name in ("obs", "action", "reward", "task"):
        np.testing.assert_array_equal(getattr(back, name), getattr(data, name))
    assert back.tasks == data.tasks and back.content_hash() == digest
    assert back.save(tmp_path / "again") == digest  # hash stable across a round trip
    with pytest.raises(FileExistsError):
        data.save(tmp_path / "d")


def test_load_refuses_changed_files(data, tmp_path):
    data.save(tmp_path / "d")
    obs = np.load(tmp_path / "d" / "obs.npy")
    obs[0, 1, 0] += 1.0
    np.save(tmp_path / "d" / "obs.npy", obs)
    with pytest.raises(DatasetError, match="content hash"):
        MultiTaskDataset.load(tmp_path / "d")
    with pytest.raises(DatasetError, match="not a dataset directory"):
        MultiTaskDataset.load(tmp_path)


@pytest.mark.parametrize(
    ("array", "index", "message"),
    [
        ("obs", (0, 2, 4), "obs beyond the task's obs dim"),
        ("action", (1, 2, 2), "action beyond the task's action dim"),
        ("action", (2, 6, 0), "action on the last row"),
        ("reward", (3, 0), "reward on the reset row"),
        ("reward", (0, 8), "reward past the episode's last row"),
    ],
)
def test_check_refuses_broken_padding(data, array, index, message):
    arrays = {k: np.array(getattr(data, k)) for k in ("obs", "action", "reward", "task")}
    arrays[array][index] = 0.5
    broken = MultiTaskDataset(**arrays, tasks=data.tasks)
    with pytest.raises(DatasetError, match=message):
        broken.check()


def test_pool_and_select_repad_exactly(data):
    parts = [select_tasks(data, [n]) for n in data.names]
    assert parts[1].obs.shape == (4, 10, 5) and parts[0].obs.shape == (4, 7, 3)
    again = pool_tasks(parts)
    assert again.content_hash() == data.content_hash()
    swapped = select_tasks(data, ["toy-c", "toy-a"])
    assert swapped.names == ("toy-c", "toy-a") and swapped.task.tolist() == [0] * 4 + [1] * 4
    np.testing.assert_array_equal(swapped.obs[4:, :7, :3], data.obs[:4, :7, :3])
    with pytest.raises(DatasetError, match="not in the dataset"):
        select_tasks(data, ["toy-z"])
    other = dataclasses.replace(INFOS[0], obs_dim=4)
    lone = from_episodes(np.ones((1, 7, 4)), np.zeros((1, 7, 1)), np.zeros((1, 7)), other)
    with pytest.raises(DatasetError, match="different facts"):
        pool_tasks([data, lone])


# ----------------------------------------------------------------------- trainer
@pytest.fixture(scope="module")
def program(data):
    agent = TDMPC2MultiTask(TINY, TOY_TASKS, 20, data=data)
    prog = SeedProgram(agent, 2)
    init_keys, eval_keys = seed_keys([0, 1])
    state = prog.init(prog.place(init_keys))
    return agent, prog, state, prog.place(eval_keys)


def test_windows_stay_inside_each_episode(program):
    agent, prog, _, _ = program
    shared = prog.shared
    batch, ids = jax.jit(sample_windows, static_argnums=(2, 3))(
        shared, jax.random.PRNGKey(0), 4096, 3
    )
    lengths = np.asarray(shared.length)
    # every obs row of a window belongs to its episode: rows past T_i are zero, so a window
    # reaching past its episode would hold all-zero obs rows
    assert np.asarray(jnp.abs(batch.obs).sum(-1)).all()
    counts = np.bincount(np.asarray(ids), minlength=3)
    assert counts.sum() == 4096 and counts.min() > 4096 / 3 * 0.85  # uniform episodes, 4 each
    assert lengths.tolist() == [6] * 4 + [9] * 4 + [7] * 4
    # each window's task id is the task of the episode its rows came from: the first obs row
    # (random normals, so unique) is found among that task's episodes and no other's
    obs0, task = np.asarray(batch.obs[0]), np.asarray(shared.task)
    rows = np.asarray(shared.obs)  # [E, L, O]
    for b in range(0, 4096, 97):
        hit = np.flatnonzero(np.all(rows == obs0[b], axis=-1).any(axis=-1))
        assert hit.size == 1 and task[hit[0]] == int(ids[b]), (b, hit, int(ids[b]))


def test_train_and_evaluate_every_task(program):
    agent, prog, state, eval_keys = program
    state, metrics = prog.train(state, jnp.arange(0, 5, dtype=jnp.int32))
    assert np.asarray(metrics["Train/n_updates"]).tolist() == [5, 5]
    assert np.asarray(metrics["timestep"]).tolist() == [5, 5]
    for k in ("total_loss", "consistency_loss", "pi_loss", "grad_norm"):
        assert np.isfinite(np.asarray(metrics[f"Train/{k}"])).all(), k
    # the two seeds drew different batches and initialisations
    assert np.asarray(metrics["Train/total_loss"])[0] != np.asarray(metrics["Train/total_loss"])[1]
    _, ev = prog.evaluate(state, eval_keys)
    per_task = [np.asarray(ev[f"Eval/{n}/episodic mean reward"]) for n in TOY_TASKS.names]
    assert np.asarray(ev["Eval/episode returns"]).shape == (2, 6)
    np.testing.assert_allclose(
        np.asarray(ev["Eval/episodic mean reward"]), np.mean(per_task, axis=0), rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(ev["Eval/normalised score"]), np.mean(per_task, axis=0) / 10, rtol=1e-6
    )
    for r in per_task:  # -mean(s^2) per step over T steps: in [-T, 0]
        assert np.all(r <= 0) and np.all(r >= -9)


def test_one_q_scale_per_task_is_a_state_of_its_own(data):
    """``q_scale_per_task`` (T49, a what-if): the state holds one scale per task, from 1; each
    steps on its own rows (the fresh model's Q ranges are under the floor of 1, so a scale
    started at s moves to 1 + (s - 1) 0.99^n after n updates whose batches hold its task:
    all 3, at batch 64); each update logs their mean, and the chunk its mean over the chunk's
    3 updates (docs/design.md §4.4). The default keeps one scale."""
    default = TDMPC2MultiTask(TINY, TOY_TASKS, 20, data=data)
    assert default.init_train(jax.random.key(0)).q_scale.shape == ()
    cfg = dataclasses.replace(TINY, q_scale_per_task=True, batch_size=64)
    prog = SeedProgram(TDMPC2MultiTask(cfg, TOY_TASKS, 20, data=data), 1)
    state = prog.init(prog.place(seed_keys([0])[0]))
    assert np.asarray(state.train.q_scale).tolist() == [[1.0, 1.0, 1.0]]
    start = np.float32([[0.5, 2.0, 4.0]])
    state = state.replace(train=state.train.replace(q_scale=jnp.asarray(start)))
    state, metrics = prog.train(state, jnp.arange(0, 3, dtype=jnp.int32))
    scale = np.asarray(state.train.q_scale)
    np.testing.assert_allclose(scale, 1 + (start - 1) * 0.99**3, rtol=1e-6)
    per_update = [(1 + (start - 1) * 0.99**n).mean(1) for n in (1, 2, 3)]
    chunk_mean = np.mean(per_update, axis=0)
    assert not np.allclose(chunk_mean, scale.mean(1), rtol=1e-4)  # the last update's differs
    np.testing.assert_allclose(np.asarray(metrics["Train/pi_scale"]), chunk_mean, rtol=1e-6)


def test_dataset_is_one_unbatched_parameter_of_the_train_program(program, data):
    agent, prog, state, _ = program
    ticks = jax.ShapeDtypeStruct((3,), jnp.int32)
    text = prog._train.lower(state, ticks, prog.shared).as_text()
    obs = "tensor<12x10x5xf32>"
    header = text[text.index("func.func public @main") :].split("{", 1)[0]
    assert header.count(obs) == 1  # an argument of the program, once
    assert "tensor<2x12x10x5xf32>" not in text  # never broadcast to the seed axis
    assert not any(obs in line and "constant" in line for line in text.splitlines())


def test_dataset_must_match_the_task_set(data):
    other = dataclasses.replace(INFOS[1], episode_length=8)
    wrong = synthetic_dataset([INFOS[0], other, INFOS[2]], 1)
    with pytest.raises(ValueError, match="toy-b.*the env's"):
        TDMPC2MultiTask(TINY, TOY_TASKS, 20, data=wrong)
    with pytest.raises(DatasetError, match="not in the dataset"):
        TDMPC2MultiTask(TINY, TOY_TASKS, 20, data=select_tasks(data, ["toy-a"]))


def test_agent_tasks_choose_a_subset_in_their_order(data):
    names = [i.name for i in INFOS]
    sub = TDMPC2MultiTask(
        dataclasses.replace(TINY, tasks=(names[2], names[0])), TOY_TASKS, 20, data=data
    )
    assert sub.tasks.names == (names[2], names[0])  # task ids follow agent.tasks
    assert sub.tasks.obs_max == max(INFOS[2].obs_dim, INFOS[0].obs_dim)
    assert [m.spec.env_id for m in sub.members] == [INFOS[2].name, INFOS[0].name]
    assert [t.name for t in sub.data.tasks] == [names[2], names[0]]
    assert sub.data.num_episodes == 8  # 4 episodes each
    for bad, message in (
        ((names[0], "nope"), "nope not in the task set"),
        ((names[0],) * 2, "a task twice"),
    ):
        with pytest.raises(ValueError, match=message):
            TDMPC2MultiTask(dataclasses.replace(TINY, tasks=bad), TOY_TASKS, 20, data=data)
