"""DreamerV3's launcher entry: config class, model-size presets, env requirements, costs.

Bounds and cross-field rules live on the config's fields (agents/dreamerv3/config.py).

Named by ``conf/agent/dreamerv3.yaml`` (``entry: agents.dreamerv3.entry:ENTRY``). Importing
this module imports no JAX; the agent (:mod:`agents.dreamerv3.agent`) is imported only
when a run builds it.
"""

from __future__ import annotations

from agent_api import AcceleratorCost, AgentEntry, AgentTables, EnvRequirements
from agents.dreamerv3.config import MODEL_SIZES, DreamerV3Config
from agents.dreamerv3.cost import cpu_cost
from agents.dreamerv3.paper import PAPER

ENTRY = AgentEntry(
    name="dreamerv3",
    config_cls=DreamerV3Config,
    model_sizes={f"dreamerv3_{s}": s for s in MODEL_SIZES},
    factory="agents.dreamerv3.agent:DreamerV3",
    # The stream replay takes any episode end: discrete and terminating envs run.
    requirements=EnvRequirements(),
    tables=AgentTables(
        paper=PAPER,
        # What a run costs on a CPU under the composed config (the train ratio's updates
        # per row, batch x length, model size, envs, evaluation): agents/dreamerv3/cost.py.
        cpu_cost=cpu_cost,
        # Learns within the quick protocol on a CPU (docs/PERFORMANCE.md "DreamerV3 agent:
        # quick run"); Pendulum needs ~14k rows before its return climbs.
        cpu_sized=("env=cartpole", "protocol=quick"),
        # Measured with this project on one H200 (benchmarks/accelerator_check.py, the
        # whole 12m chunk on walker_walk, 16 envs, one seed; docs/PERFORMANCE.md
        # "Accelerator check"). The 1m preset was not timed: a dry run says unknown. Measured
        # in float32: runs now compute in bfloat16 there (compute_dtype auto, D30), so until
        # the next check times it this figure is an upper bound.
        accelerator_seconds_per_step={
            "12m": AcceleratorCost(
                seconds_per_step=0.0122,
                device="one NVIDIA H200 (JAX 0.11.2), 16 envs, float32",
                source="results/accelerator_gpu_20261204 (dv3_chunk)",
                measured_here=True,
            )
        },
    ),
)
