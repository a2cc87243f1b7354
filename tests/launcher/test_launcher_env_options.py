"""The ``env=`` options come from the env registry (Hydra's ConfigStore, no YAML per task),
and a user's own env, defined in a package outside the repository, is launched with no edit
of the project: ``env=custom env.factory=package.module:function`` (docs/design.md §5.5)."""

from __future__ import annotations

import importlib.resources
import json
import pathlib
import sys
import textwrap

import pytest
from launcher_fakes import FAKE_CLI, QUIET_HYDRA, one_error_line

import envs
from launcher.cli import main
from launcher.config.compose import compose_spec, group_options

PACKAGE = "wmrl_launcher_user_envs"  # a name no other test module uses (sys.modules caches it)
SMOKE = [*FAKE_CLI, "protocol=smoke", "logger=disabled", *QUIET_HYDRA]

# A point on a line pushed by the action (bounds [-2, 2]); then an object that is no env.
USER_MODULE = """
import jax.numpy as jnp

import envs


def make_env(action_repeat, episode_length):
    limit = 10 if episode_length is None else episode_length
    spec = envs.EnvSpec(
        env_id="line", backend="mine", obs_size=2, action_size=1, discrete=False,
        episode_length=limit // action_repeat, action_repeat=action_repeat,
        action_low=(-2.0,), action_high=(2.0,),
    )

    def reset(key):
        return jnp.zeros(()), jnp.zeros(2)

    def step(x, a, key):
        x = x + a[0]
        return x, jnp.stack([x, 1.0]), -jnp.abs(x), jnp.zeros((), bool)

    return envs.build_env(spec, reset, step)


def flipped(action_repeat, episode_length):
    env = make_env(action_repeat, episode_length)
    low, high = env.spec.action_high, env.spec.action_low
    return envs.Env(env.spec.__class__(**{**vars(env.spec), "action_low": low,
                                          "action_high": high}), env.reset, env.step)


def not_an_env(action_repeat, episode_length):
    return "an env"
"""


@pytest.fixture(scope="module")
def user_site(tmp_path_factory):
    """A folder outside the repository holding the user's package and a config dir whose
    ``env/line.yaml`` names its factory; the folder is on sys.path."""
    root = tmp_path_factory.mktemp("user_site")
    (root / PACKAGE).mkdir()
    (root / PACKAGE / "__init__.py").write_text("")
    (root / PACKAGE / "line.py").write_text(textwrap.dedent(USER_MODULE))
    (root / "conf" / "env").mkdir(parents=True)
    (root / "conf" / "env" / "line.yaml").write_text(
        f"id: line\nfactory: {PACKAGE}.line:make_env\n"
    )
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))
    for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def run_main(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_env_options_are_the_registry_and_no_yaml_mirrors_it():
    conf_env = pathlib.Path(str(importlib.resources.files("conf") / "env"))
    assert not list(conf_env.glob("*.yaml"))  # only env/default/<protocol>.yaml remain
    assert group_options("env") == sorted([*envs.list_envs(), "custom"])
    # each option as its mirror YAML had it: DMC (Playground) at repeat 2, the rest at 1
    for option, repeat in [("walker_walk", 2), ("cup_catch", 2), ("pendulum", 1), ("ant", 1)]:
        env = compose_spec([f"env={option}", "protocol=quick"]).env
        assert (env.id, env.action_repeat, env.episode_length, env.factory) == (
            option,
            repeat,
            None,
            None,
        )


def test_a_backend_declared_once_reaches_every_reader(monkeypatch):
    """One declaration (envs.core.Backend) and one registration: the registry's ids and
    facts, the launcher's env= options, the renderer lookup and the CPU budget read it."""
    from envs import registry
    from envs.render import RenderError, renderer
    from launcher.config.cpu_budget import frame_cpu_s
    from launcher.config.structured import env_options

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_BACKENDS", dict(registry._BACKENDS))
    toy = envs.StaticFacts(3, 1, False, False, 40)
    registry.register_backend(
        envs.Backend(
            name="toy",
            tasks={"toy_reach": toy},
            build=registry.backends()["probe"].build,
            action_repeats=(1, 2),
            preset_action_repeat=2,
            frame_cpu_s=0.5,
        )
    )
    assert envs.backend_of("toy_reach") == "toy"
    assert envs.facts("toy_reach", 2).episode_length == 20  # 40 backend steps / 2
    with pytest.raises(envs.ActionRepeatError, match="toy envs support only"):
        envs.facts("toy_reach", 4)
    assert env_options()["toy_reach"] == {"id": "toy_reach", "action_repeat": 2}
    assert frame_cpu_s("toy") == 0.5 and frame_cpu_s("custom") == 0.0
    with pytest.raises(RenderError, match="toy envs have no renderer"):
        renderer("toy_reach")


def test_a_users_env_launches_end_to_end(user_site, tmp_path, capsys):
    """The user's package is outside the repository: a launch builds its env, checks it
    against the agent, trains, evaluates and records it as a custom env."""
    factory = f"{PACKAGE}.line:make_env"
    run = tmp_path / "run"
    args = [*SMOKE, "env=custom", f"env.factory={factory}", "env.id=line"]
    code, out, err = run_main([*args, f"hydra.run.dir={run}"], capsys)
    assert code == 0, err
    stored = json.loads((run / "run.json").read_text())
    assert stored["identity"]["env"] == {
        "id": "line",
        "action_repeat": 1,
        "episode_length": 20,  # protocol=smoke's time limit
        "factory": factory,
    }
    spec = stored["env_spec"]
    assert (spec["backend"], spec["env_id"], spec["obs_size"], spec["action_low"]) == (
        "custom",
        "line",
        2,
        [-2.0],
    )
    kinds = [json.loads(line)["kind"] for line in (run / "metrics" / "seed_0.jsonl").open()]
    assert "train" in kinds and "eval" in kinds
    assert compose_spec(args).run_name.startswith("fake-line-smoke-")


def test_a_users_env_by_yaml_in_their_config_dir(user_site):
    """The other form: ``env/line.yaml`` in the user's own config dir (hydra.searchpath)."""
    searchpath = f"hydra.searchpath=[pkg://sweeps,file://{user_site / 'conf'}]"
    spec = compose_spec([searchpath, "env=line", "protocol=smoke"])
    assert (spec.env.id, spec.env.factory) == ("line", f"{PACKAGE}.line:make_env")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["env=custom"], "env: env=custom is your own env: set env.factory=package.module"),
        (["env=custom", "env.factory=nopkg.envs:make"], "env.factory: cannot import 'nopkg.envs'"),
        (
            ["env=custom", f"env.factory={PACKAGE}.line:make"],
            f"env.factory: '{PACKAGE}.line' has no attribute 'make'; its functions: flipped",
        ),
        (["env=custom", f"env.factory={PACKAGE}.line:not_an_env"], "returned a str, not an env"),
        (["env=custom", f"env.factory={PACKAGE}.line:flipped"], "action bounds need low < high"),
        (
            ["env=pendulum", f"env.factory={PACKAGE}.line:make_env"],
            "env.id: 'pendulum' is a built-in env; your env (env.factory) needs a name",
        ),
        (["env=custom", "env.factory=a:b", "env.id=../x"], "env: id='../x' names your env's run"),
    ],
)
def test_a_broken_users_env_is_one_line(user_site, argv, fragment, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main([*SMOKE, *argv], capsys)
    assert code == 2, err
    assert fragment in one_error_line(err), err
    assert not list(tmp_path.iterdir())  # refused before anything is written
