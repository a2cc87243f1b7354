"""Config resolution: conf/ tree <-> registries, every valid agent x model size x env
combination resolves, invalid ones fail naming the key; types, frozen dataclasses,
hashes, protocols and sweeps."""

from __future__ import annotations

import dataclasses
import importlib.resources
import pathlib
import pickle

import pytest
import yaml
from omegaconf import OmegaConf

import envs
from agent_api import AgentEntry, load
from launcher.cli import check_overrides, compose, compose_all, compose_spec, group_options
from launcher.config.identity import composed_hash, diff, identity
from launcher.config.schema import SECTIONS, EnvSpecConfig, LoggerSpec, Protocol, RunSpec
from launcher.config.structured import build_dataclass
from launcher.config.validate import resolve
from launcher.errors import ConfigError
from launcher.loop.build import compatible_envs, precheck

TDMPC2 = load("agents.tdmpc2.entry:ENTRY")
DREAMERV3 = load("agents.dreamerv3.entry:ENTRY")
MULTITASK = load("agents.tdmpc2.entry:MULTITASK")


def agent_yaml(name: str) -> dict:
    return OmegaConf.to_container(compose([f"agent={name}"]).agent, resolve=True)


def entries() -> dict[str, AgentEntry]:
    """The implemented agents: every conf/agent/*.yaml that names an entry."""
    out = {}
    for name in group_options("agent"):
        path = agent_yaml(name)["entry"]
        if path is not None:
            out[name] = load(path)
    return out


@pytest.fixture(scope="module")
def base_config() -> dict:
    return OmegaConf.to_container(compose([]), resolve=True)


@pytest.fixture(scope="module")
def env_sections() -> dict[str, dict]:
    """The composed ``env`` section of every env option (through Hydra)."""
    ids = group_options("env")
    cfgs = compose_all([[f"env={env_id}"] for env_id in ids])
    return {i: OmegaConf.to_container(c.env, resolve=True) for i, c in zip(ids, cfgs, strict=True)}


def test_conf_tree_matches_the_registries():
    # the env= options are generated from the registry, plus custom (a user's own env)
    assert set(group_options("env")) == {*envs.list_envs(), "custom"}
    assert set(group_options("agent")) == {"tdmpc2", "tdmpc2_multitask", "dreamerv3"}
    found = entries()
    assert found == {"tdmpc2": TDMPC2, "tdmpc2_multitask": MULTITASK, "dreamerv3": DREAMERV3}
    assert all(entry.name == name for name, entry in found.items())
    # every model_size option belongs to an agent option and is one of its presets
    owners = {}
    for opt in group_options("model_size"):
        owner = OmegaConf.to_container(compose([f"model_size={opt}"]).model_size)["agent"]
        owners[opt] = owner
        assert owner in group_options("agent"), opt
    for entry in found.values():
        # a variant (tdmpc2_multitask) takes its owner's presets; its default option too
        owner = entry.model_size_owner or entry.name
        mine = {o for o, a in owners.items() if a == owner}
        family = {e.name for e in found.values() if (e.model_size_owner or e.name) == owner}
        assert mine == set(entry.model_sizes) | family, entry.name
    protocols = {"quick", "smoke", "learning_check", "paper", "offline", "crafter", "dmc_vision"}
    assert set(group_options("protocol")) == protocols
    assert set(group_options("logger")) == {"offline", "online", "disabled", "tensorboard"}
    for entry in found.values():  # every settable field is in the composed section
        surface = {f.name for f in dataclasses.fields(entry.config_cls)}
        keys = set(agent_yaml(entry.name))
        assert keys == surface - set(entry.launcher_fields) | {"name", "entry"}, entry.name


@pytest.mark.parametrize("protocol", ["quick", "smoke", "learning_check", "paper"])
@pytest.mark.parametrize("agent", ["tdmpc2", "dreamerv3"])
def test_every_agent_protocol_pair_composes(agent, protocol):
    """Protocols are agent-neutral; an agent's settings for one come from
    agent_protocol/<agent>_<protocol>.yaml and model_size/<agent>/<protocol>.yaml."""
    overrides = [f"agent={agent}", f"protocol={protocol}"]
    cfg = compose(overrides)
    assert cfg.protocol.name == protocol and cfg.agent.name == agent
    spec = compose_spec(overrides)
    assert spec.protocol.name == protocol and spec.agent_name == agent
    precheck(spec)


