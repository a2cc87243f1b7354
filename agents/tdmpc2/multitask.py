"""TD-MPC2 multi-task mechanisms (docs/design.md §7.6), reached through task-context hooks.

The single-task code (:mod:`agents.tdmpc2.world_model`, :mod:`~agents.tdmpc2.update`,
:mod:`~agents.tdmpc2.planner`) takes an optional ``task`` argument, a :class:`TaskContext`;
``None`` (the default) is the single-task computation, unchanged. This module holds what the
hooks call, and imports the single-task code (never the other way round; the context
type the hooks take lives in :mod:`agents.tdmpc2.task_context`, which both import).
Reference: 5f6fade ``tdmpc2/common/world_model.py`` (``wm.py`` below), ``tdmpc2/tdmpc2.py``,
``envs/wrappers/multitask.py``; line numbers are 5f6fade's.

* :class:`TaskSet`: the static task set (names, obs dims, action dims, episode lengths) and
  its float32 discount table from the reference heuristic, one discount per task
  (``tdmpc2.py:32-34,36-49``), the prefix action masks (``wm.py:21-23``) and the padded
  sizes ``O_max`` / ``A_max`` (``envs/wrappers/multitask.py:17-27``).
* :class:`TaskContext` (:mod:`agents.tdmpc2.task_context`, re-exported here): the task
  ids of a batch ``[B]`` (or of one env ``[]``) with their action masks ``[..., A_max]``
  and discounts. It embeds inputs (``wm.py:78-91``: the row ``task_emb[id]`` appended to
  the encoder input ``[obs, e]``, to pi's ``[z, e]`` and to the dynamics / reward / Q
  input before the action, ``[z, e, a]``), masks pi's mean, log-std
  and noise and the planner's candidates, mean and std (``wm.py:136-140``,
  ``tdmpc2.py:145-146,160-162``), scales the policy log-prob by the task's number of valid
  action dims (``wm.py:140,144``) and renormalises the embedding rows it looks up.
* The embedding: ``params["task_emb"] [num_tasks, task_dim]``, U(-0.02, 0.02)
  (``init.py:10-11``), trained by the world-model Adam at the full learning rate inside its
  clip (``tdmpc2.py:21-27``); the target Q has none (it reads the online table). The
  reference's ``nn.Embedding(max_norm=1)`` renormalises, *in place*, every row it looks up
  whose norm exceeds 1 (``w *= 1 / (|w| + 1e-7)``, torch's ``embedding_renorm_``). We do
  that once at each of the two look-ups where it can change the table (``wm.py:20,78-91``):
  ``encode(obs[1:])`` before the TD target, and ``pi(zs)`` after the world-model Adam step,
  before the policy loss; :func:`agents.tdmpc2.update.update` writes both results back into
  the state. Between them the rows are already within the ball, so the reference's other
  look-ups change nothing (up to one float32 rounding step). The planner renormalises the
  row it uses without writing it back (deviation T45). The policy loss reads the table
  stop-gradiented (5f6fade ``track_q_grad(False)``, ``wm.py:58-68``).
* ``task_dim`` 96 everywhere (:data:`TASK_DIM`; the paper's). The reference code uses 64 for
  mt30 at model sizes 5 / 19 / 48 (``common/parser.py:52-57``, an accident tied to those
  checkpoints): :func:`reference_task_dim` gives the code's value, to pass explicitly
  (deviation T46).
* Observations are zero-padded at the end to ``O_max`` (:func:`pad_obs`), actions to
  ``A_max`` (:func:`pad_action`); the iteration rule ``+2 if A >= 20`` uses ``A_max``
  (``tdmpc2.py:31``; :meth:`TaskSet.resolve`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.multitask_config import TASK_DIM
from agents.tdmpc2.task_context import RENORM_EPS, TaskContext, renorm_rows
from agents.tdmpc2.world_model import WorldModel

__all__ = [
    "TASK_DIM",
    "TaskContext",
    "TaskSet",
    "heuristic_discount",
    "multitask_world_model",
    "pad_action",
    "pad_obs",
    "reference_task_dim",
    "RENORM_EPS",
    "renorm_rows",
]


def heuristic_discount(
    episode_length: int, denom: float = 5.0, lo: float = 0.95, hi: float = 0.995
) -> float:
    """The reference's discount heuristic (``tdmpc2.py:36-49``), a Python float:
    ``clip((T/denom - 1) / (T/denom), lo, hi)`` for an episode of ``T`` agent steps."""
    frac = episode_length / denom
    return min(max((frac - 1) / frac, lo), hi)


def reference_task_dim(task_set: str, model_size: int) -> int:
    """The reference code's ``task_dim`` (``common/parser.py:52-57``): 96 for mt80 or model
    sizes 1 / 317, else 64 (mt30 at 5 / 19 / 48). Our default is :data:`TASK_DIM` (T46)."""
    return 96 if task_set == "mt80" or model_size in (1, 317) else 64


# ------------------------------------------------------------------------------ task set
@dataclasses.dataclass(frozen=True)
class TaskSet:
    """A static set of tasks (hashable; usable as a static jit argument).

    Attributes:
        names / obs_dims / action_dims / episode_lengths: one entry per task, in task-id
            order (episode lengths in agent steps).
        discount_denom / discount_min / discount_max: the discount heuristic's parameters
            (reference defaults; :meth:`for_config` takes them from a config).
    """

    names: tuple[str, ...]
    obs_dims: tuple[int, ...]
    action_dims: tuple[int, ...]
    episode_lengths: tuple[int, ...]
    discount_denom: float = 5.0
    discount_min: float = 0.95
    discount_max: float = 0.995

    def __post_init__(self) -> None:
        for f in ("names", "obs_dims", "action_dims", "episode_lengths"):
            object.__setattr__(self, f, tuple(getattr(self, f)))
        n = len(self.names)
        if n == 0:
            raise ValueError("a TaskSet needs at least one task")
        for f in ("obs_dims", "action_dims", "episode_lengths"):
            v = getattr(self, f)
            if len(v) != n:
                raise ValueError(f"{f} has {len(v)} entries for {n} task names")
            if any(int(x) != x or x < 1 for x in v):
                raise ValueError(f"{f} must be positive integers, got {v}")
        if len(set(self.names)) != n:
            raise ValueError(f"task names must be unique, got {self.names}")

    @classmethod
    def for_config(
        cls,
        cfg: TDMPC2Config,
        names: Sequence[str],
        obs_dims: Sequence[int],
        action_dims: Sequence[int],
        episode_lengths: Sequence[int],
    ) -> TaskSet:
        """A task set with ``cfg``'s discount heuristic parameters."""
        return cls(
            tuple(names),
            tuple(obs_dims),
            tuple(action_dims),
            tuple(episode_lengths),
            cfg.discount_denom,
            cfg.discount_min,
            cfg.discount_max,
        )

    @property
    def num_tasks(self) -> int:
        return len(self.names)

    @property
    def obs_max(self) -> int:
        """``O_max``: every observation is zero-padded at the end to this size."""
        return max(self.obs_dims)

    @property
    def action_max(self) -> int:
        """``A_max``: the model's action size; task ``i`` uses the prefix ``[:A_i]``."""
        return max(self.action_dims)

    def index(self, name: str) -> int:
        return self.names.index(name)

    @property
    def discounts(self) -> np.ndarray:
        """float32 ``[num_tasks]``: the heuristic per task, rounded to float32 as the
        reference's ``torch.tensor([...])`` (``tdmpc2.py:32-34``)."""
        return np.asarray(
            [
                heuristic_discount(T, self.discount_denom, self.discount_min, self.discount_max)
                for T in self.episode_lengths
            ],
            np.float32,
        )

    @property
    def action_masks(self) -> np.ndarray:
        """float32 ``[num_tasks, A_max]``: ``mask[i, :A_i] = 1``, else 0 (``wm.py:21-23``)."""
        m = np.zeros((self.num_tasks, self.action_max), np.float32)
        for i, a in enumerate(self.action_dims):
            m[i, :a] = 1.0
        return m

    def resolve(self, cfg: TDMPC2Config) -> TDMPC2Config:
        """``cfg.resolve`` for the padded model: the iteration rule sees ``A_max``
        (``tdmpc2.py:31``) and ``seed_steps`` / ``gamma`` the first task's episode length,
        as the reference's ``cfg.episode_length`` (the multi-task wrapper forwards the
        first env's). ``gamma`` is unused in multi-task mode (the discount table is)."""
        return cfg.resolve(self.episode_lengths[0], self.action_max)

    def context(self, ids: jax.Array) -> TaskContext:
        """The :class:`TaskContext` of task ids ``ids`` (int ``[*S]``, e.g. ``[B]`` or ``[]``)."""
        ids = jnp.asarray(ids, jnp.int32)
        return TaskContext(
            ids=ids,
            action_mask=jnp.asarray(self.action_masks)[ids],
            discount=jnp.asarray(self.discounts)[ids],
        )


