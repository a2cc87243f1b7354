"""envs.facts and the typed errors: the checks of envs.make, without building the env.

Nothing here builds a simulator env: bad arguments are refused before a build, and
envs.facts reads static tables. The tables are checked against every built spec by the
registry smoke test (tests/envs/test_registry.py) and, with repeats, by
test_backends.py::test_episode_length_in_agent_steps.
"""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
import textwrap

import pytest

import envs
from envs import registry
from envs.brax_backend import BRAX_ENVS, BRAX_FACTS
from envs.core import StaticFacts, agent_episode_length
from envs.gymnax_backend import GYMNAX_ENVS, GYMNAX_FACTS
from envs.playground_backend import PLAYGROUND_ENVS, PLAYGROUND_FACTS
from envs.probes import PROBE_ENVS, PROBE_FACTS

facts_module = importlib.import_module("envs.facts")  # ``envs.facts`` is the function


@pytest.fixture
def no_build(monkeypatch):
    """Fail the test if envs.facts builds an env."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"envs.facts built an env: {args}")

    monkeypatch.setattr(facts_module, "make", refuse)


@pytest.fixture
def scratch_registry(monkeypatch):
    """A copy of the registry, restored after the test (ids registered here vanish)."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


# ------------------------------------------------------------------ the facts
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("walker_walk", 2), ("playground", 24, 6, False, False, 500, 2, 1000)),
        (("walker_walk", 4, 100), ("playground", 24, 6, False, False, 25, 4, 100)),
        (("humanoid_run",), ("playground", 67, 21, False, False, 1000, 1, 1000)),
        (("pendulum",), ("gymnax", 3, 1, False, False, 200, 1, 200)),
        (("cartpole", 1, 50), ("gymnax", 4, 2, True, True, 50, 1, 50)),
        (("mountain_car_continuous",), ("gymnax", 2, 1, False, True, 999, 1, 999)),
        (("ant", 2), ("brax", 27, 8, False, True, 500, 2, 1000)),
        (("humanoid",), ("brax", 244, 17, False, True, 1000, 1, 1000)),
        (("probe_constant_reward", 2, 10), ("probe", 1, 1, False, False, 5, 2, 10)),
    ],
)
def test_facts_values(args, expected, no_build):
    f = envs.facts(*args)
    assert f.env_id == args[0]
    got = (
        f.backend,
        f.obs_size,
        f.action_size,
        f.discrete,
        f.can_terminate,
        f.episode_length,
        f.action_repeat,
        f.backend_episode_length,
    )
    assert got == expected


def test_every_builtin_id_has_static_facts(no_build):
    tables = [
        (GYMNAX_ENVS, GYMNAX_FACTS),
        (PLAYGROUND_ENVS, PLAYGROUND_FACTS),
        (BRAX_ENVS, BRAX_FACTS),
        (PROBE_ENVS, PROBE_FACTS),
    ]
    for ids, table in tables:
        assert list(table) == list(ids)
        assert all(isinstance(row, StaticFacts) for row in table.values())
    for env_id in envs.list_envs():
        f = envs.facts(env_id)
        assert f.episode_length == f.backend_episode_length >= 1
        if f.backend not in ("gymnax", "minatar", "craftax", "task_set"):  # repeat 1 only
            assert envs.facts(env_id, 2).episode_length == f.episode_length // 2


def test_brax_envs_is_a_view_of_the_facts():
    assert BRAX_ENVS == {i: row.can_terminate for i, row in BRAX_FACTS.items()}


