"""DreamerV3's launcher entry: config class, model-size presets, bounds, env requirements.

Named by ``conf/agent/dreamerv3.yaml`` (``entry: agents.dreamerv3.entry:ENTRY``). Importing
this module imports no JAX; the agent (:mod:`agents.dreamerv3.agent`) is imported only
when a run builds it.
"""

from __future__ import annotations

from agent_api import AcceleratorCost, AgentEntry, EnvRequirements
from agents.dreamerv3.config import MODEL_SIZES, DreamerV3Config
from agents.dreamerv3.cost import cpu_cost
from agents.dreamerv3.paper import PAPER

_POSITIVE = (
    "units",
    "deter",
    "hidden",
    "classes",
    "stoch",
    "blocks",
    "enc_layers",
    "dec_layers",
    "rew_layers",
    "con_layers",
    "actor_layers",
    "critic_layers",
    "img_layers",
    "obs_layers",
    "dyn_layers",
    "bins",
    "imag_horizon",
    "return_horizon",
    "batch_size",
    "batch_length",
    "replay_capacity",
    "n_envs",
)
_UNIT = ("unimix", "actor_unimix", "lam", "repval_lam", "slow_rate", "retnorm_rate", "beta1")
_NON_NEGATIVE = (
    "free_nats",
    "dyn_scale",
    "rep_scale",
    "rec_scale",
    "rew_scale",
    "con_scale",
    "actor_scale",
    "critic_scale",
    "repval_scale",
    "actent",
    "slowreg",
    "retnorm_limit",
    "minstd",
    "maxstd",
    "learning_rate",
    "agc",
    "agc_pmin",
    "eps",
    "warmup",
    "train_ratio",
)

ENTRY = AgentEntry(
    name="dreamerv3",
    config_cls=DreamerV3Config,
    model_sizes={f"dreamerv3_{s}": s for s in MODEL_SIZES},
    factory="agents.dreamerv3.agent:DreamerV3",
    # The stream replay takes any episode end: discrete and terminating envs run.
    requirements=EnvRequirements(),
    bounds={
        **{f: (1, None) for f in _POSITIVE},
        **{f: (0, 1) for f in _UNIT},
        "beta2": (0, 1),
        **{f: (0, None) for f in _NON_NEGATIVE},
    },
    # What a run costs on a CPU under the composed config (the train ratio's updates per
    # row, batch x length, model size, envs, evaluation): agents/dreamerv3/cost.py.
    cpu_cost=cpu_cost,
    # Measured with this project on one H200 (benchmarks/accelerator_check.py, the whole
    # 12m chunk on walker_walk, 16 envs, one seed; docs/PERFORMANCE.md "Accelerator
    # check"). The 1m preset was not timed: a dry run says unknown.
    accelerator_seconds_per_step={
        "12m": AcceleratorCost(
            seconds_per_step=0.0122,
            device="one NVIDIA H200 (JAX 0.11.2), 16 envs",
            source="benchmarks/results/accelerator_gpu_20261204 (dv3_chunk)",
            measured_here=True,
        )
    },
    paper=PAPER,
)
