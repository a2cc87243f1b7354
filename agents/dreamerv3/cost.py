"""What a DreamerV3 run costs on a CPU: matmul FLOPs of one train step and one policy step,
the run's update count from the train-ratio schedule, and the CPU seconds the launcher's
budget guard and dry run quote (``agent_api.CpuCost``). Pure arithmetic: no JAX (the entry,
which imports this module, must stay cheap).

FLOPs count ``2 * in * out`` per row per layer (the block GRU's ``g`` block dots as such), no
elementwise work. One train step on ``B`` windows of ``T`` trained rows (``R = B T``):

* world model, forward and backward (2x): encoder, block GRU + posterior (the scan), decoder,
  reward, continue, the prior on the posterior ``deter`` (the dyn loss);
* imagination from all ``R`` states, forward only (stop-gradiented parameters): the actor,
  then ``H`` x (GRU, prior, actor);
* on the ``R (H + 1)`` imagined states: critic and actor forward + backward into their own
  weights (the input is stop-gradiented: no input gradient of the first layer); reward,
  slow critic and continue forward only; on the ``R`` posterior states the replay critic
  forward + backward (into the world model) and the slow critic forward.

This agrees with the dot FLOPs of the traced step (``benchmarks/dreamerv3_speed.py``, walker
dims, B 16 x T 64: 29.1 GFLOP at 1m, 429.0 at 12m) to a few percent
(``benchmarks/cpu_estimate_check.py --calls`` prints both).

Seconds per update = FLOPs / rate + a cost per trained row (norms, activations, the
posterior scan's small ops, replay sampling and write-back: what the matmuls do not
explain), fitted to the measured 1m and 12m steps (docs/PERFORMANCE.md, DreamerV3 step table
and "Whole-loop throughput": 0.54-0.59 s and 4.4-5.0 s on one pinned core, 7% outside the
step), plus a per-call floor (the smoke config's 3 ms step). The quick config's step
(B 16 x T 32) lands within 6% of its measured 0.32 s (``--calls``, docs/PERFORMANCE.md
"CPU budget estimate").
"""

from __future__ import annotations

from typing import Any

from agent_api import CpuCost
from agents.dreamerv3.config import DreamerV3Config

TRAIN_FLOPS_PER_S = 90e9
TRAIN_ROW_S = 2.4e-4  # per trained row (B x T) of a window
TRAIN_FLOOR_S = 2e-3
POLICY_FLOPS_PER_S = 30e9
POLICY_FLOOR_S = 5e-4
# Compiling init, the train chunk (collector, policy, the update loop) and the evaluation:
# CPU seconds at XLA's default optimisation (benchmarks/cpu_estimate_check.py: the 1m quick
# chunk's 31 s on a loaded box, plus the evaluation and init programs).
COMPILE_S = 50.0
SOURCE = "agents/dreamerv3/cost.py: FLOPs at CPU rates measured at 1m and 12m"


def _layers(dims: list[int]) -> list[int]:
    """FLOPs of each dense layer of an MLP ``dims[0] -> ... -> dims[-1]``, per row."""
    return [2 * a * b for a, b in zip(dims[:-1], dims[1:], strict=False)]


