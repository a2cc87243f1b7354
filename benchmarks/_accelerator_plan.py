"""The plan of ``benchmarks/accelerator_check.py``: what its sections build (the paper-size
agents, or ``--tiny``'s CPU-sized ones), the report's row and the published figures each
quantity is compared against. Split out of accelerator_check.py (by job, with
``_accelerator_sections.py``); imported by it and by ``_accelerator_sections``.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import yaml

from agent_api import AcceleratorCost
from agents.dreamerv3.config import DreamerV3Config

ROOT = pathlib.Path(__file__).resolve().parent.parent
NO_FIGURE = "no published figure"
# Other implementations' published figures (docs/VALIDATION.md §4.2), by agent and preset.
# The agents' entries hold this project's own measurement (the dry run's estimate), so the
# check compares against these, not against its own last run. None is known for DreamerV3.
PUBLISHED: dict[str, dict[Any, AcceleratorCost]] = {
    "tdmpc2": {
        5: AcceleratorCost(
            seconds_per_step=0.0108,
            device="RTX 3090 (torch.compile)",
            source="reference author's figure, ~1.5 h per 1M env frames at action repeat 2 "
            "(nicklashansen/tdmpc2 issue #83)",
        )
    },
    "dreamerv3": {},
}


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the sections build: the paper-size agents, or ``--tiny``'s CPU-sized ones."""

    tiny: bool
    dv3_cfg: DreamerV3Config
    dv3_label: str
    dv3_seeds: tuple[int, ...]
    dv3_chunk_ticks: int
    dv3_image: tuple[int, int, int]  # the dv3_image_step section's observation (H, W, C)
    td_size: int
    td_fields: dict  # TDMPC2Config overrides (tiny: the smoke config)
    td_label: str
    td_seed_steps: int
    td_plan_envs: int
    td_chunk_ticks: int
    env: str
    env_kwargs: dict
    reps: int
    chunk_reps: int


def smoke_agent(agent: str) -> dict:
    """The agent keys of ``conf/agent_protocol/<agent>_smoke.yaml`` (the CI smoke config)."""
    path = ROOT / "conf" / "agent_protocol" / f"{agent}_smoke.yaml"
    return dict(yaml.safe_load(path.read_text())["agent"])


def make_plan(tiny: bool, reps: int | None, chunk_reps: int | None) -> Plan:
    if tiny:
        dv3_fields = smoke_agent("dreamerv3")
        return Plan(
            tiny=True,
            dv3_cfg=DreamerV3Config(model_size="1m", **dv3_fields),
            dv3_label="tiny (dreamerv3_smoke)",
            dv3_seeds=(1, 2),
            dv3_chunk_ticks=2,
            dv3_image=(32, 32, 3),  # four CNN stages ending at 4 x 4 (D43), 16 channels
            td_size=1,
            td_fields=smoke_agent("tdmpc2"),
            td_label="tiny (tdmpc2_smoke)",
            td_seed_steps=smoke_agent("tdmpc2")["seed_steps"],
            td_plan_envs=2,
            td_chunk_ticks=2,
            env="pendulum",
            env_kwargs={"episode_length": 10},
            reps=reps or 2,
            chunk_reps=chunk_reps or 1,
        )
    return Plan(
        tiny=False,
        dv3_cfg=DreamerV3Config(model_size="12m"),
        dv3_label="12m",
        dv3_seeds=(1, 4, 16),
        dv3_chunk_ticks=8,
        dv3_image=(64, 64, 3),  # DMC vision's and Crafter's renders
        td_size=5,
        td_fields={},
        td_label="size 5",
        td_seed_steps=1,
        td_plan_envs=16,
        td_chunk_ticks=50,
        env="walker_walk",
        env_kwargs={"action_repeat": 2},
        reps=reps or 10,
        chunk_reps=chunk_reps or 3,
    )


# ------------------------------------------------------------------------------ helpers
def row(quantity: str, value: float | None, unit: str, published: str = NO_FIGURE) -> dict:
    return {"quantity": quantity, "value": value, "unit": unit, "published": published}


def tdmpc2_published(size: int, tiny: bool) -> tuple[Any, str]:
    """The TD-MPC2 accelerator figure for this preset (seconds per agent step), and its text."""
    cost = None if tiny else PUBLISHED["tdmpc2"].get(size)
    if cost is None:
        return None, NO_FIGURE
    return cost, f"{cost.seconds_per_step} s per agent step on {cost.device}: {cost.source}"


def dv3_published(label: str, tiny: bool) -> str:
    cost = None if tiny else PUBLISHED["dreamerv3"].get(label)
    if cost is None:
        return NO_FIGURE
    return f"{cost.seconds_per_step} s per agent step on {cost.device}: {cost.source}"
