"""TD-MPC2 hyperparameters as a frozen dataclass (docs/design.md §7.1).

Defaults are the reference's (b67b21c ``tdmpc2/config.yaml``). ``model_size``
fills the widths left at ``None`` from the reference presets
(``tdmpc2/common/__init__.py:1-24``); an explicit width overrides the preset. Values the
reference derives from the environment are resolved by :meth:`TDMPC2Config.resolve`:

* ``gamma`` = clip((T/5 - 1)/(T/5), 0.95, 0.995) (``tdmpc2/tdmpc2.py:35-48``),
* ``seed_steps`` = max(1000, 5 T) (``common/parser.py:61``),
* ``iterations`` + 2 when the action dim is >= 20 (``tdmpc2/tdmpc2.py:30``),

with T the episode length in agent steps (docs/design.md §3). Static (shape-determining) fields:
every width, ``num_q``, ``simnorm_dim``, ``num_bins``, ``horizon``, ``batch_size``,
``iterations``, ``num_samples``, ``num_elites``, ``num_pi_trajs``.
"""

from __future__ import annotations

import dataclasses

from agent_api.rules import added_later, bounded, check_bounds, check_lockstep_envs

# Why a discount must stay below 1: the TD targets bootstrap an infinite sum.
_DISCOUNT = "the TD targets need a discount < 1; the reference's default clips it to 0.995"
# Adam normalises each gradient: the bound of learning_rate (and of the encoder's rate).
_STEP = "an Adam step moves each weight by about the rate: above 1 it outweighs the weights"

# size -> (enc_dim, mlp_dim, latent_dim, num_enc_layers, num_q)
MODEL_SIZES: dict[int, tuple[int, int, int, int, int]] = {
    1: (256, 384, 128, 2, 2),
    5: (256, 512, 512, 2, 5),
    19: (1024, 1024, 768, 3, 5),
    48: (1792, 1792, 768, 4, 5),
    317: (4096, 4096, 1376, 5, 8),
}


