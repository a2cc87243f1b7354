"""TD-MPC2's published DMControl curves (nicklashansen/tdmpc2 b67b21c ``results/*.csv``):
which of its tasks our registry has, and the table derived from them
(``paper_curves.json`` here; rebuilt by ``python -m analysis paper-curves build --agent
tdmpc2 --src reference_results``).

The CSVs hold the mean return of 10 eval-mode episodes every 100K env frames (action
repeat 2), seeds 1-3; budget 4M env frames, 14M for humanoid (and dog, which Playground
lacks). Their DMC-pixels curves: :data:`PAPER_PIXELS`.
"""

from __future__ import annotations

from agent_api import PaperReference

# CSV stem -> env id: the 22 DMC tasks MuJoCo Playground implements.
TASKS: dict[str, str] = {
    "acrobot-swingup": "acrobot_swingup",
    "cartpole-balance": "cartpole_balance",
    "cartpole-balance-sparse": "cartpole_balance_sparse",
    "cartpole-swingup": "cartpole_swingup",
    "cartpole-swingup-sparse": "cartpole_swingup_sparse",
    "cheetah-run": "cheetah_run",
    "cup-catch": "cup_catch",
    "finger-spin": "finger_spin",
    "finger-turn-easy": "finger_turn_easy",
    "finger-turn-hard": "finger_turn_hard",
    "fish-swim": "fish_swim",
    "hopper-hop": "hopper_hop",
    "hopper-stand": "hopper_stand",
    "humanoid-run": "humanoid_run",
    "humanoid-stand": "humanoid_stand",
    "humanoid-walk": "humanoid_walk",
    "pendulum-swingup": "pendulum_swingup",
    "reacher-easy": "reacher_easy",
    "reacher-hard": "reacher_hard",
    "walker-run": "walker_run",
    "walker-stand": "walker_stand",
    "walker-walk": "walker_walk",
}
# The CSVs of tasks Playground does not implement (custom mt30 tasks, dog, quadruped).
NO_COUNTERPART: tuple[str, ...] = (
    "cheetah-jump", "cheetah-run-back", "cheetah-run-backwards", "cheetah-run-front",
    "cup-spin", "dog-run", "dog-stand", "dog-trot", "dog-walk", "hopper-hop-backwards",
    "pendulum-spin", "quadruped-run", "quadruped-walk", "reacher-three-easy",
    "reacher-three-hard", "walker-run-backwards", "walker-walk-backwards",
)  # fmt: skip

PAPER = PaperReference(
    table="agents.tdmpc2:paper_curves.json",
    source="nicklashansen/tdmpc2 b67b21c results/*.csv",
    reader="csv_per_task",
    files="tdmpc2",
    tasks=TASKS,
    no_counterpart=NO_COUNTERPART,
    metric="eval",
    budget_env_frames=4_000_000,
    budgets={t: 14_000_000 for t in ("humanoid_run", "humanoid_stand", "humanoid_walk")},
)

# The DMC-pixels curves (``obs=rgb`` in the reference: 64 x 64 renders, 3 stacked), added
# upstream after b67b21c by 88095e7 (``results/tdmpc2-pixels/*.csv``, unchanged since; not
# shipped: build with --src pointing at the reference checkout's ``results/`` folder). The
# same ``step,reward,seed`` format as the state CSVs: ``step`` in env frames (action repeat
# 2; the state files' dog-run ends at 14M for the README's ``steps=7000000``), ``reward``
# the mean return of the eval-mode episodes (``eval_episodes: 10``, tdmpc2/config.yaml:10);
# seeds 1-3, 21 points each at 0..2M env frames every 100K, on 12 tasks. The budget is that
# span, 2M env frames = 1M agent steps: at 88095e7 tdmpc2/config.yaml:14 (``steps:
# 10_000_000``) and README.md:85,112 (``obs=rgb``, no steps) name none for pixels.
# Runs: ``env.obs=image protocol=paper protocol.n_timesteps=1000000``.
PIXEL_TASKS: dict[str, str] = {
    t: TASKS[t]
    for t in (
        "acrobot-swingup", "cartpole-swingup-sparse", "cheetah-run", "finger-spin",
        "finger-turn-easy", "finger-turn-hard", "reacher-easy", "reacher-hard", "walker-run",
        "walker-walk",
    )
}  # fmt: skip
PAPER_PIXELS = PaperReference(
    table="agents.tdmpc2:paper_curves_pixels.json",
    source="nicklashansen/tdmpc2 88095e7 results/tdmpc2-pixels/*.csv",
    reader="csv_per_task",
    files="tdmpc2-pixels",
    tasks=PIXEL_TASKS,
    no_counterpart=("quadruped-run", "quadruped-walk"),  # Playground has no quadruped
    metric="eval",
    budget_env_frames=2_000_000,
    obs="image",
)
