"""The CPU cost model (agents/dreamerv3/cost.py, JAX-free): its update count against the
schedule the agent runs (agents/dreamerv3/schedule.py) and its FLOP count against the dot
FLOPs of the traced train step (docs/PERFORMANCE.md, DreamerV3 step table)."""

import pytest

from agents.dreamerv3.config import DreamerV3Config
from agents.dreamerv3.cost import gate_transition, train_flops, updates_for
from agents.dreamerv3.schedule import Schedule


@pytest.mark.parametrize(
    ("n_envs", "batch_size", "batch_length", "train_ratio", "rows"),
    [
        (16, 16, 64, 512.0, 24_000),
        (8, 16, 32, 64.0, 6_000),
        (2, 2, 4, 4.0, 40),
        (8, 16, 32, 64.0, 300),
    ],
)
def test_updates_are_the_schedules(n_envs, batch_size, batch_length, train_ratio, rows):
    cfg = DreamerV3Config(
        n_envs=n_envs, batch_size=batch_size, batch_length=batch_length, train_ratio=train_ratio
    )
    sched = Schedule(n_envs, batch_size, batch_length, train_ratio)
    assert gate_transition(n_envs, batch_size, batch_length) == sched.gate[1]
    ticks = -(-rows // n_envs)
    assert updates_for(cfg, rows) == sched.updates_through(ticks - 1)


def test_flops_are_the_traced_steps():
    """benchmarks/dreamerv3_speed.py's dot FLOPs of the live jaxpr, walker dims (obs 24, 6
    actions), B 16 x T 64: 29.1 GFLOP at 1m, 429.0 at 12m."""
    for size, traced in (("1m", 29.1e9), ("12m", 429.0e9)):
        assert train_flops(DreamerV3Config(model_size=size), 24, 6, False) == pytest.approx(
            traced, rel=0.05
        )
