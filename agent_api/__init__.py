"""The agent protocol: what the launcher may call, and how an agent plugs in.

An agent is a package plus one YAML file. ``conf/agent/<name>.yaml`` names the agent's
:class:`AgentEntry` by import path (``entry: agents.tdmpc2.entry:ENTRY``); the launcher
imports that object and nothing else of the package, and talks to the agent only
through the :class:`Agent` protocol below. Adding an agent never edits ``launcher/``.

Data flow (docs/design.md §2)::

    conf/agent/<name>.yaml -> AgentEntry.config_cls (frozen dataclass, model-size preset)
    AgentEntry.make(config, env, total_env_steps) -> Agent (pure functions of one seed)
    launcher: jit(vmap(agent.train, in_axes=(0, None))) over seeds, chunk by chunk

Every method of :class:`Agent` but :meth:`Agent.check` and :meth:`Agent.ticks_for` is a
pure JAX function of ONE seed (the launcher vmaps the seed axis); ``ticks`` are absolute
tick indices, unbatched, so a resumed run continues the same computation exactly.

Three optional methods, looked up with ``getattr`` (an agent without them is unaffected):

* ``shared_inputs() -> pytree``: arrays every seed reads and none owns (an offline agent's
  dataset). The launcher places them on the devices once and passes them as a third,
  unbatched argument: ``train(state, ticks, shared)`` under ``vmap(in_axes=(0, None,
  None))``, an argument of the compiled program (never closed over, never copied per seed).
* ``export_dataset(states, seeds, source) -> dataset``: the agent's replay as an offline
  dataset with a ``save(path) -> content hash`` method (``python -m launcher.export``);
  ``states`` is seed-batched on the host.
* ``eval_policy(state) -> (policy, carry)``: the policy ``evaluate`` acts with, for ONE
  env of one seed: ``policy(carry, obs [obs_size], is_first [] bool, key) -> (action
  [action_size] in agent units, carry)``, pure, and its initial carry
  (``envs.row_collector.single_env_policy`` makes one of a row-collector policy).
  ``python -m launcher.evaluate RUN --video`` jits one act + env step of it and renders
  the episode step by step.

An agent's config class (``AgentEntry.config_cls``) carries its own rules: value ranges
on the fields (:func:`agent_api.rules.bounded`), cross-field rules in ``__post_init__``
(ValueError naming the keys), and optionally ``check_run(n_timesteps)``, the rules that
need the run's length (``protocol.n_timesteps``): a ValueError whose message names the
keys and the fix.
The launcher turns each into one ``error:`` line before anything is created. A config whose
fields left at ``None`` are filled in at resolution (DreamerV3's widths from ``model_size``)
may say what they become with ``derived() -> {field: value}``; ``--cfg job`` prints it.

This package imports neither JAX nor any agent: resolving a config stays cheap. It lives
outside ``agents/`` so that the launcher imports nothing under ``agents/`` (tested).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from agent_api.rules import Bound, bounded, check_bounds, check_lockstep_envs, field_bounds
from agent_api.tables import AcceleratorCost, AgentTables, CpuCost, PaperReference

__all__ = [
    "AcceleratorCost",
    "Agent",
    "AgentEntry",
    "AgentTables",
    "Bound",
    "CpuCost",
    "EnvRequirements",
    "PaperReference",
    "bounded",
    "check_bounds",
    "check_lockstep_envs",
    "field_bounds",
    "load",
]

State = Any  # a pytree of arrays (one seed)
Metrics = Mapping[str, Any]  # name -> array (scalars or per-episode vectors)


@runtime_checkable
class Agent(Protocol):
    """One agent on one env for a run of ``total_env_steps`` agent steps.

    The launcher calls exactly these; see each method for shapes and purity.
    """

    def init(self, key: Any) -> State:
        """The initial state of one seed from its PRNG key (raw uint32 ``[2]``)."""
        ...

    def train(self, state: State, ticks: Any) -> tuple[State, Metrics]:
        """Run the absolute ticks ``ticks`` (int32 ``[C]``, consecutive from the state's
        own tick; unbatched under the seed vmap). Metrics hold at least ``timestep``
        (agent env steps, docs/design.md §3), ``env_frames``, ``Train/n_updates`` and
        ``Train/episodic mean reward`` (NaN when no episode ended in the chunk). Other
        ``Train/`` metrics are means over the chunk's updates (``agents.common.loop``,
        docs/design.md §4.4) and may be NaN for a seed whose chunk ran none
        (``Train/n_updates`` unchanged); anywhere else a NaN stops the run."""
        ...

    def evaluate(self, state: State, key: Any) -> tuple[State, Metrics]:
        """Fresh episodes with the agent's eval policy; metrics hold
        ``Eval/episodic mean reward`` and ``Eval/episode returns`` (``[episodes]``)."""
        ...

    def counters(self, state: State) -> Metrics:
        """``timestep``, ``env_frames`` and ``Train/n_updates`` of a state."""
        ...

    def ticks_for(self, env_steps: int) -> int:
        """Host: the number of ticks that take ``env_steps`` agent steps."""
        ...

    def check(self, metrics: Mapping[str, Any]) -> None:
        """Host, after every train chunk, on the chunk's per-seed metrics (numpy, leading
        seed axis). Raises ValueError with a message for data the agent cannot train on
        (e.g. terminations for an agent that assumes fixed-length episodes)."""
        ...

    def migrate(self, state: State, saved_env_steps: int) -> State:
        """One seed's ``state``, saved by this agent built for a run of
        ``saved_env_steps`` agent steps, carried into this agent's shapes (a resumed run
        whose length changed: the replay is sized by the run's length, docs/design.md §9.4).
        Pure (the launcher vmaps and jits it); raises ValueError when it cannot be done
        exactly."""
        ...


@dataclasses.dataclass(frozen=True)
class EnvRequirements:
    """Which envs an agent can run, judged from the env's static facts (``envs.facts``).

    Attributes:
      continuous_actions: refuses discrete-action envs.
      fixed_length: refuses envs whose episodes can terminate before the time limit.
      task_set: runs a task set (``envs.task_sets``: the env of a multi-task agent) and
        refuses single envs; False (every single-task agent) refuses task sets.
      vector_observations: refuses envs observed as images (``obs_mode`` ``image``,
        issue 47).
    """

    continuous_actions: bool = False
    fixed_length: bool = False
    task_set: bool = False
    vector_observations: bool = False

    def problems(self, facts: Any) -> list[str]:
        """What about an env (anything with ``discrete`` and ``can_terminate``) the agent
        cannot run, as short phrases; empty when it can run it."""
        out = []
        is_set = getattr(facts, "backend", None) == "task_set"
        if is_set and not self.task_set:
            out.append("is a task set (the env of a multi-task agent)")
        if self.task_set and not is_set:
            out.append("is a single env, not a task set")
        if self.continuous_actions and facts.discrete:
            out.append("has discrete actions")
        if self.fixed_length and facts.can_terminate:
            out.append("can terminate")
        if self.vector_observations and getattr(facts, "obs_mode", "vector") != "vector":
            out.append(f"is observed as {facts.obs_mode}s")
        return out

    def needs(self) -> str:
        """The requirements as a phrase (``continuous actions and fixed-length episodes``)."""
        words = [
            word
            for word, flag in (
                ("continuous actions", self.continuous_actions),
                ("fixed-length episodes", self.fixed_length),
                ("a task set", self.task_set),
                ("vector observations", self.vector_observations),
            )
            if flag
        ]
        return " and ".join(words) or "nothing"

    def check(self, facts: Any, agent: str) -> None:
        """Raise ValueError naming the env, what it has and what ``agent`` needs."""
        problems = self.problems(facts)
        if problems:
            raise ValueError(
                f"env {facts.env_id!r} {' and '.join(problems)}, and {agent} needs {self.needs()}"
            )


@dataclasses.dataclass(frozen=True)
class AgentEntry:
    """How the launcher builds and checks one agent (exported by the agent's package).

    Attributes:
      name: the agent's name (``conf/agent/<name>.yaml``'s ``name``).
      config_cls: the agent's frozen config dataclass; its fields carry their bounds
        (:func:`agent_api.rules.bounded`) and the class its cross-field rules
        (``__post_init__``, optional ``check_run``; module docstring).
      model_sizes: ``model_size`` option name -> preset value given to the config's
        ``model_size`` field (``tdmpc2_5`` -> 5).
      factory: ``"module:attr"`` of ``(config, env, total_env_steps) -> Agent``.
      requirements: the envs it can run (checked by the launcher from the env's facts).
      launcher_fields: config fields set by the launcher, never from ``agent.*``
        (``model_size``, ``eval_episodes``) plus internal flags.
      model_size_owner: the agent whose ``model_size`` presets this one takes (their
        ``agent:`` key); None = its own name (a variant such as ``tdmpc2_multitask``
        reuses ``tdmpc2``'s).
      tables: what is known of the agent beside how to run it (:class:`AgentTables`: its
        published curves, its CPU and accelerator cost figures), an optional part; None:
        nothing (no paper to compare with, no CPU or accelerator estimate).
    """

    name: str
    config_cls: type
    model_sizes: Mapping[str, Any]
    factory: str
    requirements: EnvRequirements = EnvRequirements()
    launcher_fields: tuple[str, ...] = ("model_size", "eval_episodes")
    model_size_owner: str | None = None
    tables: AgentTables | None = None

    def make(self, config: Any, env: Any, total_env_steps: int) -> Agent:
        """Build the agent (imports its module now)."""
        return load(self.factory)(config, env, total_env_steps)


def load(path: str) -> Callable[..., Any] | Any:
    """The object at ``"package.module:attr"`` (ImportError / AttributeError if absent)."""
    module, sep, attr = path.partition(":")
    if not sep or not module or not attr:
        raise ImportError(f"{path!r} is not an import path; write 'package.module:attr'")
    return getattr(importlib.import_module(module), attr)
