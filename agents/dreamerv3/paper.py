"""DreamerV3's published DMC-proprio curves (danijar/dreamerv3 2411f7d
``scores/dmc_proprio-dreamerv3.json.gz``): the task map and the table derived from them
(``paper_curves.json`` here; rebuilt by ``python -m analysis paper-curves build --agent
dreamerv3 --src reference_results``); and its DMC-vision curves (:data:`PAPER_VISION`).

The file holds, per task and seed (0-4), the mean score of the training episodes (the
stochastic policy) that ended in each 10K-frame bin, 10K..490K env frames (action repeat
2); budget 500K env frames. The same map is listed in sweeps/sweep/dreamerv3_paper_dmc.yaml.
"""

from __future__ import annotations

from agent_api import PaperReference

_SAME_NAME = (
    "acrobot_swingup", "cartpole_balance", "cartpole_balance_sparse", "cartpole_swingup",
    "cartpole_swingup_sparse", "cheetah_run", "finger_spin", "finger_turn_easy",
    "finger_turn_hard", "hopper_hop", "hopper_stand", "pendulum_swingup", "reacher_easy",
    "reacher_hard", "walker_run", "walker_stand", "walker_walk",
)  # fmt: skip
# Reference task -> env id: all 18 tasks of the file.
TASKS: dict[str, str] = {
    "dmc_ball_in_cup_catch": "cup_catch",
    **{f"dmc_{t}": t for t in _SAME_NAME},
}

PAPER = PaperReference(
    table="agents.dreamerv3:paper_curves.json",
    source="danijar/dreamerv3 2411f7d scores/dmc_proprio-dreamerv3.json.gz",
    reader="scores_json_gz",
    files="dreamerv3/dmc_proprio-dreamerv3.json.gz",
    tasks=TASKS,
    metric="train",
    budget_env_frames=500_000,
    method="dreamerv3",
)

# The DMC-vision curves (``scores/dmc_vision-dreamerv3.json.gz`` at the same commit, 921 KB,
# not shipped: build with --src pointing at the reference's scores/ folder). The file holds
# one point per training episode (x its env frame, action repeat 2) for 20 tasks x 10 seeds
# (finger_turn_hard 9, reacher_hard 8) up to 1M env frames; the table averages each seed's
# episodes per 20K-frame bin and rounds the scores to 0.01: a 129 KB table. Runs:
# ``protocol=dmc_vision`` (``env.obs=image``).
VISION_NO_COUNTERPART = ("dmc_quadruped_run", "dmc_quadruped_walk")
PAPER_VISION = PaperReference(
    table="agents.dreamerv3:paper_curves_dmc_vision.json",
    source="danijar/dreamerv3 2411f7d scores/dmc_vision-dreamerv3.json.gz",
    reader="scores_json_gz",
    files="dmc_vision-dreamerv3.json.gz",
    tasks=TASKS,
    no_counterpart=VISION_NO_COUNTERPART,
    metric="train",
    budget_env_frames=1_000_000,
    method="dreamerv3",
    obs="image",
    protocol="dmc_vision",
    bin_frames=20_000,
    decimals=2,
)
