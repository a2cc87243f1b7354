"""A user's own env from a package outside the repository (envs.custom, docs/design.md §5.5):
built by its factory, held to the env protocol, one line for each way it can be wrong."""

from __future__ import annotations

import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import custom
from envs.custom import CustomEnvError

PACKAGE = "wmrl_test_user_envs"  # a name no other test module uses (sys.modules caches it)

# The user's module: a point on a line pushed by the action (bounds [-2, 2]); reward -|x|.
# Then one factory per way to break the protocol.
USER_MODULE = """
import jax.numpy as jnp

import envs

BOUNDS = ((-2.0,), (2.0,))


def _spec(action_repeat, episode_length, obs_size=2, bounds=BOUNDS):
    limit = 10 if episode_length is None else episode_length
    return envs.EnvSpec(
        env_id="line", backend="mine", obs_size=obs_size, action_size=1, discrete=False,
        episode_length=limit // action_repeat, action_repeat=action_repeat,
        action_low=bounds[0], action_high=bounds[1],
    )


def _reset(key):
    return jnp.zeros(()), jnp.zeros(2)


def _step(x, a, key):
    x = x + a[0]
    return x, jnp.stack([x, 1.0]), -jnp.abs(x), jnp.zeros((), bool)


def make_env(action_repeat, episode_length):
    return envs.build_env(_spec(action_repeat, episode_length), _reset, _step)


def inverted_bounds(action_repeat, episode_length):  # not through build_env: no check on the way
    env = make_env(action_repeat, episode_length)
    spec = _spec(action_repeat, episode_length, bounds=((2.0,), (-2.0,)))
    return envs.Env(spec, env.reset, env.step)


def infinite_bounds(action_repeat, episode_length):
    env = make_env(action_repeat, episode_length)
    spec = _spec(action_repeat, episode_length, bounds=((float("-inf"),), (1.0,)))
    return envs.Env(spec, env.reset, env.step)


def wrong_obs_size(action_repeat, episode_length):  # the spec says 3, reset returns 2
    env = make_env(action_repeat, episode_length)
    return envs.Env(_spec(action_repeat, episode_length, obs_size=3), env.reset, env.step)


def ignores_the_repeat(action_repeat, episode_length):
    return make_env(1, episode_length)


def keeps_its_own_limit(action_repeat, episode_length):
    return make_env(action_repeat, None)


def not_an_env(action_repeat, episode_length):
    return {"reset": _reset, "step": _step}


def takes_nothing():
    return make_env(1, None)


NOT_CALLABLE = 3
"""


@pytest.fixture(scope="module")
def user_package(tmp_path_factory):
    """The package ``wmrl_test_user_envs`` written outside the repository, on sys.path."""
    root = tmp_path_factory.mktemp("user_site")
    (root / PACKAGE).mkdir()
    (root / PACKAGE / "__init__.py").write_text("")
    (root / PACKAGE / "line.py").write_text(textwrap.dedent(USER_MODULE))
    (root / PACKAGE / "broken.py").write_text("import a_package_nobody_has\n")
    sys.path.insert(0, str(root))
    yield f"{PACKAGE}.line"
    sys.path.remove(str(root))
    for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def test_a_factory_outside_the_repo_builds_a_checked_env(user_package):
    env = custom.make(f"{user_package}:make_env", action_repeat=2, episode_length=12, name="line")
    spec = env.spec
    # renamed to the config's id and the custom backend; T = 12 backend steps / repeat 2
    assert (spec.env_id, spec.backend, spec.episode_length, spec.action_repeat) == (
        "line",
        "custom",
        6,
        2,
    )
    assert custom.make(f"{user_package}:make_env", 2, 12, "line") is env  # cached: traced once
    facts = custom.facts(f"{user_package}:make_env", 2, 12, "line")
    assert (facts.obs_size, facts.action_size, facts.backend_episode_length) == (2, 1, 12)
    # agent action +1 is env action +2 (bounds [-2, 2]), applied twice per agent step
    state = env.reset(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    for t in range(1, 7):
        state = step(state, jnp.ones((1,)))
        np.testing.assert_array_equal(state.obs, [4.0 * t, 1.0])
    # rewards summed over the repeat: -(4t - 2) - 4t at step t = 6
    assert float(state.reward) == -(22.0 + 24.0)
    assert bool(state.done) and not bool(state.terminated)  # the time limit, T = 6


@pytest.mark.parametrize(
    ("path", "field", "says"),
    [
        (
            "a_package_nobody_has.envs:make_env",
            "factory",
            "cannot import 'a_package_nobody_has.envs' (No module",
        ),
        (f"{PACKAGE}.broken:make_env", "factory", "cannot import 'wmrl_test_user_envs.broken'"),
        (f"{PACKAGE}.line:make_envs", "factory", "has no attribute 'make_envs'; its functions"),
        (f"{PACKAGE}.line", "factory", "is not package.module:function"),
        (f"{PACKAGE}.line:NOT_CALLABLE", "factory", "is a int, not a function"),
        (
            f"{PACKAGE}.line:takes_nothing",
            "factory",
            "must take action_repeat= and episode_length=",
        ),
        (f"{PACKAGE}.line:not_an_env", "factory", "returned a dict, not an env"),
        (f"{PACKAGE}.line:inverted_bounds", "factory", "action bounds need low < high"),
        (f"{PACKAGE}.line:infinite_bounds", "factory", "action bounds must be finite"),
        (f"{PACKAGE}.line:wrong_obs_size", "factory", "reset(key) returns obs float32[2], not"),
        (f"{PACKAGE}.line:ignores_the_repeat", "factory", "spec.action_repeat is 1, but"),
    ],
)
def test_each_broken_factory_is_one_line(user_package, path, field, says):
    with pytest.raises(CustomEnvError) as info:
        custom.make(path, action_repeat=2, episode_length=None)
    err = info.value
    assert isinstance(err, envs.EnvError) and err.field == field
    assert says in str(err) and "\n" not in str(err), str(err)


def test_a_built_in_id_is_not_a_name_for_your_env(user_package):
    with pytest.raises(CustomEnvError, match="'pendulum' is a built-in env") as info:
        custom.make(f"{user_package}:make_env", name="pendulum")
    assert info.value.field == "id"


def test_the_time_limit_asked_for_is_held(user_package):
    """A factory that keeps its own limit when the launch names one is refused (the launch's
    T would differ from the env's)."""
    with pytest.raises(CustomEnvError, match="asks for 7 backend steps"):
        custom.make(f"{user_package}:keeps_its_own_limit", action_repeat=1, episode_length=7)
