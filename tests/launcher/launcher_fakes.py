"""Test doubles for the launcher: a tiny fake agent with the agents' interface, a fake env.

The fake agent compiles in well under a second, so the run loop, resume, checkpoints,
sharding and logging are tested without the real agents' compile times. Its state has
what matters for those tests: float parameters driven by per-tick randomness (folded
from the absolute tick, like the real agents), a replay-like array sized by the run's
total length (the force-extension path), a raw PRNG key, counters and an eval counter.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import pathlib
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from agent_api import AgentEntry, AgentTables, EnvRequirements, bounded
from envs.core import EnvSpec


def _hold(path: str, from_tick: int, first_tick: Any, timeout_s: float = 120.0) -> None:
    """Wait until ``path`` exists if the train call starts at ``from_tick`` or later
    (``path + ".waiting"`` says that it waits)."""
    if int(np.asarray(first_tick).reshape(-1)[0]) < from_tick:
        return
    if not os.path.exists(path):
        with open(f"{path}.waiting", "w"):
            pass
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


@dataclasses.dataclass(frozen=True)
class FakeConfig:
    model_size: int = 1
    width: int = 4
    lr: float = bounded(0.1, low=0, low_open=True)  # a bound is one edit (agent_api.rules)
    eval_episodes: int = 2
    sleep_s: float = 0.0  # host sleep per train call (kill tests)
    trace_sleep_s: float = 0.0  # sleep while tracing train: a slow compile (kill tests)
    terminate_at: int = -1  # report a termination at this tick (-1: never)
    nan_at: int = -1  # the parameters become NaN from this tick on (-1: never)
    init_sleep_s: float = 0.0  # sleep while tracing init: a launch slow to start (lock tests)
    nan_state_at: int = -1  # a non-metric state leaf (buffer[0]) becomes NaN at this tick
    hold_file: str = ""  # train calls from tick hold_at on wait (<= 120 s) for this file
    hold_at: int = 0  # (a launch kept running, or stopped inside a chunk, while a test acts)
    idle_steps: int = 0  # no update for the first steps: Train/loss is NaN in such a chunk
    # A hyperparameter added in one edit (issue 31): no YAML names it (the schema is this class).
    momentum: float = bounded(0.9, low=0, high=1, high_open=True, why="1 never forgets")


@struct.dataclass
class FakeState:
    params: jax.Array  # [width]
    buffer: jax.Array  # [total_env_steps]
    key: jax.Array  # raw uint32 [2]
    tick: jax.Array
    steps: jax.Array
    n_evals: jax.Array
    n_terminations: jax.Array
    typed_key: jax.Array  # a typed PRNG key (stored as key data)
    empty: jax.Array  # [0, 3]: zero-size, like some MJX state leaves (not storable by orbax)


@dataclasses.dataclass(frozen=True)
class FakeEnv:
    spec: EnvSpec


def make_fake_env(env_id: str, action_repeat: int, episode_length: int | None) -> FakeEnv:
    limit = 20 if episode_length is None else episode_length
    if limit % action_repeat:
        raise ValueError(f"episode length {limit} is not divisible by action_repeat")
    return FakeEnv(
        EnvSpec(
            env_id=env_id,
            backend="probe",
            obs_size=1,
            action_size=1,
            discrete=env_id == "fake_discrete",
            episode_length=limit // action_repeat,
            action_repeat=action_repeat,
        )
    )


@dataclasses.dataclass(frozen=True)
class FakeAgent:
    cfg: FakeConfig
    env: FakeEnv
    total_env_steps: int

    @property
    def T(self) -> int:
        return self.env.spec.episode_length

    def ticks_for(self, env_steps: int) -> int:
        return env_steps + env_steps // self.T

    def memory_bytes(self) -> dict[str, int]:
        return {"replay": 4 * self.total_env_steps, "train_state": 4 * self.cfg.width}

    def init(self, key: jax.Array) -> FakeState:
        if self.cfg.init_sleep_s:
            time.sleep(self.cfg.init_sleep_s)
        k_param, key = jax.random.split(key)
        zero = jnp.zeros((), jnp.int32)
        return FakeState(
            params=jax.random.normal(k_param, (self.cfg.width,)),
            buffer=jnp.zeros((self.total_env_steps,), jnp.float32),
            key=key,
            tick=zero,
            steps=zero,
            n_evals=zero,
            n_terminations=zero,
            typed_key=jax.random.wrap_key_data(key),
            empty=jnp.zeros((0, 3), jnp.float32),
        )

    def check(self, metrics: dict[str, Any]) -> None:
        if int(np.max(metrics["n_terminations"])):
            raise ValueError("the environment terminated an episode (fake)")

    def migrate(self, state: FakeState, saved_env_steps: int) -> FakeState:
        grow = self.total_env_steps - state.buffer.shape[0]
        if grow < 0:
            raise ValueError("the fake agent cannot shrink its buffer")
        return state.replace(buffer=jnp.pad(state.buffer, (0, grow)))

    def train(self, state: FakeState, ticks: jax.Array) -> tuple[FakeState, dict]:
        if self.cfg.trace_sleep_s:
            time.sleep(self.cfg.trace_sleep_s)
        if self.cfg.sleep_s:
            jax.debug.callback(lambda: time.sleep(self.cfg.sleep_s))
        if self.cfg.hold_file:
            jax.debug.callback(
                functools.partial(_hold, self.cfg.hold_file, self.cfg.hold_at), ticks[0]
            )

        def tick_fn(state: FakeState, i: jax.Array):
            noise = jax.random.normal(jax.random.fold_in(state.key, i), (self.cfg.width,))
            params = state.params * (1 - self.cfg.lr) + self.cfg.lr * (noise + jnp.sin(i))
            params = jnp.where(i == self.cfg.nan_at, jnp.nan, params)
            stepping = i % (self.T + 1) != self.T
            slot = state.steps % self.total_env_steps
            buffer = jnp.where(stepping, state.buffer.at[slot].set(jnp.mean(params)), state.buffer)
            if self.cfg.nan_state_at >= 0:  # a NaN no metric sees (the state guard's case)
                buffer = jnp.where(i == self.cfg.nan_state_at, buffer.at[0].set(jnp.nan), buffer)
            state = state.replace(
                params=params,
                buffer=buffer,
                tick=i + 1,
                steps=state.steps + stepping.astype(jnp.int32),
                n_terminations=state.n_terminations + (i == self.cfg.terminate_at),
                typed_key=jax.random.fold_in(state.typed_key, i),
            )
            return state, jnp.mean(params)

        updates_before = self.counters(state)["Train/n_updates"]
        state, means = jax.lax.scan(tick_fn, state, ticks)
        ran = self.counters(state)["Train/n_updates"] > updates_before
        metrics = {
            **self.counters(state),
            "Train/episodic mean reward": jnp.mean(means),
            "Train/last": means[-1],
            "Train/loss": jnp.where(ran, jnp.mean(state.params**2), jnp.nan),
            "n_terminations": state.n_terminations,
        }
        return state, metrics

    def counters(self, state: FakeState) -> dict[str, jax.Array]:
        return {
            "timestep": state.steps,
            "env_frames": state.steps * self.env.spec.action_repeat,
            "Train/n_updates": jnp.maximum(state.steps - self.cfg.idle_steps, 0),
        }

    def evaluate(self, state: FakeState, key: jax.Array) -> tuple[FakeState, dict]:
        key = jax.random.fold_in(key, state.n_evals)
        returns = jax.random.normal(key, (self.cfg.eval_episodes,)) + jnp.sum(state.params)
        metrics = {"Eval/episodic mean reward": jnp.mean(returns), "Eval/episode returns": returns}
        return state.replace(n_evals=state.n_evals + 1), metrics


FAKE_ENTRY = AgentEntry(
    name="fake",
    config_cls=FakeConfig,
    model_sizes={"fake_1": 1},
    factory="launcher_fakes:FakeAgent",
    requirements=EnvRequirements(continuous_actions=True),
    tables=AgentTables(cpu_seconds_per_step={1: 1e-4}),
)
ENTRY_PATH = "launcher_fakes:FAKE_ENTRY"


def fake_config(**sections: Any) -> dict[str, Any]:
    """A composed-config mapping for the fake agent; ``sections`` update the defaults
    section by section (``protocol={"n_timesteps": 40}``)."""
    cfg: dict[str, Any] = {
        "agent": {"name": "fake", "entry": ENTRY_PATH, "width": 4, "lr": 0.1},
        "model_size": {"agent": "fake", "size": 1},
        "env": {"id": "probe_constant_reward", "action_repeat": 1, "episode_length": 10},
        "protocol": {
            "name": "test",
            "seeds": [0, 1],
            "n_timesteps": 60,
            "log_frequency": 10,
            "eval_frequency": 20,
            "eval_episodes": 2,
            "eval_at_start": True,
            "checkpoint_frequency": 20,
            "keep_checkpoints": 2,
            "shard_seeds": True,
        },
        "logger": {"mode": "disabled", "progress": False},
        "callbacks": {"pretrain": [], "post_update": [], "eval_metrics": []},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


def state_arrays(state: Any) -> dict[str, Any]:
    """Flat ``{path: numpy array}`` of a state (for bit-identity comparisons)."""
    import numpy as np

    from launcher.store.checkpoint import to_raw

    flat, _ = jax.tree_util.tree_flatten_with_path(to_raw(state))
    return {jax.tree_util.keystr(p): np.asarray(x) for p, x in flat}


def tree_digest(root: Any) -> dict[str, str]:
    """``{relative path: sha256 of its bytes}`` of every file under ``root`` (directories
    as ``"dir"``, symbolic links as ``"-> target"``): a refused or no-op launch must leave
    it unchanged. Links are not followed: W&B links each run's ``debug-core.log`` to its
    service's log under ``~/.cache/wandb``, which any W&B process may append to."""
    import hashlib
    import os
    from pathlib import Path

    root = Path(root)
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = f"-> {os.readlink(path)}"
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