def test_protocol_files_hold_only_protocol_settings():
    for name in group_options("protocol"):
        text = (importlib.resources.files("conf") / "protocol" / f"{name}.yaml").read_text()
        data = yaml.safe_load(text)
        assert set(data) <= {"protocol", "env"}, name  # env: smoke's short episodes
        # ... and dmc_vision's observation mode (env.obs: image)
        assert set(data.get("env", {})) <= {"episode_length", "obs"}, name
        assert "defaults" not in data, name


def test_every_valid_combination_resolves(base_config, env_sections):
    """Every size of every agent on one env, and one size of every agent on every env it
    can run (the two factors are resolved independently: the size sets widths, the env its
    spec), instead of the full product (7 DreamerV3 sizes x ~50 envs took 2 minutes)."""
    checked = 0
    for name, entry in entries().items():
        valid_envs = compatible_envs(entry)
        if entry.requirements.task_set:  # a multi-task agent runs the task sets only
            home = "probe_tasks"
            assert set(valid_envs) == {"mt3_cpu", "mt3_dmc", "mt30_dmc19", "probe_tasks"}
        else:
            home = "walker_walk"
            assert {"pendulum", "walker_walk", "cartpole_balance"} <= set(valid_envs)
            assert "mt3_cpu" not in valid_envs
        sizes = {
            opt: OmegaConf.to_container(compose([f"model_size={opt}"]).model_size)
            for opt in entry.model_sizes
        }
        first = next(iter(sizes))
        pairs = [(opt, home) for opt in sizes]
        pairs += [(first, env_id) for env_id in valid_envs if env_id != home]
        for opt, env_id in pairs:
            cfg = {**base_config, "model_size": sizes[opt], "env": env_sections[env_id]}
            cfg["agent"] = {**agent_yaml(name), "name": name}
            spec = resolve(cfg)
            assert spec.agent.model_size == entry.model_sizes[opt]
            assert spec.env.id == env_id
            checked += 1
    assert checked == sum(
        len(e.model_sizes) + len(compatible_envs(e)) - 1 for e in entries().values()
    )


def test_paper_defaults():
    spec = compose_spec([])
    assert spec.agent_name == "tdmpc2" and spec.agent.model_size == 5  # the paper's size
    assert spec.env.id == "walker_walk" and spec.env.action_repeat == 2
    p = spec.protocol
    assert (p.name, p.seeds, p.n_timesteps) == ("paper", (1, 2, 3), 2_000_000)
    assert (p.eval_frequency, p.eval_episodes, p.eval_at_start) == (50_000, 10, True)
    assert spec.agent.eval_episodes == 10 and spec.logger.mode == "offline"
    assert compose_spec(["env=pendulum"]).env.action_repeat == 1


@pytest.mark.parametrize("protocol", ["quick", "smoke", "learning_check", "paper"])
def test_protocols_resolve_on_pendulum(protocol):
    spec = compose_spec([f"protocol={protocol}", "env=pendulum"])
    assert spec.protocol.name == protocol
    precheck(spec)


@pytest.mark.parametrize(
    ("protocol", "env_id", "size"),
    [("quick", "pendulum", 1), ("smoke", "pendulum", 1), ("paper", "walker_walk", 5)],
)
def test_a_protocol_runs_its_own_env_and_agent_size(protocol, env_id, size):
    spec = compose_spec([f"protocol={protocol}"])
    assert spec.env.id == env_id and spec.agent.model_size == size
    assert compose_spec([f"protocol={protocol}", "env=cartpole_balance"]).env.id == (
        "cartpole_balance"
    )


def test_command_line_beats_protocol_presets():
    spec = compose_spec(["protocol=quick", "model_size=tdmpc2_5", "agent.num_samples=64"])
    assert spec.agent.model_size == 5 and spec.agent.num_samples == 64
    assert spec.agent.enc_dim == 64  # quick's other agent settings stay


