"""What a DreamerV3 run costs on a CPU: matmul FLOPs of one train step and one policy step,
the run's update count from the train-ratio schedule, and the CPU seconds the launcher's
budget guard and dry run quote (``agent_api.CpuCost``). Pure arithmetic: no JAX (the entry,
which imports this module, must stay cheap).

FLOPs count ``2 * in * out`` per row per layer (the block GRU's ``g`` block dots as such), no
elementwise work; a convolution ``2 k^2 Cin Cout`` per output pixel (a transposed one over
its output, the zeros of the dilated input included, as XLA runs it). An image env
(``facts.image_shape``) adds the CNN encoder and decoder (:func:`cnn_flops`, sized as the
networks size them: ``DreamerV3Config.cnn_stages``, D43) and drops the vector MLPs when it has
no vector; the posterior reads ``deter`` + the CNN's output. :func:`cnn_params` and
:func:`replay_bytes` give the CNN's parameters and the replay's bytes.

One train step on ``B`` windows of ``T`` trained rows (``R = B T``):

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
(``benchmarks/cpu_estimate_check.py --calls`` prints both). On 64 x 64 x 3 images, no vector:
98.4 GFLOP modelled against 96.1 traced (dots and convolutions) at 1m, 1387 against 1380 at
12m (the model counts a transposed convolution's gradients at its forward's size).

Seconds per update = FLOPs / rate + a cost per trained row (norms, activations, the
posterior scan's small ops, replay sampling and write-back: what the matmuls do not
explain), fitted to the measured 1m and 12m steps (docs/PERFORMANCE.md, DreamerV3 step table
and "Whole-loop throughput": 0.54-0.59 s and 4.4-5.0 s on one pinned core, 7% outside the
step), plus a per-call floor (the smoke config's 3 ms step). The quick config's step
(B 16 x T 32) lands within 6% of its measured 0.32 s (``--calls``, docs/PERFORMANCE.md
"CPU budget estimate").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agent_api import AcceleratorCost, CpuCost
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

# Measured with this project on one H200 (benchmarks/accelerator_check.py, the whole 12m
# chunk on walker_walk, 16 envs, one seed; docs/PERFORMANCE.md "Accelerator check"). The 1m
# preset was not timed: a dry run says unknown. Measured in float32: runs now compute in
# bfloat16 there (compute_dtype auto, D30), so until the next check times it this figure is
# an upper bound. The entry's accelerator_seconds_per_step.
ACCELERATOR: dict[str, AcceleratorCost] = {
    "12m": AcceleratorCost(
        seconds_per_step=0.0122,
        device="one NVIDIA H200 (JAX 0.11.2), 16 envs, float32",
        source="results/accelerator_gpu_20261204 (dv3_chunk)",
        measured_here=True,
    )
}
WALKER = (24, 6, False)  # the measured figure's env: obs, actions, discrete


def _layers(dims: list[int]) -> list[int]:
    """FLOPs of each dense layer of an MLP ``dims[0] -> ... -> dims[-1]``, per row."""
    return [2 * a * b for a, b in zip(dims[:-1], dims[1:], strict=False)]


Image = tuple[int, int, int] | None  # (H, W, C) of an image env's observation


def cnn_flops(cfg: DreamerV3Config, image: tuple[int, int, int]) -> dict[str, list[int]]:
    """Per-row forward FLOPs of the image CNNs, layer by layer (agents/dreamerv3/images.py):
    ``enc``: ``conv_0`` (stride 1) .. ``conv_n`` (stride 2); ``dec``: ``space0`` (block
    linear of ``deter``), ``space1hid``, ``space1`` (of ``stoch``), the transposed
    ``conv_{n-1}`` .. ``conv_0``, ``imgout``."""
    (h, _, c), (mults, m) = image, cfg.cnn_stages(*image[:2])
    k2, d, u = cfg.cnn_kernel**2, cfg.cnn_depth_size, cfg.units_size
    chans = [c] + [d * x for x in mults]
    side = [h // 2**i for i in range(len(mults))]  # each stage's output side
    conv = lambda i, a, b: 2 * side[i] ** 2 * k2 * a * b  # noqa: E731
    enc = [conv(i, chans[i], chans[i + 1]) for i in range(len(mults))]
    top = m * m * chans[-1]
    sc = cfg.stoch * cfg.classes_size
    dec = [2 * cfg.deter_size * top // cfg.cnn_blocks, 2 * sc * 2 * u, 2 * 2 * u * top]
    dec += [conv(i, chans[i + 2], chans[i + 1]) for i in reversed(range(len(mults) - 1))]
    dec += [conv(0, chans[1], c)]  # imgout
    return {"enc": enc, "dec": dec}


def cnn_params(cfg: DreamerV3Config, image: tuple[int, int, int]) -> dict[str, int]:
    """Parameters of the image CNNs (``enc/cnn``, ``dec/cnn`` of the networks' tree):
    kernels, biases and norm scales."""
    (_, _, c), (mults, m) = image, cfg.cnn_stages(*image[:2])
    k2, d, u = cfg.cnn_kernel**2, cfg.cnn_depth_size, cfg.units_size
    chans = [c] + [d * x for x in mults]
    normed = lambda a, b: k2 * a * b + 2 * b  # noqa: E731  kernel, bias, norm scale
    enc = sum(normed(a, b) for a, b in zip(chans[:-1], chans[1:], strict=True))
    top = m * m * chans[-1]
    sc = cfg.stoch * cfg.classes_size
    dec = cfg.deter_size * top // cfg.cnn_blocks + top  # space0 (block kernel), bias
    dec += sc * 2 * u + 2 * 2 * u  # space1hid: dense, norm
    dec += 2 * u * top + top + chans[-1]  # space1, spacenorm (over channels)
    dec += sum(normed(chans[i + 1], chans[i]) for i in range(1, len(mults)))
    dec += k2 * chans[1] * c + c  # imgout: no norm
    return {"enc": enc, "dec": dec}


def replay_bytes(cfg: DreamerV3Config, facts: Any, env_steps: int) -> int:
    """Bytes of one seed's replay rings for a run of ``env_steps`` rows (as
    ``StreamReplay.nbytes``): per row the observation (float32 vector, uint8 image), action,
    reward and ``deter`` in float32, three flags, the ``stoch`` indices (uint8 up to 256
    classes)."""
    n, T = cfg.n_envs, cfg.batch_length
    per_env = min(-(-cfg.replay_capacity // n), -(-env_steps // n))
    rows = max(per_env, T + -(-cfg.batch_size // n))
    per_row = 4 * (facts.obs_size + facts.action_size + 1 + cfg.deter_size) + 3
    per_row += cfg.stoch * (1 if cfg.classes_size <= 256 else 4)
    image = getattr(facts, "image_shape", None)
    if image is not None:
        per_row += image[0] * image[1] * image[2]
    return n * rows * per_row + 8


def module_flops(
    cfg: DreamerV3Config, obs: int, act: int, discrete: bool, image: Image = None
) -> dict[str, list[int]]:
    """Per-row forward FLOPs of each network, layer by layer (module docstring); ``image``:
    (H, W, C) of an image env (its CNNs in ``enc`` / ``dec``, the vector MLPs only if
    ``obs > 0``)."""
    u, h, D, g = cfg.units_size, cfg.hidden_size, cfg.deter_size, cfg.blocks
    sc, feat, bins = cfg.stoch * cfg.classes_size, cfg.feat_size, cfg.bins + cfg.bins % 2
    gru = [2 * h * (D + sc + act)]  # dynin0..2
    gru += [2 * g * (D // g + 3 * h) * (D // g)]  # dyn0 (block dots)
    gru += [2 * g * (D // g) ** 2] * (cfg.dyn_layers - 1)
    gru += [2 * g * (D // g) * (3 * D // g)]  # dyncore
    heads = lambda layers, out: _layers([feat] + [u] * layers + out)  # noqa: E731
    enc, dec, embed = _layers([obs] + [u] * cfg.enc_layers), heads(cfg.dec_layers, [obs]), u
    if image is not None:
        cnn, (mults, m) = cnn_flops(cfg, image), cfg.cnn_stages(*image[:2])
        vector = obs > 0
        enc = (enc if vector else []) + cnn["enc"]
        dec = (dec if vector else []) + cnn["dec"]
        embed = (u if vector else 0) + m * m * cfg.cnn_depth_size * mults[-1]
    return {
        "enc": enc,
        "gru": gru,
        "post": _layers([D + embed] + [h] * cfg.obs_layers + [sc]),
        "prior": _layers([D] + [h] * cfg.img_layers + [sc]),
        "dec": dec,
        "rew": heads(cfg.rew_layers, [bins]),
        "con": heads(cfg.con_layers, [1]),
        "critic": heads(cfg.critic_layers, [bins]),
        "actor": heads(cfg.actor_layers, []) + [2 * u * act * (1 if discrete else 2)],
    }


def train_flops(
    cfg: DreamerV3Config, obs: int, act: int, discrete: bool, image: Image = None
) -> int:
    """Matmul FLOPs of one train step (forward + backward; module docstring)."""
    layers = module_flops(cfg, obs, act, discrete, image)
    f = {k: sum(v) for k, v in layers.items()}
    first = {k: v[0] for k, v in layers.items()}
    R, H = cfg.batch_size * cfg.batch_length, cfg.imag_horizon
    imagined = R * (H + 1)
    world = f["enc"] + f["gru"] + f["post"] + f["dec"] + f["rew"] + f["con"] + f["prior"]
    wm = R * (3 * world - first["enc"])  # the encoder's input (obs or image) has no gradient
    imagine = R * f["actor"] + R * H * (f["gru"] + f["prior"] + f["actor"])
    own = lambda k: 3 * f[k] - first[k]  # noqa: E731  weights, and inputs past layer 1
    behavior = imagined * (own("critic") + own("actor") + f["rew"] + f["critic"] + f["con"])
    replay = R * (3 * f["critic"] + f["critic"])  # the replay critic, the slow critic
    return wm + imagine + behavior + replay


def policy_flops(
    cfg: DreamerV3Config, obs: int, act: int, discrete: bool, image: Image = None
) -> int:
    """Matmul FLOPs of one env's policy step: encoder, GRU, posterior, actor."""
    f = {k: sum(v) for k, v in module_flops(cfg, obs, act, discrete, image).items()}
    return f["enc"] + f["gru"] + f["post"] + f["actor"]


