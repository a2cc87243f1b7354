"""TD-MPC2 hyperparameters: the design's surface (§4.1) as a frozen dataclass.

Defaults are the reference's (b67b21c ``tdmpc2/config.yaml``; notes §1). ``model_size``
fills the widths left at ``None`` from the reference presets
(``tdmpc2/common/__init__.py:1-24``); an explicit width overrides the preset. Values the
reference derives from the environment are resolved by :meth:`TDMPC2Config.resolve`:

* ``gamma`` = clip((T/5 - 1)/(T/5), 0.95, 0.995) (``tdmpc2/tdmpc2.py:35-48``),
* ``seed_steps`` = max(1000, 5 T) (``common/parser.py:61``),
* ``iterations`` + 2 when the action dim is >= 20 (``tdmpc2/tdmpc2.py:30``),

with T the episode length in agent steps (design §2). Static (shape-determining) fields:
every width, ``num_q``, ``simnorm_dim``, ``num_bins``, ``horizon``, ``batch_size``,
``iterations``, ``num_samples``, ``num_elites``, ``num_pi_trajs``.
"""

from __future__ import annotations

import dataclasses

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
    enc_dim: int | None = None
    mlp_dim: int | None = None
    latent_dim: int | None = None
    num_enc_layers: int | None = None
    num_q: int | None = None
    simnorm_dim: int = 8
    num_bins: int = 101
    vmax: float = 10.0
    dropout: float = 0.01
    # update
    horizon: int = 3
    rho: float = 0.5
    consistency_coef: float = 20.0
    reward_coef: float = 0.1
    value_coef: float = 0.1
    learning_rate: float = 3e-4
    enc_lr_scale: float = 0.3
    grad_clip_norm: float = 20.0
    pi_eps: float = 1e-5
    tau: float = 0.01
    entropy_coef: float = 1e-4
    log_std_min: float = -10.0
    log_std_max: float = 2.0
    batch_size: int = 256
    buffer_size: int = 1_000_000
    # derived from the env unless given
    seed_steps: int | None = None
    gamma: float | None = None
    discount_denom: float = 5.0
    discount_min: float = 0.95
    discount_max: float = 0.995
    # planner
    iterations: int = 6
    num_samples: int = 512
    num_elites: int = 64
    num_pi_trajs: int = 24
    min_std: float = 0.05
    max_std: float = 2.0
    temperature: float = 0.5
    # collection
    n_envs: int = 1
    eval_episodes: int = 10
    resolved: bool = False  # set by resolve(); resolving twice is a no-op

    def __post_init__(self) -> None:
        if self.model_size not in MODEL_SIZES:
            raise ValueError(
                f"model_size={self.model_size!r} is not a TD-MPC2 preset; "
                f"choose one of {sorted(MODEL_SIZES)}"
            )
        if self.num_pi_trajs >= self.num_samples:
            raise ValueError("num_pi_trajs must be smaller than num_samples")
        if self.num_elites > self.num_samples:
            raise ValueError("num_elites must not exceed num_samples")

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