def multitask_world_model(
    cfg: TDMPC2Config, tasks: TaskSet, task_dim: int = TASK_DIM, batched: bool | None = None
) -> WorldModel:
    """The padded world model of ``tasks``: obs ``O_max``, actions ``A_max``, a task
    embedding ``[num_tasks, task_dim]`` (``cfg`` is resolved by :meth:`TaskSet.resolve`;
    ``batched``: the Q ensemble's layout, :class:`WorldModel`)."""
    return WorldModel(
        tasks.resolve(cfg),
        tasks.obs_max,
        tasks.action_max,
        task_dim=task_dim,
        num_tasks=tasks.num_tasks,
        batched=batched,
    )


# ------------------------------------------------------------------------------ padding
def pad_obs(obs: Any, obs_max: int) -> Any:
    """``obs [..., O_i] -> [..., O_max]``, zeros appended at the end
    (``envs/wrappers/multitask.py:44-47``). NumPy in, NumPy out; else JAX."""
    return _pad_last(obs, obs_max)


def pad_action(action: Any, action_max: int) -> Any:
    """``action [..., A_i] -> [..., A_max]`` with zeros on the invalid dims (the dataset
    layout, docs/design.md §7.6; the env uses the prefix ``action[:A_i]``)."""
    return _pad_last(action, action_max)


def _pad_last(x: Any, size: int) -> Any:
    xp = np if isinstance(x, np.ndarray) else jnp
    n = x.shape[-1]
    if n > size:
        raise ValueError(f"last dim {n} exceeds the padded size {size}")
    return xp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, size - n)])