def test_facts_is_frozen_and_from_spec_round_trips():
    f = envs.facts("probe_reward_is_action", 2, 10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.obs_size = 2
    assert envs.EnvFacts.from_spec(envs.spec_of("probe_reward_is_action", 2, 10)) == f


def test_facts_imports_no_simulator():
    code = textwrap.dedent(
        """
        import sys
        import envs
        sims = ("mujoco", "mujoco_playground", "brax", "gymnax", "craftax")
        assert not [m for m in sims if m in sys.modules], "import envs"
        for args in [("walker_walk", 2), ("ant", 2), ("pendulum",), ("humanoid_run", 1, 10),
                     ("breakout_minatar",), ("craftax_classic",)]:
            envs.facts(*args)
        try:
            envs.facts("walker_walk", 2, 21)
        except envs.EpisodeLengthError:
            pass
        loaded = [m for m in sims if m in sys.modules]
        assert not loaded, loaded
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------------ typed errors
def raised(fn, *args) -> envs.EnvError:
    with pytest.raises(envs.EnvError) as info:
        fn(*args)
    assert isinstance(info.value, ValueError)
    return info.value


def test_unknown_id():
    err = raised(envs.facts, "walker-wlak")
    assert type(err) is envs.UnknownEnvError and err.field == "id"
    assert err.env_id == "walker-wlak" and err.n_envs == len(envs.list_envs())
    assert err.close[0] == "walker_walk" and "walker_walk" in str(err)
    assert str(err).startswith("unknown env id 'walker-wlak'; did you mean walker_walk")
    assert str(err).endswith(f"(envs.list_envs() lists all {err.n_envs})")
    assert raised(envs.facts, "zzzzzz").close == ()
    assert type(raised(envs.backend_of, "zzzzzz")) is envs.UnknownEnvError


def test_gymnax_repeat():
    err = raised(envs.facts, "pendulum", 2)
    assert type(err) is envs.ActionRepeatError and err.field == "action_repeat"
    assert (err.env_id, err.action_repeat, err.supported, err.backend) == (
        "pendulum",
        2,
        (1,),
        "gymnax",
    )
    assert str(err).startswith("pendulum: gymnax envs support only action_repeat=1")


@pytest.mark.parametrize("repeat", [0, -1, 1.5, True, "2"])
def test_invalid_repeat(repeat):
    err = raised(envs.facts, "walker_walk", repeat)
    assert type(err) is envs.ActionRepeatError and err.field == "action_repeat"
    assert err.action_repeat is repeat and err.supported is None
    assert "action_repeat must be an int >= 1" in str(err)


def test_episode_length_not_divisible():
    err = raised(envs.facts, "walker_walk", 2, 21)
    assert type(err) is envs.EpisodeLengthError and err.field == "episode_length"
    assert (err.env_id, err.episode_length, err.action_repeat) == ("walker_walk", 21, 2)
    assert str(err).startswith("21 backend steps")  # the launcher prefixes its key
    assert "not divisible by action_repeat=2" in str(err)


def test_default_episode_length_not_divisible():
    err = raised(envs.facts, "walker_walk", 3)
    assert type(err) is envs.EpisodeLengthError
    assert (err.episode_length, err.action_repeat) == (1000, 3)  # the default limit


@pytest.mark.parametrize("length", [0, -5, 2.5, True, "10"])
def test_invalid_episode_length(length):
    err = raised(envs.facts, "walker_walk", 1, length)
    assert type(err) is envs.EpisodeLengthError and err.field == "episode_length"
    assert err.episode_length is length
    assert "episode_length must be an int >= 1 or None" in str(err)


BAD_ARGS = [
    ("walker_wlak", 1, None),
    ("pendulum", 2, None),
    ("walker_walk", 0, None),
    ("walker_walk", 3, None),
    ("walker_walk", 2, 21),
    ("ant", 2, 2.5),
    ("humanoid", 7, None),
    ("probe_constant_reward", 3, None),
]


@pytest.mark.parametrize("args", BAD_ARGS)
def test_make_raises_what_facts_raises(args):
    """Same checks, same errors; make refuses before it builds (no simulator cost)."""
    from_facts, from_make = raised(envs.facts, *args), raised(envs.make, *args)
    assert type(from_make) is type(from_facts)
    assert str(from_make) == str(from_facts) and from_make.field == from_facts.field


def test_repeat_is_checked_before_the_episode_length():
    assert type(raised(envs.facts, "pendulum", 2, 2.5)) is envs.ActionRepeatError


def test_agent_episode_length_errors():
    assert agent_episode_length(1000, 2) == 500
    err = raised(agent_episode_length, 1000, 3)
    assert type(err) is envs.EpisodeLengthError and err.env_id is None
    assert str(err).startswith("1000 backend steps are not divisible by action_repeat=3")
    err = raised(agent_episode_length, 1000, 0)
    assert type(err) is envs.ActionRepeatError
    assert str(err).startswith("action_repeat must be an int >= 1")


def test_backends_raise_typed_errors():
    from envs import gymnax_backend, probes

    assert type(raised(gymnax_backend.build, "pendulum", 2)) is envs.ActionRepeatError
    assert type(raised(probes.build, "probe_constant_reward", 3)) is envs.EpisodeLengthError
    assert type(raised(probes.build, "probe_nope")) is envs.UnknownEnvError


# ------------------------------------------------------------------ runtime registrations
def _renamed_probe(calls: list):
    def builder(env_id, action_repeat, episode_length):
        calls.append(env_id)
        env = envs.make("probe_reward_is_action", action_repeat, episode_length)
        return dataclasses.replace(env, spec=dataclasses.replace(env.spec, env_id=env_id))

    return builder


def test_runtime_env_without_facts_is_built(scratch_registry):
    calls: list = []
    envs.register("custom_probe", "probe", _renamed_probe(calls))
    f = envs.facts("custom_probe", 2)
    assert calls == ["custom_probe"]
    assert (f.env_id, f.backend, f.obs_size, f.episode_length, f.backend_episode_length) == (
        "custom_probe",
        "probe",
        1,
        10,
        20,
    )
    # its default limit is unknown without a build: the build's check raises
    assert type(raised(envs.facts, "custom_probe", 3)) is envs.EpisodeLengthError
    # the argument checks still come first
    assert type(raised(envs.facts, "custom_probe", 0)) is envs.ActionRepeatError
    assert calls == ["custom_probe", "custom_probe"]


def test_runtime_env_with_facts_is_not_built(scratch_registry, no_build):
    calls: list = []
    row = StaticFacts(1, 1, False, False, 20)
    envs.register("custom_probe", "probe", _renamed_probe(calls), facts=row)
    assert envs.facts("custom_probe", 4).episode_length == 5
    assert type(raised(envs.facts, "custom_probe", 3)) is envs.EpisodeLengthError
    assert calls == []


def test_runtime_gymnax_env_keeps_the_gymnax_repeat_limit(scratch_registry):
    envs.register("custom_gymnax", "gymnax", _renamed_probe([]))
    assert raised(envs.facts, "custom_gymnax", 2).supported == (1,)
