"""Task sets: named lists of registered envs, the "env" of a multi-task agent (docs/design.md §5.3).

    ts = envs.make("mt3_cpu")              # a TaskSetEnv (envs.task_set_env): no reset / step
    ts.members                             # (("pendulum", 1), ("cartpole_balance", 2), ...)
    ts.member_env(1)                       # envs.make("cartpole_balance", action_repeat=2)

A task set is registered like an env (backend ``"task_set"``), so the launcher's ``env=``
names it, :func:`envs.facts` describes it without building anything and agents decide from
its facts whether they can run it: ``backend == "task_set"``; ``obs_size`` / ``action_size``
are the padded ``O_max`` / ``A_max`` of the members, ``episode_length`` the longest member's
T. Each member keeps its own action repeat and time limit, so the set itself takes only
``action_repeat=1`` and ``episode_length=None``. Task ids are the members' order.

* ``mt3_cpu``: three tasks of different dims, backends and T (the first validation, issue
  11; kept as the set that mixes a gymnax member with Playground ones): gymnax
  pendulum (obs 3, act 1, T 200), playground cartpole_balance (obs 5, act 1) and
  reacher_easy (obs 6, act 2), both at repeat 2 (T 500).
* ``mt3_dmc``: the multi-task validation's three Playground tasks of one reward scale (issue
  32; ``benchmarks/multitask_validation.py``): cartpole_balance (obs 5, act 1), reacher_easy
  (obs 6, act 2) and finger_spin (obs 9, act 2), all at repeat 2 (T 500), each paying a reward
  in [0, 1] at every step.
* ``mt30_dmc19``: the 19 original DMC tasks of TD-MPC2's mt30 in its order (5f6fade
  ``tdmpc2/common/__init__.py`` TASK_SET["mt30"][:19]) on Playground at repeat 2; mt30's
  other 11 are custom dm_control tasks that Playground does not have.
* ``probe_tasks``: the two probes (obs 1, act 1, T 20): seconds-long multi-task smoke runs.

This module is data and arithmetic (the registry reads it); the built task set,
:class:`envs.task_set_env.TaskSetEnv`, and its builder live in :mod:`envs.task_set_env`,
above the registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from envs.core import Backend, StaticFacts

NAME = "task_set"

MT30_DMC19 = (
    "walker_stand",
    "walker_walk",
    "walker_run",
    "cheetah_run",
    "reacher_easy",
    "reacher_hard",
    "acrobot_swingup",
    "pendulum_swingup",
    "cartpole_balance",
    "cartpole_balance_sparse",
    "cartpole_swingup",
    "cartpole_swingup_sparse",
    "cup_catch",
    "finger_spin",
    "finger_turn_easy",
    "finger_turn_hard",
    "fish_swim",
    "hopper_stand",
    "hopper_hop",
)

# name -> ((member env id, its action repeat), ...)
TASK_SETS: dict[str, tuple[tuple[str, int], ...]] = {
    "mt3_cpu": (("pendulum", 1), ("cartpole_balance", 2), ("reacher_easy", 2)),
    "mt3_dmc": (("cartpole_balance", 2), ("reacher_easy", 2), ("finger_spin", 2)),
    "mt30_dmc19": tuple((name, 2) for name in MT30_DMC19),
    "probe_tasks": (("probe_constant_reward", 1), ("probe_reward_is_action", 1)),
}


def static_facts(
    members: tuple[tuple[str, int], ...], table: Callable[[str], StaticFacts]
) -> StaticFacts:
    """A task set's facts from its members' static facts (``table(env_id)``; builds
    nothing). ``default_episode_length`` is the longest member's T in agent steps."""
    rows = [(table(env_id), repeat) for env_id, repeat in members]
    return StaticFacts(
        obs_size=max(r.obs_size for r, _ in rows),
        action_size=max(r.action_size for r, _ in rows),
        discrete=any(r.discrete for r, _ in rows),
        can_terminate=any(r.can_terminate for r, _ in rows),
        default_episode_length=max(r.default_episode_length // k for r, k in rows),
    )


def _tasks(table: Callable[[str], StaticFacts]) -> Mapping[str, StaticFacts]:
    """Every set's facts from its members' (registered before the sets)."""
    return {name: static_facts(members, table) for name, members in TASK_SETS.items()}


def _build(env_id: str, action_repeat: int, episode_length: int | None) -> Any:
    # envs.task_set_env sits above the registry (it builds the members): named, imported
    # when a set is built, so this module stays below it.
    build = importlib.import_module("envs.task_set_env").build
    return build(env_id, action_repeat, episode_length)


# Members keep their own repeats, so the set itself takes only 1; nothing to render.
BACKEND = Backend(name=NAME, tasks=_tasks, build=_build, action_repeats=(1,))
