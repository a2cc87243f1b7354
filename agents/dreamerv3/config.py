"""DreamerV3 hyperparameters: the design's surface (§6.1) as a frozen dataclass.

Defaults are the reference's (danijar/dreamerv3 2411f7d ``dreamerv3/configs.yaml``; notes §1)
with the field names of design §6.1. ``model_size`` fills the widths left at ``None``:
with ``d = units = hidden``, ``deter = 8 d`` and ``classes = d / 16`` (``configs.yaml:149-177``
for 12m..400m). ``1m`` (d = 64, deter 512, classes 4) exists only in the later reference code
(notes §0, §12); at 2411f7d it is the same set of overrides. An explicit width overrides the
preset. ``stoch`` (32) and ``blocks`` (8) do not change with size, nor do the layer counts.

Reference names -> ours: ``horizon`` -> ``return_horizon`` (gamma = 1 - 1/return_horizon is
folded into the continue target, contdisc), ``loss_scales.{dyn,rep,dec_mlp,reward,cont,actor,
critic,replay_critic}`` -> ``{dyn,rep,rec,rew,con,actor,critic,repval}_scale``,
``rssm_loss.free`` -> ``free_nats``, ``opt.{lr,agc,pmin,beta1,beta2,eps,warmup}`` ->
``learning_rate``, ``agc``, ``agc_pmin``, ``beta1``, ``beta2``, ``eps``, ``warmup``,
``slow_critic_fraction`` -> ``slow_rate``, ``retnorm.{rate,limit}`` -> ``retnorm_*``,
``return_lambda`` / ``return_lambda_replay`` -> ``lam`` / ``repval_lam``, ``batch_length`` ->
``batch_length`` counts TRAINED steps (the reference's 65 = 64 + 1 replay-context step).

Compute dtype: float32 only. The reference's default ``jax.compute_dtype: bfloat16`` is
deferred to the accelerator milestone (deviation D30).
"""

from __future__ import annotations

import dataclasses

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


@dataclasses.dataclass(frozen=True)
class DreamerV3Config:
    model_size: str = "12m"
    units: int | None = None
    deter: int | None = None
    hidden: int | None = None
    classes: int | None = None
    stoch: int = 32
    blocks: int = 8
    enc_layers: int = 3
    dec_layers: int = 3
    rew_layers: int = 1
    con_layers: int = 1
    actor_layers: int = 3
    critic_layers: int = 3
    img_layers: int = 2
    obs_layers: int = 1
    dyn_layers: int = 1
    bins: int = 255
    # world model loss
    free_nats: float = 1.0
    unimix: float = 0.01
    actor_unimix: float = 0.01
    dyn_scale: float = 1.0
    rep_scale: float = 0.1
    rec_scale: float = 1.0
    rew_scale: float = 1.0
    con_scale: float = 1.0
    # actor-critic
    actor_scale: float = 1.0
    critic_scale: float = 1.0
    repval_scale: float = 0.3
    imag_horizon: int = 15
    return_horizon: float = 333.0
    lam: float = 0.95
    repval_lam: float = 0.95
    actent: float = 3e-4
    slowreg: float = 1.0
    slow_rate: float = 0.02
    retnorm_rate: float = 0.01
    retnorm_limit: float = 1.0
    retnorm_percentiles: tuple[float, float] = (5.0, 95.0)
    minstd: float = 0.1
    maxstd: float = 1.0
    # optimizer (LaProp + AGC, one joint gradient)
    learning_rate: float = 4e-5
    agc: float = 0.3
    agc_pmin: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-20
    warmup: int = 1000
    # data and schedule (used by the agent, next to the training step)
    train_ratio: float = 512.0
    batch_size: int = 16
    batch_length: int = 64
    replay_capacity: int = 5_000_000
    n_envs: int = 16
    eval_episodes: int = 10

    def __post_init__(self) -> None:
        if self.model_size not in MODEL_SIZES:
            raise ValueError(
                f"model_size={self.model_size!r} is not a DreamerV3 preset; "
                f"choose one of {list(MODEL_SIZES)}"
            )
        if self.bins % 2 != 1:
            raise ValueError(f"bins must be odd (symmetric two-hot bins), got {self.bins}")
        deter = self.deter_size
        if deter % self.blocks:
            raise ValueError(f"deter={deter} must be divisible by blocks={self.blocks}")

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

    @property
    def gamma(self) -> float:
        """``1 - 1/return_horizon`` (the reference's ``1 - 1/horizon``)."""
        return 1.0 - 1.0 / self.return_horizon

    @property
    def feat_size(self) -> int:
        """Width of the heads' input ``concat(deter, flatten(stoch))``."""
        return self.deter_size + self.stoch * self.classes_size
