"""Agents the launcher can run: name -> config class, model-size presets and constructor.

An agent is a small object of pure functions (ARCHITECTURE.md):

    init(key) -> state                         one seed
    train(state, ticks) -> (state, metrics)    a scan over absolute tick indices
    evaluate(state, key) -> (state, metrics)   fresh episodes with the eval policy
    counters(state) -> dict                    timestep, env_frames, Train/n_updates
    ticks_for(env_steps) -> int                ticks that take ``env_steps`` env steps

:class:`AgentEntry` tells the launcher how to build one from its frozen config, which
``model_size`` options belong to it, which envs it accepts and how to check its
training metrics on the host. The heavy agent modules are imported only when an agent
is built, so resolving and validating configs stays fast.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import Any

from agents.tdmpc2.config import MODEL_SIZES as TDMPC2_SIZES
from agents.tdmpc2.config import TDMPC2Config


@dataclasses.dataclass(frozen=True)
class AgentEntry:
    """How the launcher builds and checks one agent.

    Attributes:
      name: the ``agent.name`` in ``conf/agent/<name>.yaml``.
      config_cls: the agent's frozen config dataclass.
      model_sizes: ``model_size`` option name -> preset value given to the config's
        ``model_size`` field (``tdmpc2_5`` -> 5).
      factory: ``"module:attr"`` of ``(config, env, total_env_steps) -> agent``.
      metrics_check: ``"module:attr"`` of a host check ``(metrics) -> None`` run after
        every train chunk (raises ValueError on invalid data, e.g. terminations), or None.
      launcher_fields: config fields set by the launcher from the protocol, never from
        ``agent.*`` (e.g. ``eval_episodes``), plus internal flags.
      continuous_only: refuses discrete-action envs.
      fixed_length_only: refuses envs that can terminate.
      bounds: field -> inclusive (low, high) (None: unbounded) checked when the config
        is resolved; a value of None (a derived default) is not checked.
    """

    name: str
    config_cls: type
    model_sizes: Mapping[str, Any]
    factory: str
    metrics_check: str | None = None
    launcher_fields: tuple[str, ...] = ()
    continuous_only: bool = False
    fixed_length_only: bool = False
    bounds: Mapping[str, tuple[float | None, float | None]] = dataclasses.field(
        default_factory=dict
    )

    def make(self, config: Any, env: Any, total_env_steps: int) -> Any:
        """Build the agent (imports its module now)."""
        return _load(self.factory)(config, env, total_env_steps)

    def check_metrics(self, metrics: Mapping[str, Any]) -> None:
        """Run the agent's host-side metrics check, if it has one."""
        if self.metrics_check is not None:
            _load(self.metrics_check)(metrics)

    def accepts(self, discrete: bool, can_terminate: bool) -> bool:
        """Whether an env with these facts suits the agent."""
        return not (self.continuous_only and discrete) and not (
            self.fixed_length_only and can_terminate
        )


def _load(path: str) -> Callable[..., Any]:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


TDMPC2_ENTRY = AgentEntry(
    name="tdmpc2",
    config_cls=TDMPC2Config,
    model_sizes={f"tdmpc2_{s}": s for s in TDMPC2_SIZES},
    factory="agents.tdmpc2.agent:TDMPC2",
    metrics_check="agents.tdmpc2.agent:check_no_terminations",
    launcher_fields=("model_size", "eval_episodes", "resolved"),
    continuous_only=True,
    fixed_length_only=True,
    bounds={
        **{
            f: (1, None)
            for f in (
                "enc_dim",
                "mlp_dim",
                "latent_dim",
                "num_enc_layers",
                "num_q",
                "simnorm_dim",
                "num_bins",
                "horizon",
                "batch_size",
                "buffer_size",
                "seed_steps",
                "iterations",
                "num_samples",
                "num_elites",
                "n_envs",
            )
        },
        "num_pi_trajs": (0, None),
        "vmax": (0, None),
        "dropout": (0, 1),
        "rho": (0, 1),
        "tau": (0, 1),
        "gamma": (0, 1),
        "discount_min": (0, 1),
        "discount_max": (0, 1),
        "discount_denom": (0, None),
        "learning_rate": (0, None),
        "enc_lr_scale": (0, None),
        "grad_clip_norm": (0, None),
        "temperature": (0, None),
        "min_std": (0, None),
        "max_std": (0, None),
    },
)

# The registered agents. Read-only: tests pass their own mapping to the functions that
# take an ``agents=`` argument instead of changing this one.
AGENTS: Mapping[str, AgentEntry] = {"tdmpc2": TDMPC2_ENTRY}

# model_size options of agents not implemented yet (conf/model_size/dreamerv3_*.yaml), so
# that choosing one with another agent names the right owner.
FUTURE_MODEL_SIZES: Mapping[str, str] = {
    f"dreamerv3_{s}": "dreamerv3" for s in ("1m", "12m", "25m", "50m", "100m", "200m", "400m")
}
