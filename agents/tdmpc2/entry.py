"""TD-MPC2's launcher entry: config class, model-size presets, env requirements, costs.

Bounds and cross-field rules live on the config's fields (agents/tdmpc2/config.py).

Named by ``conf/agent/tdmpc2.yaml`` (``entry: agents.tdmpc2.entry:ENTRY``). Importing
this module imports no JAX; the agent itself (:mod:`agents.tdmpc2.agent`) is imported
only when a run builds it.
"""

from __future__ import annotations

from agent_api import AcceleratorCost, AgentEntry, AgentTables, EnvRequirements
from agents.tdmpc2.config import MODEL_SIZES, TDMPC2Config
from agents.tdmpc2.cost import cpu_cost
from agents.tdmpc2.multitask_config import MultiTaskConfig
from agents.tdmpc2.paper import PAPER, PAPER_PIXELS

# The reference bootstraps every episode end as a time limit (T31) and has no discrete
# policy: fixed-length, continuous-control tasks only (docs/design.md §7.4). Images too
# (env.obs=image, issue 48): 64 x 64 RGB frames, which the agent checks when it is built
# (agents/tdmpc2/pixels.py; the env facts carry no image shape).
REQUIREMENTS = EnvRequirements(continuous_actions=True, fixed_length=True)

ENTRY = AgentEntry(
    name="tdmpc2",
    config_cls=TDMPC2Config,
    model_sizes={f"tdmpc2_{s}": s for s in MODEL_SIZES},
    factory="agents.tdmpc2.agent:TDMPC2",
    requirements=REQUIREMENTS,
    launcher_fields=("model_size", "eval_episodes", "resolved"),
    tables=AgentTables(
        paper=PAPER,
        more_papers=(PAPER_PIXELS,),  # DMC pixels: env.obs=image runs (protocol=paper)
        # What a run costs on a CPU under the composed config (seed steps, updates,
        # batch, horizon, planner samples x iterations, model size, envs, evaluation):
        # agents/tdmpc2/cost.py.
        cpu_cost=cpu_cost,
        # `make run`: the eval return climbs from about -1450 to about -180 (README).
        cpu_sized=("env=pendulum", "protocol=quick"),
        # Measured with this project on one H200 (benchmarks/accelerator_check.py, the
        # whole size-5 chunk on walker_walk, 1 env, one seed; docs/PERFORMANCE.md
        # "Accelerator check"): slower than the reference author's 0.0108 s on an RTX
        # 3090 with torch.compile (nicklashansen/tdmpc2 issue #83): update + plan are
        # 4.9 ms of the 14.5; the rest (one MJX env's physics, collection, replay) is not
        # broken down yet. Other presets: unknown.
        accelerator_seconds_per_step={
            5: AcceleratorCost(
                seconds_per_step=0.0145,
                device="one NVIDIA H200 (JAX 0.11.2), 1 env",
                source="results/accelerator_gpu_20261204 (tdmpc2_chunk)",
                measured_here=True,
            )
        },
    ),
)

# Offline multi-task TD-MPC2 (docs/design.md §7.6): trains from agent.dataset on a task set
# (env=mt3_dmc, env=mt30_dmc19; envs.task_sets); n_timesteps counts updates.
MULTITASK = AgentEntry(
    name="tdmpc2_multitask",
    config_cls=MultiTaskConfig,
    model_sizes=ENTRY.model_sizes,
    factory="agents.tdmpc2.offline:make",
    requirements=EnvRequirements(
        continuous_actions=True, fixed_length=True, task_set=True, vector_observations=True
    ),
    launcher_fields=ENTRY.launcher_fields,
    model_size_owner="tdmpc2",  # the tdmpc2_<size> presets
    tables=AgentTables(
        # One update at batch 1024, one seed pinned to one core (docs/PERFORMANCE.md,
        # benchmarks/tdmpc2_offline_speed.py); an evaluation adds its episodes' decisions.
        cpu_seconds_per_step={1: 0.62, 5: 1.64},
        accelerator_seconds_per_step={},  # no figure known: a dry run says unknown
    ),
)
