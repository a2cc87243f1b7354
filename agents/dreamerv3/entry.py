"""DreamerV3's launcher entry: config class, model-size presets, env requirements, costs.

Bounds and cross-field rules live on the config's fields (agents/dreamerv3/config.py).

Named by ``conf/agent/dreamerv3.yaml`` (``entry: agents.dreamerv3.entry:ENTRY``). Importing
this module imports no JAX; the agent (:mod:`agents.dreamerv3.agent`) is imported only
when a run builds it.
"""

from __future__ import annotations

from agent_api import AgentEntry, AgentTables, EnvRequirements
from agents.dreamerv3.config import MODEL_SIZES, DreamerV3Config
from agents.dreamerv3.cost import ACCELERATOR, accelerator_cost, cpu_cost
from agents.dreamerv3.paper import PAPER, PAPER_VISION

ENTRY = AgentEntry(
    name="dreamerv3",
    config_cls=DreamerV3Config,
    model_sizes={f"dreamerv3_{s}": s for s in MODEL_SIZES},
    factory="agents.dreamerv3.agent:DreamerV3",
    # The stream replay takes any episode end: discrete and terminating envs run.
    requirements=EnvRequirements(),
    tables=AgentTables(
        paper=PAPER,
        more_papers=(PAPER_VISION,),  # DMC vision: env.obs=image runs (protocol=dmc_vision)
        # What a run costs on a CPU under the composed config (the train ratio's updates
        # per row, batch x length, model size, envs, evaluation): agents/dreamerv3/cost.py.
        cpu_cost=cpu_cost,
        # Learns within the quick protocol on a CPU (docs/PERFORMANCE.md "DreamerV3 agent:
        # quick run"); Pendulum needs ~14k rows before its return climbs.
        cpu_sized=("env=cartpole", "protocol=quick"),
        # Measured with this project on one H200 (the 12m chunk on walker_walk;
        # agents/dreamerv3/cost.py ACCELERATOR); an image env's figure scales it by the train
        # step's FLOPs (cost.accelerator_cost: derived, not measured).
        accelerator_seconds_per_step=ACCELERATOR,
        accelerator_cost=accelerator_cost,
    ),
)
