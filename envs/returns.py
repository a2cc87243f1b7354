"""What an env's episode returns can be: their range, a uniform-random policy's level and,
where one is known, a "solved" level. Read by the learning-curve report to draw those
levels and to keep its y-range meaningful; imports no simulator.

    returns = envs.returns.episode_returns("acrobot")      # EpisodeReturns or None
    returns.low, returns.high, returns.random, returns.solved  # -500, 0, -499.3, -100

* Range: the per-backend-step reward bounds times the time limit in backend steps
  (rewards are summed over an action repeat), plus a one-off goal bonus where the env has
  one. DM Control tasks reward [0, 1] per step (0..1000 at the default 1000 steps).
* Random level: the mean episode return of the launcher's random policy (uniform
  actions in agent units, as the row collector's seed phase) at the default time limit,
  measured by ``benchmarks/random_returns.py`` (its output is the table below); None
  where not measured, or when the run's time limit is not the default.
* Solved level: Gym's registered reward threshold of the classic-control task that the
  gymnax env reimplements, or this project's learning-check bar (benchmarks/
  learning_checks.py), as the note says; None where neither exists.

brax envs' rewards have no fixed bounds (velocities, costs): they have no entry.
"""

from __future__ import annotations

import dataclasses
import math

from envs.gymnax_backend import GYMNAX_FACTS
from envs.playground_backend import PLAYGROUND_FACTS
from envs.probes import PROBE_FACTS


@dataclasses.dataclass(frozen=True)
class RewardFacts:
    """Per-backend-step reward bounds and the levels measured at the default time limit.

    Attributes:
      step_low, step_high: the reward of one backend step lies in [step_low, step_high].
      bonus: a one-off reward on reaching the goal (MountainCarContinuous: +100).
      random: the random policy's mean return at the default time limit (None: unknown).
      solved: a level called solved (None: none known); ``solved_note`` says whose.
    """

    step_low: float
    step_high: float
    bonus: float = 0.0
    random: float | None = None
    solved: float | None = None
    solved_note: str = ""


@dataclasses.dataclass(frozen=True)
class EpisodeReturns:
    """An env's episode returns under one time limit: ``low..high`` bounds every return;
    ``random`` and ``solved`` are levels (None: unknown), ``solved_note`` names the source
    of ``solved``."""

    env_id: str
    low: float
    high: float
    random: float | None
    solved: float | None
    solved_note: str

    @property
    def span(self) -> float:
        """high - low: the width of the range of returns."""
        return self.high - self.low


GYM_THRESHOLD = "Gym's reward threshold"
CHECK_BAR = "this project's learning-check bar"
# Pendulum-v1: -(theta^2 + 0.1 theta_dot^2 + 0.001 u^2), |theta| <= pi, |theta_dot| <= 8,
# |u| <= 2: the worst step is -(pi^2 + 6.4 + 0.004).
_PENDULUM_WORST = -(math.pi**2 + 6.4 + 0.004)

# env id -> reward facts. ``random``: benchmarks/random_returns.py, 100 episodes per env
# (2026-12-04, CPU: pendulum -1230.8 +- 31.0, cartpole 23.1 +- 1.2, acrobot -498.9 +- 0.7,
# mountain_car -200.0, mountain_car_continuous -33.3 +- 0.1; mean +- standard error).
REWARDS: dict[str, RewardFacts] = {
    "pendulum": RewardFacts(
        _PENDULUM_WORST, 0.0, random=-1230.8, solved=-400.0, solved_note=CHECK_BAR
    ),
    "cartpole": RewardFacts(0.0, 1.0, random=23.1, solved=475.0, solved_note=GYM_THRESHOLD),
    "acrobot": RewardFacts(-1.0, 0.0, random=-498.9, solved=-100.0, solved_note=GYM_THRESHOLD),
    "mountain_car": RewardFacts(-1.0, 0.0, random=-200.0, solved=-110.0, solved_note=GYM_THRESHOLD),
    "mountain_car_continuous": RewardFacts(
        -0.1, 0.0, bonus=100.0, random=-33.3, solved=90.0, solved_note=GYM_THRESHOLD
    ),
    "probe_constant_reward": RewardFacts(
        1.0, 1.0, random=float(PROBE_FACTS["probe_constant_reward"].default_episode_length)
    ),
    "probe_reward_is_action": RewardFacts(-1.0, 1.0, random=0.0),
    "probe_pixel_point": RewardFacts(0.0, 1.0),  # 1 - |p| / sqrt(2) (envs/probes.py)
    **{env_id: RewardFacts(0.0, 1.0) for env_id in PLAYGROUND_FACTS},
}
# its learning check's bar (benchmarks/learning_checks.py); its random level is the one
# measured for the DreamerV3 quick run (docs/VALIDATION.md §6; action repeat 2)
REWARDS["cartpole_balance"] = RewardFacts(
    0.0, 1.0, random=323.6, solved=800.0, solved_note=CHECK_BAR
)


def _default_limit(env_id: str) -> int | None:
    for table in (GYMNAX_FACTS, PLAYGROUND_FACTS, PROBE_FACTS):
        if env_id in table:
            return table[env_id].default_episode_length
    return None


def episode_returns(env_id: str, episode_length: int | None = None) -> EpisodeReturns | None:
    """The returns of ``env_id`` under a time limit of ``episode_length`` backend steps
    (None: the env's default); None for an env without reward facts (brax, task sets,
    unknown ids). Random and solved levels are given at the default time limit only."""
    facts, default = REWARDS.get(env_id), _default_limit(env_id)
    if facts is None or default is None:
        return None
    limit = default if episode_length is None else int(episode_length)
    same = limit == default
    return EpisodeReturns(
        env_id=env_id,
        low=facts.step_low * limit,
        high=facts.step_high * limit + facts.bonus,
        random=facts.random if same else None,
        solved=facts.solved if same else None,
        solved_note=facts.solved_note if same and facts.solved is not None else "",
    )