def test_invalid_model_size_names_the_key(base_config):
    for opt in [o for o in group_options("model_size") if o.startswith("dreamerv3_")]:
        size_cfg = OmegaConf.to_container(compose([f"model_size={opt}"]).model_size)
        with pytest.raises(ConfigError, match=r"^model_size: .*agent=dreamerv3.*tdmpc2_5"):
            resolve({**base_config, "model_size": size_cfg})
    with pytest.raises(ConfigError, match=r"model_size.size: 7 is not a tdmpc2 preset"):
        resolve({**base_config, "model_size": {"agent": "tdmpc2", "size": 7}})


def test_invalid_envs_name_the_key_and_the_valid_ones():
    invalid = [e for e in envs.list_envs() if TDMPC2.requirements.problems(envs.facts(e))]
    assert {"cartpole", "acrobot", "mountain_car", "ant", "hopper"} <= set(invalid)
    for env_id in invalid:  # from static facts: nothing is built
        with pytest.raises(ConfigError, match=rf"^env={env_id}: .*choose env= one of: pendulum"):
            precheck(compose_spec([f"env={env_id}"]))


def test_sweeps_expand_into_validated_jobs():
    specs = check_overrides(["+sweep=tdmpc2_learning_checks"], multirun=True)
    assert [(s.env.id, s.protocol.name) for s in specs] == [
        ("pendulum", "learning_check"),
        ("cartpole_balance", "learning_check"),
    ]
    specs = check_overrides(["env=pendulum,cartpole_balance", "protocol=smoke"], multirun=True)
    assert [s.env.id for s in specs] == ["pendulum", "cartpole_balance"]
    assert len({s.run_name for s in specs}) == 2
    sweep = importlib.resources.files("sweeps") / "sweep" / "tdmpc2_paper_dmc.yaml"
    paper = yaml.safe_load(sweep.read_text())
    for env_id in paper["hydra"]["sweeper"]["params"]["env"].split(","):
        assert env_id in compatible_envs(TDMPC2)


def test_integral_floats_become_ints_and_everything_else_stays_as_written():
    from launcher.config.compose import normalize

    assert normalize(["protocol.n_timesteps=1e6", "+x=2e2", "agent.buffer_size=1e5,2e5"]) == [
        "protocol.n_timesteps=1000000",
        "+x=200",
        "agent.buffer_size=100000,200000",
    ]
    kept = ["a=1.5", "b=x,1e3", "c=range(1,5)", "hydra.x=1e3", "d=inf", "e=[1e3,2]", "f=true"]
    assert normalize(kept) == kept
    assert normalize(["g=1.5,2e3"]) == ["g=1.5,2000"]  # a float field takes 2000 as 2000.0
    assert (
        compose_spec(["protocol=quick", "agent.buffer_size=1.5e4"]).run_name
        == (PINNED_RUN_NAMES["protocol=quick agent.buffer_size=15000"])
    )


# Run names of configs launched before the schema moved into the dataclasses: a run
# started then resumes now (launcher.config.identity hashes the composed sections).
PINNED_RUN_NAMES = {
    "agent=tdmpc2 protocol=quick": "tdmpc2-pendulum-quick-8a48964980",
    "agent=dreamerv3 protocol=smoke": "dreamerv3-pendulum-smoke-bd395c3b09",
    "agent=dreamerv3 protocol=paper": "dreamerv3-walker_walk-paper-492219ba2a",
    "agent=tdmpc2_multitask env=mt3_cpu protocol=offline": (
        "tdmpc2_multitask-mt3_cpu-offline-ab6090d922"
    ),
    "protocol=quick agent.buffer_size=15000": "tdmpc2-pendulum-quick-800dda3537",
    "protocol=quick protocol.seeds=[1,2] model_size=tdmpc2_1": "tdmpc2-pendulum-quick-41f5df7ed5",
    "agent=dreamerv3 protocol=smoke agent.train_ratio=8.0": "dreamerv3-pendulum-smoke-5485733662",
    "protocol=smoke callbacks.eval_metrics=[a.b:c]": "tdmpc2-pendulum-smoke-46aa3c3d7d",
}