# ---------------------------------------------------------------- shared by the tests
# The fake agent through the real CLI, plugged in by YAML only (fake_conf/agent/fake.yaml;
# tests/launcher is on sys.path in the test processes, PYTHONPATH in subprocesses).
FAKE_CONF = __import__("pathlib").Path(__file__).parent / "fake_conf"
FAKE_CLI = ["agent=fake", f"hydra.searchpath=[pkg://sweeps,file://{FAKE_CONF}]"]
# Hydra leaves logging alone (its handlers would outlive pytest's captured streams).
QUIET_HYDRA = ["hydra/job_logging=none", "hydra/hydra_logging=none"]


def launch(run_dir: Any, plot: bool = False, **sections: Any) -> Any:
    """One in-process launch of the fake agent (``sections`` update :func:`fake_config`)."""
    from launcher.config.validate import resolve
    from launcher.loop.run import run

    return run(resolve(fake_config(**sections)), run_dir, make_env=make_fake_env, plot=plot)


def one_error_line(err: str) -> str:
    """``err`` after asserting it is exactly one ``error: ...`` line."""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


def checkpoint_steps(run_dir: Any) -> list[int]:
    """Env steps of the complete checkpoints (orbax's temporary directories excluded)."""
    from pathlib import Path

    root = Path(run_dir) / "checkpoints"
    return sorted(int(p.name) for p in root.iterdir() if p.name.isdigit()) if root.exists() else []


def kinds(run_dir: Any, seed: int, kind: str) -> list[int]:
    """The chunk numbers of a seed's metrics rows of one kind (``train`` / ``eval``)."""
    from pathlib import Path

    from launcher.store.rundir import read_metrics

    path = Path(run_dir) / "metrics" / f"seed_{seed}.jsonl"
    return [r["chunk"] for r in read_metrics(path) if r["kind"] == kind] if path.exists() else []


def benchmark_script(name: str) -> Any:
    """``benchmarks/<name>.py`` as a module (benchmarks/ holds scripts, not a package), with
    benchmarks/ on ``sys.path`` as it is for a script, so its ``_helper`` modules import."""
    folder = pathlib.Path(__file__).parents[2] / "benchmarks"
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    path = folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module
