"""A built task set (``envs.make("mt3_cpu")``): its padded spec and its members, and the
registry's builder for the ``task_set`` backend (:mod:`envs.task_sets` holds the sets
themselves and their static facts).

A task set has no ``reset`` / ``step``: a multi-task agent acts in its members
(:meth:`TaskSetEnv.member_env`), each at its own action repeat and time limit.
"""

from __future__ import annotations

import dataclasses

from envs.core import EnvSpec
from envs.facts import facts
from envs.registry import entry_of, make
from envs.task_sets import NAME, TASK_SETS, static_facts


@dataclasses.dataclass(frozen=True)
class TaskSetEnv:
    """A built task set: its padded :class:`EnvSpec` and its members (module docstring).
    It has no ``reset`` / ``step``: an agent acts in :meth:`member_env`."""

    spec: EnvSpec
    members: tuple[tuple[str, int], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.members)

    def member_env(self, i: int):
        """The built env of member ``i`` (``envs.make``, cached)."""
        name, repeat = self.members[i]
        return make(name, action_repeat=repeat)

    def member_facts(self, i: int):
        """The static facts of member ``i`` (builds nothing)."""
        name, repeat = self.members[i]
        return facts(name, repeat)


def build(env_id: str, action_repeat: int = 1, episode_length: int | None = None) -> TaskSetEnv:
    """The :class:`TaskSetEnv` of task set ``env_id`` (``action_repeat`` 1 and
    ``episode_length`` None only, checked by the registry)."""
    del action_repeat
    if episode_length is not None:
        raise ValueError(
            f"{env_id} is a task set: each member keeps its own time limit; leave "
            "env.episode_length at null"
        )
    row = static_facts(TASK_SETS[env_id], lambda i: entry_of(i).facts)
    spec = EnvSpec(
        env_id=env_id,
        backend=NAME,
        obs_size=row.obs_size,
        action_size=row.action_size,
        discrete=row.discrete,
        episode_length=row.default_episode_length,
        action_repeat=1,
        can_terminate=row.can_terminate,
    )
    return TaskSetEnv(spec, TASK_SETS[env_id])