def test_run_names_are_pinned():
    jobs = [line.split() for line in PINNED_RUN_NAMES]
    names = [compose_spec(job).run_name for job in jobs]
    assert dict(zip(PINNED_RUN_NAMES, names, strict=True)) == PINNED_RUN_NAMES


def test_a_key_added_later_names_a_run_only_away_from_its_default():
    """A field declared added later (``agent_api.rules.added_later``, on the field): at its
    default the key is out of the name, the hash and run.json's identity (a run launched
    before the key existed resumes); set, it is in."""
    from launcher.config.identity import identity

    job = "agent=tdmpc2_multitask env=mt3_cpu protocol=offline"
    pinned = PINNED_RUN_NAMES[job]
    assert compose_spec([*job.split(), "agent.q_scale_per_task=false"]).run_name == pinned
    on = compose_spec([*job.split(), "agent.q_scale_per_task=true"])
    assert on.run_name != pinned and identity(on)["agent"]["q_scale_per_task"] is True
    assert "q_scale_per_task" not in identity(compose_spec(job.split()))["agent"]


def test_added_later_is_declared_on_the_field_and_read_generically():
    """launcher/config/identity.py names no key: it reads the fields' metadata of whatever sections
    it is given, and the run dir Hydra names (the resolver) agrees with the pinned names."""
    from hydra.core.hydra_config import HydraConfig

    from agents.dreamerv3.config import DreamerV3Config
    from agents.tdmpc2.multitask_config import MultiTaskConfig
    from launcher.config import identity as ident

    source = pathlib.Path(ident.__file__).read_text()
    assert "q_scale_per_task" not in source and "compute_dtype" not in source
    got = ident.added_at_default({"agent": MultiTaskConfig, "env": EnvSpecConfig})
    assert got[("agent", "q_scale_per_task")] is False
    image = {  # issue 47: the image encoder / decoder (agents/dreamerv3/images.py)
        "cnn_depth": None,
        "cnn_mults": [1, 2, 3, 4, 4],
        "cnn_kernel": 5,
        "cnn_minres": 4,
        "cnn_blocks": 8,
        "image_scale": 1.0,
    }
    assert ident.added_at_default({"agent": DreamerV3Config}) == {
        ("agent", "compute_dtype"): "auto",
        **{("agent", k): v for k, v in image.items()},
    }
    for job in (
        "agent=tdmpc2_multitask env=mt3_cpu protocol=offline",
        "agent=dreamerv3 protocol=paper",
    ):
        cfg = compose(job.split(), hydra_node=True)
        HydraConfig.instance().set_config(cfg)
        assert cfg.hydra.run.dir == f"runs/{PINNED_RUN_NAMES[job]}"


def _restated(cls: type, data: dict) -> list[str]:
    """The keys of ``data`` whose value is ``cls``'s default."""
    defaults = {
        f.name: list(f.default) if isinstance(f.default, tuple) else f.default
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING
    }
    return [k for k, v in data.items() if k in defaults and v == defaults[k]]


def test_yaml_files_restate_no_default():
    """Defaults live once, in the dataclasses (Hydra's schema): conf/ holds presets."""
    conf = importlib.resources.files("conf")
    found = []
    for group, cls in [("env", EnvSpecConfig), ("logger", LoggerSpec), ("protocol", Protocol)]:
        for path in sorted(pathlib.Path(str(conf / group)).rglob("*.yaml")):
            data = yaml.safe_load(path.read_text()) or {}
            if group == "protocol":  # @package _global_: protocol (and smoke's env) keys
                found += [
                    f"{path.name}: env.{k}" for k in _restated(EnvSpecConfig, data.get("env", {}))
                ]
                data = data["protocol"]
            found += [f"{group}/{path.name}: {k}" for k in _restated(cls, data)]
    for entry in (TDMPC2, MULTITASK, DREAMERV3):
        data = yaml.safe_load((conf / "agent" / f"{entry.name}.yaml").read_text())
        found += [f"agent/{entry.name}.yaml: {k}" for k in _restated(entry.config_cls, data)]
    assert not found