def module_flops(cfg: DreamerV3Config, obs: int, act: int, discrete: bool) -> dict[str, list[int]]:
    """Per-row forward FLOPs of each network, layer by layer (module docstring)."""
    u, h, D, g = cfg.units_size, cfg.hidden_size, cfg.deter_size, cfg.blocks
    sc, feat, bins = cfg.stoch * cfg.classes_size, cfg.feat_size, cfg.bins + cfg.bins % 2
    gru = [2 * h * (D + sc + act)]  # dynin0..2
    gru += [2 * g * (D // g + 3 * h) * (D // g)]  # dyn0 (block dots)
    gru += [2 * g * (D // g) ** 2] * (cfg.dyn_layers - 1)
    gru += [2 * g * (D // g) * (3 * D // g)]  # dyncore
    heads = lambda layers, out: _layers([feat] + [u] * layers + out)  # noqa: E731
    return {
        "enc": _layers([obs] + [u] * cfg.enc_layers),
        "gru": gru,
        "post": _layers([D + u] + [h] * cfg.obs_layers + [sc]),
        "prior": _layers([D] + [h] * cfg.img_layers + [sc]),
        "dec": heads(cfg.dec_layers, [obs]),
        "rew": heads(cfg.rew_layers, [bins]),
        "con": heads(cfg.con_layers, [1]),
        "critic": heads(cfg.critic_layers, [bins]),
        "actor": heads(cfg.actor_layers, []) + [2 * u * act * (1 if discrete else 2)],
    }


def train_flops(cfg: DreamerV3Config, obs: int, act: int, discrete: bool) -> int:
    """Matmul FLOPs of one train step (forward + backward; module docstring)."""
    f = {k: sum(v) for k, v in module_flops(cfg, obs, act, discrete).items()}
    first = {k: v[0] for k, v in module_flops(cfg, obs, act, discrete).items()}
    R, H = cfg.batch_size * cfg.batch_length, cfg.imag_horizon
    imagined = R * (H + 1)
    world = f["enc"] + f["gru"] + f["post"] + f["dec"] + f["rew"] + f["con"] + f["prior"]
    wm = R * (3 * world - first["enc"])  # the encoder's input (obs) has no gradient
    imagine = R * f["actor"] + R * H * (f["gru"] + f["prior"] + f["actor"])
    own = lambda k: 3 * f[k] - first[k]  # noqa: E731  weights, and inputs past layer 1
    behavior = imagined * (own("critic") + own("actor") + f["rew"] + f["critic"] + f["con"])
    replay = R * (3 * f["critic"] + f["critic"])  # the replay critic, the slow critic
    return wm + imagine + behavior + replay


def policy_flops(cfg: DreamerV3Config, obs: int, act: int, discrete: bool) -> int:
    """Matmul FLOPs of one env's policy step: encoder, GRU, posterior, actor."""
    f = {k: sum(v) for k, v in module_flops(cfg, obs, act, discrete).items()}
    return f["enc"] + f["gru"] + f["post"] + f["actor"]


def update_seconds(cfg: DreamerV3Config, obs: int, act: int, discrete: bool) -> float:
    """CPU seconds of one update (sample, train step, write-back) on one core."""
    rows = cfg.batch_size * cfg.batch_length
    return (
        TRAIN_FLOOR_S
        + train_flops(cfg, obs, act, discrete) / TRAIN_FLOPS_PER_S
        + TRAIN_ROW_S * rows
    )


def policy_seconds(cfg: DreamerV3Config, obs: int, act: int, discrete: bool, envs: int) -> float:
    """CPU seconds of one policy step of ``envs`` envs (one tick's acting)."""
    return POLICY_FLOOR_S + envs * policy_flops(cfg, obs, act, discrete) / POLICY_FLOPS_PER_S


def gate_transition(n_envs: int, batch_size: int, batch_length: int) -> int:
    """The 1-based transition of the first update (``Schedule.gate``, JAX-free): the first
    after which the replay holds ``batch_size`` windows of ``batch_length + 1`` rows."""
    tick = batch_length
    while True:
        for env in range(n_envs):
            done = (env + 1) * max(0, tick + 1 - batch_length)
            todo = (n_envs - env - 1) * max(0, tick - batch_length)
            if done + todo >= batch_size:
                return n_envs * tick + env + 1
        tick += 1


def updates_for(cfg: DreamerV3Config, rows: int) -> int:
    """Updates of a run of ``rows`` rows (whole ticks): ``1 + floor((s - s0) r)`` from the
    gate ``s0`` on, ``r = train_ratio / (B T)`` (``agents.dreamerv3.schedule``)."""
    rows = -(-rows // cfg.n_envs) * cfg.n_envs
    s0 = gate_transition(cfg.n_envs, cfg.batch_size, cfg.batch_length)
    if rows < s0 or cfg.train_ratio <= 0:
        return 0
    return 1 + int((rows - s0) * cfg.train_ratio // (cfg.batch_size * cfg.batch_length))


def cpu_cost(config: DreamerV3Config, facts: Any, env_steps: int) -> CpuCost:
    """The CPU cost of one seed training ``env_steps`` rows on the env of ``facts``
    (``obs_size``, ``action_size``, ``discrete``, ``episode_length``) and of one evaluation
    (``eval_episodes`` envs side by side for one episode)."""
    dims = (facts.obs_size, facts.action_size, facts.discrete)
    update_s = update_seconds(config, *dims)
    act_s = policy_seconds(config, *dims, config.n_envs)
    updates = updates_for(config, env_steps)
    ticks = -(-env_steps // config.n_envs)
    return CpuCost(
        train_s=updates * update_s + ticks * act_s,
        eval_s=(facts.episode_length + 1) * policy_seconds(config, *dims, config.eval_episodes),
        compile_s=COMPILE_S,
        updates=updates,
        update_s=update_s,
        acts=ticks,
        act_s=act_s,
        source=SOURCE,
    )
