"""The CPU cost model's schedule arithmetic (agents/tdmpc2/cost.py, JAX-free) against the
schedule the agent runs (agents/tdmpc2/schedule.py), and its FLOP count against the
benchmark's (docs/PERFORMANCE.md "FLOPs")."""

import jax.numpy as jnp
import pytest

from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.cost import (
    CONV_RATE,
    PIXEL_STACK,
    call_seconds,
    conv_flops,
    cpu_cost,
    matmul_flops,
    schedule_counts,
)
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


def test_conv_flops_count_every_layer():
    """The four convolutions of one 64 x 64 x 9 stack at 32 channels, by hand: output sides
    29, 13, 6, 4; 2 FLOPs per multiply-add of k x k x c_in weights per output value."""
    by_hand = 2 * 32 * (29**2 * 49 * 9 + 13**2 * 25 * 32 + 6**2 * 9 * 32 + 4**2 * 9 * 32)
    assert conv_flops(PIXEL_STACK, 32) == by_hand == 33_347_648


def test_image_runs_pay_for_the_conv_encoder():
    """An image env's update and decision: the MLP heads (no MLP encoder) plus the conv
    passes at CONV_RATE; the dry run's cost takes the env's obs_mode."""
    from types import SimpleNamespace

    cfg = TDMPC2Config(model_size=5).resolve(500, 6)
    per_image = conv_flops(PIXEL_STACK, 32) / CONV_RATE
    heads = call_seconds(cfg, 0, 6, image=False)
    no_encoder = matmul_flops(cfg, 0, 6, image=True)
    assert no_encoder["plan"] < matmul_flops(cfg, 0, 6)["plan"]  # the MLP encoder is gone
    update_s, plan_s = call_seconds(cfg, 0, 6, image=True)
    # H B + 3 B = 1,536 conv passes an update, 1 a decision; rel 1e-3: the MLP encoder that
    # the image model drops (2 x 256 x 512 FLOPs a pass at obs 0: ~5 ms an update, ~3 us a
    # decision) is under 1e-3 of the ~7 s of conv passes and of the ~0.35 s decision
    assert update_s - heads[0] == pytest.approx(1536 * per_image, rel=1e-3)
    assert plan_s - heads[1] == pytest.approx(per_image, rel=1e-3)
    facts = SimpleNamespace(obs_size=0, action_size=6, episode_length=500, obs_mode="image")
    vector = SimpleNamespace(obs_size=0, action_size=6, episode_length=500, obs_mode="vector")
    img, vec = cpu_cost(TDMPC2Config(), facts, 10_000), cpu_cost(TDMPC2Config(), vector, 10_000)
    assert img.update_s == update_s and img.train_s > vec.train_s