@dataclasses.dataclass(frozen=True)
class TDMPC2Config:
    model_size: int = 5
    enc_dim: int | None = bounded(None, low=1)
    mlp_dim: int | None = bounded(None, low=1)
    latent_dim: int | None = bounded(None, low=1)
    num_enc_layers: int | None = bounded(None, low=1)
    num_q: int | None = bounded(None, low=1)
    simnorm_dim: int = bounded(8, low=1)
    num_bins: int = bounded(101, low=1)
    vmax: float = bounded(10.0, low=0)
    dropout: float = bounded(0.01, low=0, high=1)
    # update
    horizon: int = bounded(3, low=1)
    rho: float = bounded(0.5, low=0, high=1)
    consistency_coef: float = 20.0
    reward_coef: float = 0.1
    value_coef: float = 0.1
    learning_rate: float = bounded(3e-4, low=0, high=1, why=_STEP)
    enc_lr_scale: float = bounded(0.3, low=0)
    grad_clip_norm: float = bounded(20.0, low=0)
    pi_eps: float = 1e-5
    tau: float = bounded(0.01, low=0, high=1)
    entropy_coef: float = 1e-4
    log_std_min: float = -10.0
    log_std_max: float = 2.0
    batch_size: int = bounded(256, low=1)
    buffer_size: int = bounded(1_000_000, low=1, high=2**31 - 1, why="int32 buffer indices")
    # derived from the env unless given
    seed_steps: int | None = bounded(None, low=1)
    gamma: float | None = bounded(None, low=0, high=1, high_open=True, why=_DISCOUNT)
    discount_denom: float = bounded(5.0, low=0)
    discount_min: float = bounded(0.95, low=0, high=1, high_open=True, why=_DISCOUNT)
    discount_max: float = bounded(0.995, low=0, high=1, high_open=True, why=_DISCOUNT)
    # planner
    iterations: int = bounded(6, low=1)
    num_samples: int = bounded(512, low=1)
    num_elites: int = bounded(64, low=1)
    num_pi_trajs: int = bounded(24, low=0)
    min_std: float = bounded(0.05, low=0)
    max_std: float = bounded(2.0, low=0)
    temperature: float = bounded(0.5, low=0)
    # collection
    n_envs: int = bounded(1, low=1)
    eval_episodes: int = 10
    # observations (issue 48): "state" (flat vector, MLP encoder) or "rgb" (a 64x64 frame stack,
    # the reference's conv encoder, layers.py:125-150); num_channels: its conv width, 0 =
    # latent_dim / 16 so that its 16 x num_channels features fill the latent (T53: the
    # reference's fixed 32 fits only latent 512, its size 5)
    obs: str = added_later("state", since="issue 48")
    num_channels: int = added_later(0, since="issue 48", low=0)
    resolved: bool = False  # set by resolve(); resolving twice is a no-op

    def __post_init__(self) -> None:
        if self.model_size not in MODEL_SIZES:
            raise ValueError(
                f"model_size={self.model_size!r} is not a TD-MPC2 preset; "
                f"choose one of {sorted(MODEL_SIZES)}"
            )
        check_bounds(self)
        if self.obs not in ("state", "rgb"):
            raise ValueError(f"obs={self.obs!r}: choose agent.obs=state or agent.obs=rgb")
        if self.discount_min > self.discount_max:
            raise ValueError(
                f"discount_min={self.discount_min} exceeds discount_max={self.discount_max}; "
                "choose agent.discount_min <= agent.discount_max"
            )
        if self.min_std > self.max_std:
            raise ValueError(
                f"min_std={self.min_std} exceeds max_std={self.max_std}; choose "
                "agent.min_std <= agent.max_std"
            )
        if self.learning_rate * self.enc_lr_scale > 1:
            # the largest valid scale in 6 digits (taken lower where rounding went above it)
            most = float(f"{1 / self.learning_rate:.6g}")
            most = most if most * self.learning_rate <= 1 else float(f"{most * (1 - 1e-5):.6g}")
            raise ValueError(
                f"the encoder's rate learning_rate x enc_lr_scale = {self.learning_rate} x "
                f"{self.enc_lr_scale} exceeds 1 ({_STEP}); use agent.enc_lr_scale <= {most:g}"
            )
        if self.num_pi_trajs >= self.num_samples:
            raise ValueError("num_pi_trajs must be smaller than num_samples")
        if self.num_elites > self.num_samples:
            raise ValueError("num_elites must not exceed num_samples")

    def check_run(self, n_timesteps: int) -> None:
        """The rules that need the run's length (agent_api): whole ticks of the
        ``n_envs`` envs (ValueError)."""
        check_lockstep_envs(self.n_envs, n_timesteps)

    @property
    def conv_channels(self) -> int:
        """The pixel encoder's width: ``num_channels``, or ``latent_dim // 16`` when 0 (T53;
        32 at size 5, the reference's). Needs a resolved config (``latent_dim`` filled)."""
        return self.num_channels or self.latent_dim // 16

    def resolve(self, episode_length: int, action_size: int) -> TDMPC2Config:
        """Fill widths from the preset and the env-derived values (module docstring)."""
        if self.resolved:
            return self
        enc, mlp, lat, nel, nq = MODEL_SIZES[self.model_size]
        T = episode_length
        frac = T / self.discount_denom
        gamma = min(max((frac - 1) / frac, self.discount_min), self.discount_max)
        return dataclasses.replace(
            self,
            enc_dim=self.enc_dim or enc,
            mlp_dim=self.mlp_dim or mlp,
            latent_dim=self.latent_dim or lat,
            num_enc_layers=self.num_enc_layers or nel,
            num_q=self.num_q or nq,
            gamma=self.gamma if self.gamma is not None else gamma,
            seed_steps=self.seed_steps if self.seed_steps is not None else max(1000, 5 * T),
            iterations=self.iterations + (2 if action_size >= 20 else 0),
            resolved=True,
        )
