"""Task sets (``envs/task_sets.py``): the "env" of a multi-task agent. Static facts equal the
built spec and come from the members' facts (padded sizes, longest T); members build with
their own repeats; a task set takes no repeat or time limit; every member is registered."""

from __future__ import annotations

import pytest

import envs
from envs.task_sets import MT30_DMC19, TASK_SETS


@pytest.mark.parametrize("name", sorted(TASK_SETS))
def test_facts_are_the_members_padded_facts(name):
    f = envs.facts(name)
    members = [envs.facts(i, k) for i, k in TASK_SETS[name]]
    assert f.backend == "task_set" and f.action_repeat == 1
    assert f.obs_size == max(m.obs_size for m in members)
    assert f.action_size == max(m.action_size for m in members)
    assert f.episode_length == max(m.episode_length for m in members)
    assert not f.discrete and not f.can_terminate
    built = envs.make(name)
    assert envs.EnvFacts.from_spec(built.spec) == f
    assert built.names == tuple(i for i, _ in TASK_SETS[name])
    assert [built.member_facts(i) for i in range(len(built.names))] == members


def test_mt3_cpu_members_and_refusals():
    ts = envs.make("mt3_cpu")
    assert [
        (f.obs_size, f.action_size, f.episode_length) for f in map(ts.member_facts, range(3))
    ] == [
        (3, 1, 200),
        (5, 1, 500),
        (6, 2, 500),
    ]
    assert ts.member_env(0).spec.env_id == "pendulum"
    with pytest.raises(envs.ActionRepeatError):
        envs.facts("mt3_cpu", 2)
    with pytest.raises(ValueError, match="task set"):
        envs.make("mt3_cpu", episode_length=100)
    with pytest.raises(AttributeError):
        ts.reset  # noqa: B018  (a task set is not steppable)


def test_mt30_dmc19_is_mt30s_dmc_part_on_playground():
    assert len(MT30_DMC19) == 19 and len(set(MT30_DMC19)) == 19
    assert all(envs.backend_of(i) == "playground" for i in MT30_DMC19)
    assert all(k == 2 for _, k in TASK_SETS["mt30_dmc19"])
    f = envs.facts("mt30_dmc19")
    # O_max 24 (walker), A_max 6, T 500
    assert (f.obs_size, f.action_size, f.episode_length) == (24, 6, 500)
