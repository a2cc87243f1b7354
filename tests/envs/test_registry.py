"""Registry: ids, errors, and the smoke test over every registered env (docs/design.md §5.1).

The smoke test builds every id, checks that ``envs.facts`` (static tables) agrees with
the built spec, and runs reset + SMOKE_STEPS random steps in ONE jitted function per env
(a ``lax.scan`` over the steps, so the step is compiled once), at the test session's
XLA -O0 (``tests/conftest.py``: compile time is what this test pays for).

MJX compiles dominate (20-80 s each on the CI machine). The Playground tasks of one
dm_control domain share its MuJoCo model and physics step; only the first registered task
of each domain is compiled and run; its siblings (``walker_stand`` and ``walker_walk``
beside ``walker_run``) are traced with ``jax.eval_shape`` (every shape and dtype of the
same function, and any trace-time error) but not compiled. That cut about 400 s of CI
time; the launcher's walker_walk smokes run that task compiled. The compiled MuJoCo ids
are marked ``slow`` (they still run in CI) and the heaviest run first so that the two
xdist workers finish together.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs.brax_backend import BRAX_ENVS
from envs.craftax_backend import CRAFTAX_ENVS
from envs.gymnax_backend import GYMNAX_ENVS
from envs.minatar_backend import MINATAR_ENVS
from envs.playground_backend import PLAYGROUND_ENVS
from envs.probes import PROBE_ENVS
from envs.registry import list_envs
from envs.task_sets import TASK_SETS

SMOKE_STEPS = 2

# Ids whose reset+step compile takes longest on CPU (measured); scheduled first.
_HEAVY_FIRST = (
    "humanoid_stand",
    "swimmer_swimmer6",
    "hopper_hop",
    "finger_spin",
    "cheetah_run",
    "fish_swim",
    "walker_run",
    "humanoidstandup",
    "humanoid",
    "walker2d",
)


def _domain(env_id: str) -> str:
    return env_id.split("_")[0]


def traced_only() -> frozenset[str]:
    """Playground ids whose domain's first registered task is compiled instead."""
    first: dict[str, str] = {}
    for env_id in PLAYGROUND_ENVS:
        first.setdefault(_domain(env_id), env_id)
    return frozenset(i for i in PLAYGROUND_ENVS if first[_domain(i)] != i)


# full Craftax compiles for ~50 s on CPU (its world generation); Craftax-Classic, the same
# code paths at a smaller size, is compiled and run
TRACED_ONLY = traced_only() | {"craftax"}


def _smoke_order() -> list:
    ids = [i for i in list_envs() if envs.backend_of(i) != "task_set"]  # no reset/step
    heavy = [i for i in _HEAVY_FIRST if i in ids]
    rest = [i for i in ids if i not in heavy]
    params = []
    for env_id in heavy + rest:
        slow = envs.backend_of(env_id) in ("playground", "brax") and env_id not in TRACED_ONLY
        params.append(pytest.param(env_id, marks=[pytest.mark.slow] if slow else []))
    return params


def smoke_fn(env: envs.Env):
    """key -> (reset obs [O], obs [S, O], rewards [S], done [S], terminated [S], t [S])."""
    spec = env.spec

    def random_action(key):
        if spec.discrete:
            idx = jax.random.randint(key, (), 0, spec.action_size)
            return jax.nn.one_hot(idx, spec.action_size, dtype=jnp.float32)
        return jax.random.uniform(key, (spec.action_size,), minval=-1.0, maxval=1.0)

    def run(key):
        k_reset, k_act = jax.random.split(key)
        state = env.reset(k_reset)

        def body(state, k):
            state = env.step(state, random_action(k))
            return state, (state.obs, state.reward, state.done, state.terminated, state.t)

        _, out = jax.lax.scan(body, state, jax.random.split(k_act, SMOKE_STEPS))
        return (state.obs, *out)

    return run


def test_each_domain_has_one_compiled_task():
    compiled = [i for i in PLAYGROUND_ENVS if i not in TRACED_ONLY]
    assert sorted(map(_domain, compiled)) == sorted(set(map(_domain, PLAYGROUND_ENVS)))
    assert "walker_run" in compiled and {"walker_walk", "walker_stand"} <= TRACED_ONLY


