"""The CPU cost model's schedule arithmetic (agents/tdmpc2/cost.py, JAX-free) against the
schedule the agent runs (agents/tdmpc2/schedule.py), and its FLOP count against the
benchmark's (docs/PERFORMANCE.md "FLOPs")."""

import jax.numpy as jnp
import pytest

from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.cost import matmul_flops, schedule_counts
from agents.tdmpc2.schedule import Schedule


@pytest.mark.parametrize(
    ("T", "n_envs", "seed_steps", "steps"),
    [(200, 1, 1000, 6000), (200, 1, 1000, 900), (10, 2, 10, 40), (500, 4, 2500, 12_000)],
)
def test_update_and_decision_counts_are_the_schedules(T, n_envs, seed_steps, steps):
    cfg = TDMPC2Config(model_size=1, n_envs=n_envs, seed_steps=seed_steps)
    sched = Schedule(T, n_envs, seed_steps)
    per_env = -(-steps // n_envs)
    ticks = jnp.arange(per_env + per_env // T)  # TDMPC2.ticks_for
    updates = int(jnp.sum(sched.n_updates(ticks)))
    planned = (~sched.random_actions(ticks)) & sched.is_stepping(ticks)
    assert schedule_counts(cfg, T, steps) == (updates, n_envs * int(jnp.sum(planned)))


def test_flops_are_the_benchmarks_analytic_count():
    """docs/PERFORMANCE.md "FLOPs" (walker dims, the reference planner, batch 256): 8.77 /
    30.67 GFLOP per update, 13.16 / 35.75 per decision at sizes 1 / 5."""
    for size, update, plan in ((1, 8.77e9, 13.16e9), (5, 30.67e9, 35.75e9)):
        f = matmul_flops(TDMPC2Config(model_size=size).resolve(1000, 6), 24, 6)
        assert (f["update"], f["plan"]) == pytest.approx((update, plan), rel=0.005)
