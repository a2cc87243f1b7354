"""The uniform-random policy's episode return per env: the ``random`` levels of
``envs/returns.py`` (the learning-curve report draws them).

    .venv/bin/python benchmarks/random_returns.py [--envs pendulum acrobot] [--episodes 100]

The policy and the rollout: ``benchmarks/_random_policy.py``, at each env's default time limit.
Prints one line per env: the mean return, its standard error and the min..max. DMC tasks take their
papers' action repeat (2); the others 1.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MUJOCO_GL", "disable")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from _random_policy import random_returns as policy_returns  # noqa: E402

import envs  # noqa: E402

GYMNAX = ["pendulum", "cartpole", "acrobot", "mountain_car", "mountain_car_continuous"]


def random_returns(env_id: str, episodes: int, seed: int = 0) -> np.ndarray:
    """[episodes] returns of the random policy on ``env_id`` (default time limit)."""
    repeat = 2 if envs.backend_of(env_id) == "playground" else 1
    env = envs.make(env_id, action_repeat=repeat)
    return np.asarray(policy_returns(env, episodes, jax.random.key(seed)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=GYMNAX)
    parser.add_argument("--episodes", type=int, default=100)
    args = parser.parse_args()
    for env_id in args.envs:
        r = random_returns(env_id, args.episodes)
        sem = r.std(ddof=1) / np.sqrt(len(r)) if len(r) > 1 else float("nan")
        print(
            f"{env_id}: random {r.mean():.1f} +- {sem:.1f} "
            f"(min {r.min():.1f}, max {r.max():.1f}; {len(r)} episodes)"
        )


if __name__ == "__main__":
    main()