@pytest.mark.parametrize("env_id", _smoke_order())
def test_registry_smoke(env_id, record_property):
    t0, c0 = time.perf_counter(), time.process_time()
    env = envs.make(env_id)
    t_build = time.perf_counter() - t0
    spec = env.spec
    compiled = env_id not in TRACED_ONLY
    if compiled:
        fn = jax.jit(smoke_fn(env))
        out = jax.device_get(fn(jax.random.PRNGKey(0)))
    else:
        out = jax.eval_shape(smoke_fn(env), jax.random.PRNGKey(0))
    obs0, obs, reward, done, terminated, t = out
    record_property("build_s", round(t_build, 2))
    record_property("wall_s", round(time.perf_counter() - t0, 2))
    record_property("cpu_s", round(time.process_time() - c0, 2))  # this worker's CPU time

    assert spec.env_id == env_id
    assert spec.backend == envs.backend_of(env_id)
    assert envs.facts(env_id) == envs.EnvFacts.from_spec(spec)  # the static tables hold
    assert spec.episode_length >= 1 and spec.action_repeat == 1
    assert obs0.shape == (spec.obs_size,) and obs0.dtype == np.float32
    assert obs.shape == (SMOKE_STEPS, spec.obs_size) and obs.dtype == np.float32
    assert reward.shape == (SMOKE_STEPS,) and reward.dtype == np.float32
    assert done.dtype == bool and terminated.dtype == bool
    assert t.shape == (SMOKE_STEPS,)
    if not spec.discrete:
        assert len(spec.action_low) == len(spec.action_high) == spec.action_size
    if not compiled:
        return
    assert np.isfinite(obs0).all() and np.isfinite(obs).all() and np.isfinite(reward).all()
    np.testing.assert_array_equal(t, np.arange(1, SMOKE_STEPS + 1))
    if not spec.can_terminate:
        assert not terminated.any()


def test_list_envs_covers_every_backend_table():
    ids = list_envs()
    assert len(ids) == len(set(ids))
    expected = [*GYMNAX_ENVS, *MINATAR_ENVS, *CRAFTAX_ENVS, *PLAYGROUND_ENVS, *BRAX_ENVS]
    expected += [*PROBE_ENVS, *TASK_SETS]
    assert sorted(ids) == sorted(expected)
    assert list_envs("probe") == list(PROBE_ENVS)
    for name in ("walker_walk", "cup_catch", "point_mass_easy", "pendulum", "cartpole", "ant"):
        assert name in ids


def test_playground_table_is_the_whole_dm_control_suite():
    from mujoco_playground import registry

    assert sorted(PLAYGROUND_ENVS.values()) == sorted(registry.dm_control_suite.ALL_ENVS)


def test_brax_table_is_brax_registry_minus_test_double_and_swimmer():
    from brax import envs as brax_envs

    # fast: brax's test double; swimmer: broken on jax 0.10 (envs/brax_backend.py)
    assert sorted(BRAX_ENVS) == sorted(set(brax_envs._envs) - {"fast", "swimmer"})


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [("walker-walk", "walker_walk"), ("WalkerWalk", "walker_walk"), ("cartpol", "cartpole")],
)
def test_unknown_id_names_closest(typo, suggestion):
    with pytest.raises(ValueError, match="did you mean") as info:
        envs.make(typo)
    assert suggestion in str(info.value)


def test_unknown_id_without_close_match():
    with pytest.raises(ValueError, match="unknown env id 'zzzzzz'"):
        envs.make("zzzzzz")


@pytest.mark.parametrize("repeat", [0, -1, 1.5, True])
def test_invalid_action_repeat(repeat):
    with pytest.raises(ValueError, match="action_repeat must be an int >= 1"):
        envs.make("probe_constant_reward", action_repeat=repeat)


def test_repeat_not_dividing_limit_names_the_fix():
    with pytest.raises(ValueError, match="not divisible by action_repeat=3.*divides"):
        envs.make("probe_constant_reward", action_repeat=3)


def test_gymnax_rejects_repeat():
    with pytest.raises(ValueError, match="only action_repeat=1"):
        envs.make("pendulum", action_repeat=2)


@pytest.mark.parametrize("length", [0, 2.5])
def test_invalid_episode_length(length):
    with pytest.raises(ValueError, match="episode_length must be"):
        envs.make("probe_constant_reward", episode_length=length)


def test_make_is_cached():
    assert envs.make("pendulum") is envs.make("pendulum")
    assert envs.make("probe_constant_reward", 2) is not envs.make("probe_constant_reward", 1)
    assert envs.spec_of("pendulum") is envs.make("pendulum").spec


def test_register_rejects_duplicates_and_unknown_backend():
    with pytest.raises(ValueError, match="already registered"):
        envs.register("pendulum", "gymnax")
    with pytest.raises(ValueError, match="unknown backend"):
        envs.register("some_new_env", "atari")