def update_seconds(
    cfg: DreamerV3Config, obs: int, act: int, discrete: bool, image: Image = None
) -> float:
    """CPU seconds of one update (sample, train step, write-back) on one core."""
    rows = cfg.batch_size * cfg.batch_length
    return (
        TRAIN_FLOOR_S
        + train_flops(cfg, obs, act, discrete, image) / TRAIN_FLOPS_PER_S
        + TRAIN_ROW_S * rows
    )


def policy_seconds(
    cfg: DreamerV3Config, obs: int, act: int, discrete: bool, envs: int, image: Image = None
) -> float:
    """CPU seconds of one policy step of ``envs`` envs (one tick's acting)."""
    flops = policy_flops(cfg, obs, act, discrete, image)
    return POLICY_FLOOR_S + envs * flops / POLICY_FLOPS_PER_S


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
    (``obs_size``, ``action_size``, ``discrete``, ``episode_length``, ``image_shape``) and of
    one evaluation (``eval_episodes`` envs side by side for one episode). The CPU rates are
    fitted to vector runs; an image run's convolutions are counted at the same rates."""
    dims = (facts.obs_size, facts.action_size, facts.discrete)
    image = getattr(facts, "image_shape", None)
    update_s = update_seconds(config, *dims, image)
    act_s = policy_seconds(config, *dims, config.n_envs, image)
    updates = updates_for(config, env_steps)
    ticks = -(-env_steps // config.n_envs)
    return CpuCost(
        train_s=updates * update_s + ticks * act_s,
        eval_s=(facts.episode_length + 1)
        * policy_seconds(config, *dims, config.eval_episodes, image),
        compile_s=COMPILE_S,
        updates=updates,
        update_s=update_s,
        acts=ticks,
        act_s=act_s,
        source=SOURCE,
    )


def accelerator_cost(config: DreamerV3Config, facts: Any) -> AcceleratorCost | None:
    """An image run's accelerator figure (``AgentTables.accelerator_cost``): its preset's
    measured vector figure (:data:`ACCELERATOR`, walker_walk) times the train step's FLOPs
    on this image over those on walker's vector, the same config otherwise. Not measured:
    it assumes the step's time grows with its FLOPs. None for a vector env (the preset's
    figure as it is) or a preset without a figure (unknown)."""
    image = getattr(facts, "image_shape", None)
    base = ACCELERATOR.get(config.model_size)
    if image is None or base is None:
        return None
    dims = (facts.obs_size, facts.action_size, facts.discrete)
    ratio = train_flops(config, *dims, image) / train_flops(config, *WALKER)
    shape = "x".join(map(str, image))
    return dataclasses.replace(
        base,
        seconds_per_step=base.seconds_per_step * ratio,
        derived=(
            f"the {config.model_size} walker_walk vector figure ({base.seconds_per_step:g} s, "
            f"{base.source}) x {ratio:.2f}, the train step's FLOPs on this {shape} image over "
            "walker's vector (agents/dreamerv3/cost.py), time taken as growing with FLOPs"
        ),
    )
