"""What a TD-MPC2 run costs on a CPU: matmul FLOPs of one update and one planning decision,
the run's update and decision counts from the schedule, and the CPU seconds the launcher's
budget guard and dry run quote (``agent_api.CpuCost``). Pure arithmetic: no JAX (the entry,
which imports this module, must stay cheap).

FLOPs count ``2 * in * out`` per row per layer, no elementwise work. Backward is 2x forward
where parameters train; the policy loss back-propagates through the frozen Q only to its
input (1x). ``members`` is how many Q members the TD target, the policy loss and the
planner's value evaluate: 2 here (the drawn pair, deviation T40). The same count as
``benchmarks/_tdmpc2_ours.py`` (``analytic_flops``, docs/PERFORMANCE.md "FLOPs": 8.77 /
30.67 GFLOP per update and 13.16 / 35.75 per decision at sizes 1 / 5, walker dims).

Seconds = a per-call floor + FLOPs / rate, the rate growing with the layer width ``w =
mlp_dim`` (small matrices run further from the CPU's peak): ``rate = peak w / (w + w0)``,
one fit per op to this project's update and planner on one pinned core: sizes 1 (w 384)
and 5 (w 512) from docs/PERFORMANCE.md (TD-MPC2 run 4: update 0.139 / 0.386 s, decision
0.150 / 0.351 s), the ``quick`` config (w 128) and the ``smoke`` config's floor from
``benchmarks/cpu_estimate_check.py --calls`` (docs/PERFORMANCE.md, "CPU budget estimate").

Image envs (issue 48): the MLP heads as above, plus the conv encoder's FLOPs
(:func:`conv_flops`: (H + 1) B image passes an update, the B of ``obs[0]`` counted 3x for
their backward; one a decision) at :data:`CONV_RATE`, a rate of its own: XLA's CPU
convolutions run far below its matmuls.
"""

from __future__ import annotations

from typing import Any

from agent_api import CpuCost
from agents.tdmpc2.config import TDMPC2Config

UPDATE_PEAK, UPDATE_W0 = 136e9, 369  # FLOP/s, width
PLAN_PEAK, PLAN_W0 = 202e9, 504
UPDATE_FLOOR_S = 2.6e-3
PLAN_FLOOR_S = 8e-4
# Compiling init, the train chunk (update + planner inside the tick scan) and the evaluation:
# CPU seconds at XLA's default optimisation (benchmarks/cpu_estimate_check.py: the quick
# chunk's 18 s on a loaded box, plus the evaluation and init programs).
COMPILE_S = 35.0
SOURCE = "agents/tdmpc2/cost.py: FLOPs at CPU rates measured at widths 128 to 512"
# FLOP/s of the pixel encoder's convolutions on one core: the one size-5 pixel update measured
# (7.41 CPU s, docs/PERFORMANCE.md "TD-MPC2 from pixels: a first look", a loaded box) less its
# MLP part by the fit above (0.39 s) over its 1,536 image passes of 33.3 MFLOP. One
# measurement: a first figure, not a fit.
CONV_RATE = 7.3e9
# the pixel model's input: 3 stacked 64 x 64 RGB frames (docs/design.md §7.7)
PIXEL_STACK = (64, 64, 9)


def conv_flops(image_shape: tuple[int, int, int], channels: int) -> int:
    """Multiply-add FLOPs (2 per MAC) of the pixel encoder's four valid convolutions of one
    ``(H, W, C)`` image (kernel/stride 7/2, 5/2, 3/2, 3/1: 64 -> 29 -> 13 -> 6 -> 4 a side,
    ``channels`` out each)."""
    side, _, c_in = image_shape
    total = 0
    for k, stride in ((7, 2), (5, 2), (3, 2), (3, 1)):
        side = (side - k) // stride + 1
        total += 2 * side * side * k * k * c_in * channels
        c_in = channels
    return total


