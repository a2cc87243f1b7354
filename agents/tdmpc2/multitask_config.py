"""The offline multi-task run's config: TD-MPC2's plus the dataset's (docs/design.md §7.6).

No JAX here (the launcher's entry imports it to resolve a config)."""

from __future__ import annotations

import dataclasses

from agent_api.rules import added_later, bounded
from agents.tdmpc2.config import TDMPC2Config

TASK_DIM = 96  # the paper's task embedding size; the code's 64 for mt30 at 5/19/48M (T46)


@dataclasses.dataclass(frozen=True)
class MultiTaskConfig(TDMPC2Config):
    """TD-MPC2's config plus the offline run's.

    Attributes:
        batch_size: 1024, the reference README's offline batch.
        dataset: path of a dataset directory (:mod:`agents.tdmpc2.dataset`).
        dataset_sha256: the dataset's content hash; None = whatever the path holds (the
            resolved config in run.json records the hash that was loaded).
        task_dim: the task embedding width.
        tasks: the task set's members to train and evaluate, in this order (their task
            ids); empty = every member in the set's order. A subset is a model of its own
            (padded to the subset's dims): e.g. one task alone, a single-task offline
            baseline through the same trainer.
        q_scale_per_task: a what-if, off by default (deviation T49): one RunningScale per
            task in the policy loss instead of the reference's one shared scale.
    """

    batch_size: int = bounded(1024, low=1)
    dataset: str = ""
    dataset_sha256: str | None = None
    task_dim: int = bounded(TASK_DIM, low=1)
    tasks: tuple[str, ...] = ()
    q_scale_per_task: bool = added_later(False, since="issue 32, deviation T49")
