"""DreamerV3 hyperparameters as a frozen dataclass (docs/design.md §8.1).

Defaults are the reference's (danijar/dreamerv3 2411f7d ``dreamerv3/configs.yaml``)
with the field names of docs/design.md §8.1. ``model_size`` fills the widths left at ``None``:
with ``d = units = hidden``, ``deter = 8 d`` and ``classes = d / 16`` (``configs.yaml:149-177``
for 12m..400m). ``1m`` (d = 64, deter 512, classes 4) exists only in the later reference code
(docs/design.md §8.1); at 2411f7d it is the same set of overrides. An explicit width overrides the
preset. ``stoch`` (32) and ``blocks`` (8) do not change with size, nor do the layer counts.

Reference names -> ours: ``horizon`` -> ``return_horizon`` (gamma = 1 - 1/return_horizon is
folded into the continue target, contdisc), ``loss_scales.{dyn,rep,dec_mlp,reward,cont,actor,
critic,replay_critic}`` -> ``{dyn,rep,rec,rew,con,actor,critic,repval}_scale``,
``rssm_loss.free`` -> ``free_nats``, ``opt.{lr,agc,pmin,beta1,beta2,eps,warmup}`` ->
``learning_rate``, ``agc``, ``agc_pmin``, ``beta1``, ``beta2``, ``eps``, ``warmup``,
``slow_critic_fraction`` -> ``slow_rate``, ``retnorm.{rate,limit}`` -> ``retnorm_*``,
``return_lambda`` / ``return_lambda_replay`` -> ``lam`` / ``repval_lam``, ``batch_length`` ->
``batch_length`` counts TRAINED steps (the reference's 65 = 64 + 1 replay-context step).

Compute dtype: ``compute_dtype`` is "float32", "bfloat16" or "auto" (the default: bfloat16 on an
accelerator, float32 on the CPU, :func:`resolve_compute_dtype`). bfloat16 is the reference's
``jax.compute_dtype: bfloat16`` with float32 parameters (``configs.yaml:24-25``); what it casts
is listed in docs/design.md §8.1 and deviation D30.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

from agent_api.backend import accelerated
from agent_api.rules import (
    added_later,
    bounded,
    check_bounds,
    check_lockstep_envs,
    field_bounds,
)

COMPUTE_DTYPES = ("float32", "bfloat16", "auto")
# The largest side the image CNN may end at (cnn_stages): the later reference's bound
# (danijar/dreamerv3 e3f0224 dreamerv3/rssm.py:311-312 asserts 3 <= minres <= 16).
MAX_MINRES = 16
# LaProp normalises each gradient: the bound of learning_rate.
_STEP = "a LaProp step moves each weight by about the rate: above 1 it outweighs the weights"


def resolve_compute_dtype(compute_dtype: str, backend: str) -> str:
    """The dtype name a model computes in: ``compute_dtype`` itself, or for "auto" bfloat16 on
    an accelerator ``backend`` (``agent_api.backend.accelerated``: anything but "cpu") and
    float32 on the CPU, where bfloat16 is slower (D30). ``backend``: a
    ``jax.default_backend()`` name (docs/design.md §2.6)."""
    if compute_dtype not in COMPUTE_DTYPES:
        raise ValueError(f"compute_dtype={compute_dtype!r}: choose one of {list(COMPUTE_DTYPES)}")
    if compute_dtype != "auto":
        return compute_dtype
    return "bfloat16" if accelerated(backend) else "float32"


# name -> d (units = hidden = d, deter = 8 d, classes = d // 16)
MODEL_SIZES: dict[str, int] = {
    "1m": 64,
    "12m": 256,
    "25m": 384,
    "50m": 512,
    "100m": 768,
    "200m": 1024,
    "400m": 1536,
}


def check_ratio(train_ratio: float, batch_size: int, batch_length: int) -> None:
    """Refuse a train ratio whose updates per row ``train_ratio / (B T)``, an exact
    fraction ``p / q``, the schedule's int32 closed form cannot hold (``p q >= 2**31``;
    agents/dreamerv3/schedule.py): ValueError."""
    r = Fraction(train_ratio) / (batch_size * batch_length)
    if r.numerator * r.denominator >= 2**31:
        raise ValueError(
            f"train_ratio={train_ratio!r} gives {r} updates per row, too fine a "
            "fraction for the int32 closed form (numerator x denominator >= 2**31); "
            "use a train ratio with fewer binary digits (an integer or a few halves)"
        )


@dataclasses.dataclass(frozen=True)
class DreamerV3Config:
    model_size: str = "12m"
    units: int | None = bounded(None, low=1)
    deter: int | None = bounded(None, low=1)
    hidden: int | None = bounded(None, low=1)
    classes: int | None = bounded(None, low=1)
    stoch: int = bounded(32, low=1)
    blocks: int = bounded(8, low=1)
    enc_layers: int = bounded(3, low=1)
    dec_layers: int = bounded(3, low=1)
    rew_layers: int = bounded(1, low=1)
    con_layers: int = bounded(1, low=1)
    actor_layers: int = bounded(3, low=1)
    critic_layers: int = bounded(3, low=1)
    img_layers: int = bounded(2, low=1)
    obs_layers: int = bounded(1, low=1)
    dyn_layers: int = bounded(1, low=1)
    bins: int = bounded(255, low=1)
    # world model loss
    free_nats: float = bounded(1.0, low=0)
    unimix: float = bounded(0.01, low=0, high=1)
    actor_unimix: float = bounded(0.01, low=0, high=1)
    dyn_scale: float = bounded(1.0, low=0)
    rep_scale: float = bounded(0.1, low=0)
    rec_scale: float = bounded(1.0, low=0)
    rew_scale: float = bounded(1.0, low=0)
    con_scale: float = bounded(1.0, low=0)
    # actor-critic
    actor_scale: float = bounded(1.0, low=0)
    critic_scale: float = bounded(1.0, low=0)
    repval_scale: float = bounded(0.3, low=0)
    imag_horizon: int = bounded(15, low=1)
    return_horizon: float = bounded(333.0, low=1)
    lam: float = bounded(0.95, low=0, high=1)
    repval_lam: float = bounded(0.95, low=0, high=1)
    actent: float = bounded(3e-4, low=0)
    slowreg: float = bounded(1.0, low=0)
    slow_rate: float = bounded(0.02, low=0, high=1)
    retnorm_rate: float = bounded(0.01, low=0, high=1)
    retnorm_limit: float = bounded(1.0, low=0)
    retnorm_percentiles: tuple[float, float] = (5.0, 95.0)
    minstd: float = bounded(0.1, low=0)
    maxstd: float = bounded(1.0, low=0)
    # optimizer (LaProp + AGC, one joint gradient)
    learning_rate: float = bounded(4e-5, low=0, high=1, why=_STEP)
    agc: float = bounded(0.3, low=0)
    agc_pmin: float = bounded(1e-3, low=0)
    beta1: float = bounded(0.9, low=0, high=1)
    beta2: float = bounded(0.999, low=0, high=1)
    eps: float = bounded(1e-20, low=0)
    warmup: int = bounded(1000, low=0)
    # data and schedule (used by the agent, next to the training step)
    train_ratio: float = bounded(
        512.0, low=0, low_open=True, why="a train ratio of 0 never updates"
    )
    batch_size: int = bounded(16, low=1)
    batch_length: int = bounded(64, low=1)
    replay_capacity: int = bounded(5_000_000, low=1, high=2**31 - 1, why="int32 ring indices")
    n_envs: int = bounded(16, low=1)
    eval_episodes: int = 10
    # numerics: "float32" | "bfloat16" | "auto" (resolve_compute_dtype); params stay float32
    compute_dtype: str = added_later("auto", since="issue 42, deviation D30")
    # image observations (agents/dreamerv3/images.py; configs.yaml enc/dec.simple): CNN depth
    # (None: the preset's width / 16), channel multipliers, kernel, the resolution the encoder
    # ends at, the decoder's block groups (block_space), and the image loss scale (dec_cnn)
    cnn_depth: int | None = added_later(None, since="issue 47", low=1)
    cnn_mults: tuple[int, ...] = added_later((1, 2, 3, 4, 4), since="issue 47")
    cnn_kernel: int = added_later(5, since="issue 47", low=1)
    cnn_minres: int = added_later(4, since="issue 47", low=1)
    cnn_blocks: int = added_later(8, since="issue 47", low=1)
    image_scale: float = added_later(1.0, since="issue 47", low=0)

    def __post_init__(self) -> None:
        if self.model_size not in MODEL_SIZES:
            raise ValueError(
                f"model_size={self.model_size!r} is not a DreamerV3 preset; "
                f"choose one of {list(MODEL_SIZES)}"
            )
        if self.compute_dtype not in COMPUTE_DTYPES:
            raise ValueError(
                f"compute_dtype={self.compute_dtype!r} is not one of {list(COMPUTE_DTYPES)}; "
                "e.g. agent.compute_dtype=bfloat16"
            )
        check_bounds(self)
        low_high = self.retnorm_percentiles
        if len(low_high) != 2 or not 0 <= low_high[0] < low_high[1] <= 100:
            raise ValueError(
                f"retnorm_percentiles={list(low_high)} must be two increasing percentiles "
                "in [0, 100] (low, high); e.g. agent.retnorm_percentiles=[5.0,95.0]"
            )
        check_ratio(self.train_ratio, self.batch_size, self.batch_length)
        if self.minstd > self.maxstd:
            raise ValueError(
                f"minstd={self.minstd} exceeds maxstd={self.maxstd}; choose "
                "agent.minstd <= agent.maxstd"
            )
        need = self.n_envs * self.min_rows_per_env
        if self.replay_capacity < need:
            raise ValueError(
                f"replay_capacity={self.replay_capacity} rows cannot hold one batch "
                f"({self.batch_size} windows of batch_length + 1 = {self.batch_length + 1} "
                f"rows over {self.n_envs} envs); {self._replay_fix(need)}"
            )
        if self.bins % 2 != 1:
            raise ValueError(f"bins must be odd (symmetric two-hot bins), got {self.bins}")
        if not self.cnn_mults or min(self.cnn_mults) < 1:
            raise ValueError(f"cnn_mults={list(self.cnn_mults)} must be positive integers")
        deter = self.deter_size
        if deter % self.blocks:
            raise ValueError(f"deter={deter} must be divisible by blocks={self.blocks}")

    @property
    def min_rows_per_env(self) -> int:
        """Rows every env must have collected before the first update: the envs' windows
        of ``batch_length + 1`` rows (``rows - batch_length`` per env) must number
        ``batch_size`` (the gate of agents/dreamerv3/schedule.py)."""
        return self.batch_length + math.ceil(self.batch_size / self.n_envs)

    def _replay_fix(self, need: int) -> str:
        """The hint for a replay too small for one batch of ``need`` rows: a capacity within
        the field's bound, else fewer envs (a hint must itself be a valid value)."""
        largest = int(field_bounds(type(self))["replay_capacity"].high)
        if need <= largest:
            return f"use agent.replay_capacity >= {need}"
        L, b = self.batch_length, self.batch_size
        # n >= b envs need L + 1 rows each; fewer need n (L + ceil(b / n)) <= n (L + 1) + b - 1
        envs = largest // (L + 1)
        if envs < b:
            envs = (largest - b + 1) // (L + 1)
        if envs < 1:
            return "no replay_capacity holds it: use a smaller agent.batch_length"
        return (
            f"no replay_capacity holds that many (at most {largest}, int32 ring indices): use "
            f"agent.n_envs <= {envs}"
        )

    def check_run(self, n_timesteps: int) -> None:
        """The rules that need the run's length (agent_api): whole ticks of the
        ``n_envs`` envs, and a first update within the run (ValueError)."""
        check_lockstep_envs(self.n_envs, n_timesteps)
        rows = n_timesteps // self.n_envs
        if rows < self.min_rows_per_env:
            longest = rows - math.ceil(self.batch_size / self.n_envs)
            fix = f"agent.batch_length <= {longest} or " if longest >= 1 else ""
            raise ValueError(
                f"agent.batch_length: the first update needs batch_length + ceil(batch_size"
                f" / n_envs) = {self.min_rows_per_env} rows per env, and the run collects "
                f"protocol.n_timesteps / agent.n_envs = {rows}: it would never update; use "
                f"{fix}protocol.n_timesteps >= {self.min_rows_per_env * self.n_envs}"
            )

    @property
    def width(self) -> int:
        return MODEL_SIZES[self.model_size]

    @property
    def units_size(self) -> int:
        return self.units or self.width

    @property
    def hidden_size(self) -> int:
        return self.hidden or self.width

    @property
    def deter_size(self) -> int:
        return self.deter or 8 * self.width

    @property
    def classes_size(self) -> int:
        return self.classes or max(1, self.width // 16)

    def derived(self) -> dict[str, int]:
        """The values the fields left at ``None`` take (``--cfg job`` prints them)."""
        sizes = {
            "units": self.units_size,
            "hidden": self.hidden_size,
            "deter": self.deter_size,
            "classes": self.classes_size,
            "cnn_depth": self.cnn_depth_size,
        }
        return {k: v for k, v in sizes.items() if getattr(self, k) is None}

    @property
    def cnn_depth_size(self) -> int:
        """The CNN depth: ``cnn_depth`` or the preset's ``width / 16`` (``configs.yaml:148-176``:
        12m 16, 25m 24, 50m 32, 100m 48, 200m 64, 400m 96; 1m 4: D42)."""
        return self.cnn_depth or max(1, self.width // 16)

    def cnn_stages(self, height: int, width: int) -> tuple[tuple[int, ...], int]:
        """The CNN an ``height x width`` image gets: ``(mults, minres)``, the channel
        multipliers of the stages used and the side the encoder ends at (D43).

        The first stage keeps the resolution (``outer``); each further one halves it. The
        stride-2 stages used are the most, up to ``len(cnn_mults) - 1``, that halve the side
        exactly and keep it at least ``cnn_minres``; ``mults = cnn_mults[:stages]``. An
        image the reference builds for (side ``cnn_minres 2^(len(cnn_mults) - 1)``, 64 at
        the defaults) gets all of ``cnn_mults`` and ends at ``cnn_minres`` as there
        (29eb964 ``nets.py:267-270``); MinAtar's 10 x 10 gets ``(1, 2)`` and 5 x 5.
        ValueError for a non-square image, or one that would end above ``MAX_MINRES``."""
        halvings = 0
        while (
            halvings < len(self.cnn_mults) - 1
            and height % 2 ** (halvings + 1) == 0
            and height // 2 ** (halvings + 1) >= self.cnn_minres
        ):
            halvings += 1
        minres = height // 2**halvings
        if height != width or not self.cnn_minres <= minres <= MAX_MINRES:
            raise ValueError(
                f"image {height}x{width}: the CNN (cnn_mults {list(self.cnn_mults)}, "
                f"cnn_minres {self.cnn_minres}) takes square images it can halve to a side "
                f"in [cnn_minres, {MAX_MINRES}] (e.g. 64 x 64, or 10 x 10 -> 5)"
            )
        return tuple(self.cnn_mults[: halvings + 1]), minres

    @property
    def gamma(self) -> float:
        """``1 - 1/return_horizon`` (the reference's ``1 - 1/horizon``)."""
        return 1.0 - 1.0 / self.return_horizon

    @property
    def feat_size(self) -> int:
        """Width of the heads' input ``concat(deter, flatten(stoch))``."""
        return self.deter_size + self.stoch * self.classes_size