def matmul_flops(
    cfg: TDMPC2Config, obs: int, act: int, members: int = 2, image: bool = False
) -> dict[str, int]:
    """``{"update": F, "plan": F}``: matmul FLOPs of one update and one planning decision
    of a resolved config, on an env of ``obs`` / ``act`` dims; ``image``: the MLP heads only
    (the conv encoder is :func:`conv_flops`)."""
    L, m, K, e, H = cfg.latent_dim, cfg.mlp_dim, cfg.num_bins, cfg.enc_dim, cfg.horizon
    B, N, P, it = cfg.batch_size, cfg.num_samples, cfg.num_pi_trajs, cfg.iterations

    def mlp(dims: list[int]) -> int:
        return 2 * sum(a * b for a, b in zip(dims[:-1], dims[1:], strict=False))

    f_enc = 0 if image else mlp([obs] + [e] * max(cfg.num_enc_layers - 1, 1) + [L])
    f_dyn = mlp([L + act, m, m, L])
    f_q = mlp([L + act, m, m, K])  # the reward head has the same shape
    f_pi = mlp([L, m, m, 2 * act])
    next_z = H * B * f_enc
    td = H * B * (f_pi + members * f_q)
    wm_fwd = B * f_enc + H * B * (f_dyn + f_q + cfg.num_q * f_q)
    pi_obj = (H + 1) * B * (3 * f_pi + 2 * members * f_q)
    pi_trajs = P * (H * f_pi + (H - 1) * f_dyn)
    per_iter = N * (H * (f_q + f_dyn) + f_pi + members * f_q)
    return {
        "update": next_z + td + 3 * wm_fwd + pi_obj,
        "plan": f_enc + pi_trajs + it * per_iter,
    }


def call_seconds(cfg: TDMPC2Config, obs: int, act: int, image: bool = False) -> tuple[float, float]:
    """CPU seconds of one update and of one planning decision (one core); ``image``: a pixel
    model (module docstring)."""
    f = matmul_flops(cfg, obs, act, image=image)
    w = cfg.mlp_dim
    update_s = UPDATE_FLOOR_S + f["update"] * (w + UPDATE_W0) / (UPDATE_PEAK * w)
    plan_s = PLAN_FLOOR_S + f["plan"] * (w + PLAN_W0) / (PLAN_PEAK * w)
    if image:
        per_image = conv_flops(PIXEL_STACK, cfg.conv_channels) / CONV_RATE
        H, B = cfg.horizon, cfg.batch_size
        update_s += (H * B + 3 * B) * per_image  # encode(obs[1:]) + encode(obs[0]) fwd/bwd
        plan_s += per_image
    return update_s, plan_s


def schedule_counts(cfg: TDMPC2Config, episode_length: int, env_steps: int) -> tuple[int, int]:
    """``(updates, decisions)`` of a run of ``env_steps`` agent steps: the arithmetic of
    :class:`agents.tdmpc2.schedule.Schedule` (kept JAX-free here). Random actions up to and
    including the burst tick, a burst of ``seed_steps`` updates there, then one update and
    one planner decision per env step (every env of a stepping tick plans)."""
    T, n, S = episode_length, cfg.n_envs, cfg.seed_steps
    per_env = -(-env_steps // n)
    ticks = per_env + per_env // T  # hold ticks included (TDMPC2.ticks_for)
    c = S // n + 1
    burst = max((c - 1) + (c - 1) // T, T + 1)

    def steps_through(tick: int) -> int:  # agent env steps after ticks 0..tick
        k = tick + 1
        return n * (k - k // (T + 1))

    if ticks <= burst:
        return 0, 0
    after = steps_through(ticks - 1) - steps_through(burst)
    return S + after, after


def cpu_cost(config: TDMPC2Config, facts: Any, env_steps: int) -> CpuCost:
    """The CPU cost of one seed training ``env_steps`` agent steps on the env of ``facts``
    (``obs_size``, ``action_size``, ``episode_length``) and of one evaluation
    (``eval_episodes`` episodes, every decision planned, the envs looped on CPU)."""
    T = facts.episode_length
    cfg = config.resolve(T, facts.action_size)
    image = getattr(facts, "obs_mode", "vector") == "image"
    update_s, plan_s = call_seconds(cfg, facts.obs_size, facts.action_size, image)
    updates, decisions = schedule_counts(cfg, T, env_steps)
    return CpuCost(
        train_s=updates * update_s + decisions * plan_s,
        eval_s=cfg.eval_episodes * T * plan_s,
        compile_s=COMPILE_S,
        updates=updates,
        update_s=update_s,
        acts=decisions,
        act_s=plan_s,
        source=SOURCE,
    )