def test_cfg_job_prints_every_default():
    """The composed agent section holds every settable field with its default."""
    cfg = OmegaConf.to_container(compose(["agent=dreamerv3"]).agent)
    defaults = dataclasses.asdict(DREAMERV3.config_cls())
    for key in set(defaults) - set(DREAMERV3.launcher_fields):
        want = defaults[key]
        assert cfg[key] == (list(want) if isinstance(want, tuple) else want), key
    assert set(cfg) - set(defaults) == {"name", "entry"}


def test_a_composed_config_pickles():
    """Hydra's submitit launcher pickles the config and the ConfigStore for its jobs: the
    schema classes pickle by name and a fresh process rebuilds them from it."""
    import launcher.config.structured as structured

    cfg = compose(["protocol=smoke", "agent.horizon=4"], hydra_node=True)
    data = pickle.dumps(cfg)
    del vars(structured)[OmegaConf.get_type(cfg.agent).__name__]  # as in a fresh process
    back = pickle.loads(data)
    assert back == cfg and back.agent.horizon == 4
    with pytest.raises(Exception, match="could not be converted to Integer"):
        back.agent.horizon = "x"  # still typed


def test_the_schema_checks_types_and_keys():
    """Plain mappings (a stored run.json, a test's config) are checked by OmegaConf against
    the same schema Hydra composes with (launcher.config.structured)."""
    p = build_dataclass(
        Protocol, {"name": "t", "seeds": [1, 2], "n_timesteps": 10, "log_frequency": 5}, "protocol"
    )
    assert p.seeds == (1, 2) and p.eval_episodes == 10 and p.shard_seeds is True
    base = {"name": "t", "seeds": [0], "n_timesteps": 10, "log_frequency": 5}
    for change, fragment in [
        ({"n_timesteps": "3"}, None),  # OmegaConf converts a numeric string
        ({"n_timesteps": 2.5}, "protocol.n_timesteps: expected int, got 2.5 (float)"),
        ({"eval_at_start": "maybe"}, "protocol.eval_at_start: expected bool, got 'maybe'"),
        ({"seeds": [1, "a"]}, "protocol.seeds"),
        ({"seeds": 3}, "protocol.seeds: expected a list of int, got 3 (int); write a list"),
        ({"n_timestep": 3}, "protocol.n_timestep: unknown key; did you mean n_timesteps?"),
        ({"name": None}, "protocol.name"),
    ]:
        data = {**base, **change}
        if fragment is None:
            build_dataclass(Protocol, data, "protocol")
            continue
        with pytest.raises(ConfigError) as err:
            build_dataclass(Protocol, data, "protocol")
        assert str(err.value).startswith(fragment), err.value
    with pytest.raises(ConfigError, match="^protocol.n_timesteps: missing"):
        build_dataclass(Protocol, {"name": "t", "seeds": [0], "log_frequency": 5}, "protocol")


def test_dataclasses_are_frozen_and_typed():
    spec = compose_spec(["protocol=smoke", "env=pendulum"])
    assert isinstance(spec, RunSpec) and isinstance(spec.protocol, Protocol)
    for obj, field in [(spec, "env"), (spec.protocol, "seeds"), (spec.agent, "horizon")]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, None)
    assert isinstance(spec.protocol.seeds, tuple)
    assert isinstance(spec.agent.learning_rate, float)


def test_hash_is_stable_and_ignores_logger_and_run_control():
    a = compose_spec(["protocol=smoke", "env=pendulum"])
    b = compose_spec(["protocol=smoke", "env=pendulum", "logger=disabled", "+resume=force"])
    c = compose_spec(["protocol=smoke", "env=pendulum", "agent.horizon=4"])
    assert a.config_hash == b.config_hash != c.config_hash
    assert a.config_hash == composed_hash(a.config, SECTIONS) and len(a.config_hash) == 10
    assert a.run_name == f"tdmpc2-pendulum-smoke-{a.config_hash}"
    assert diff(identity(a), identity(c)) == [("agent.horizon", 3, 4)]


def test_hydra_run_dir_is_the_hashed_run_name():
    cfg = compose(["protocol=smoke", "env=pendulum"], hydra_node=True)
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().set_config(cfg)
    name = compose_spec(["protocol=smoke", "env=pendulum"]).run_name
    assert cfg.hydra.run.dir == f"runs/{name}"
    assert cfg.hydra.sweep.subdir == name
