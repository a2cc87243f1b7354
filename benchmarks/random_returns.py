"""The uniform-random policy's episode return per env: the ``random`` levels of
``envs/returns.py`` (the learning-curve report draws them).

    .venv/bin/python benchmarks/random_returns.py [--envs pendulum acrobot] [--episodes 100]

The policy and the rollout: ``benchmarks/_random_policy.py``, at each env's default time limit.
Prints one line per env: the mean return, its standard error and the min..max. DMC tasks take their
papers' action repeat (2); the others 1. ``--out DIR`` also writes ``DIR/<env>.json``: every
episode's return and, on an env with achievements (Craftax), every episode's achievement set as a
bit mask (bit k: ``spec.achievements[k]``), from which the learning checks' random Crafter-score
spread is resampled (``analysis/learning_check.py``).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "disable")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from _random_policy import random_episodes  # noqa: E402
from _random_policy import random_returns as policy_returns  # noqa: E402

import envs  # noqa: E402

GYMNAX = ["pendulum", "cartpole", "acrobot", "mountain_car", "mountain_car_continuous"]


def random_returns(env_id: str, episodes: int, seed: int = 0) -> np.ndarray:
    """[episodes] returns of the random policy on ``env_id`` (default time limit)."""
    repeat = 2 if envs.backend_of(env_id) == "playground" else 1
    env = envs.make(env_id, action_repeat=repeat)
    return np.asarray(policy_returns(env, episodes, jax.random.key(seed)))


def random_record(env_id: str, episodes: int, seed: int = 0) -> dict:
    """The JSON record of ``--out``: ``returns`` [episodes] and, on an env with achievements,
    ``achievements`` (the names) and ``unlocked_bits`` [episodes] (bit k: achievement k)."""
    env = envs.make(env_id)
    if not env.spec.achievements:
        r = random_returns(env_id, episodes, seed)
        return {"env": env_id, "episodes": episodes, "seed": seed, "returns": r.tolist()}
    returns, sets = map(np.asarray, random_episodes(env, episodes, jax.random.key(seed)))
    bits = (sets.astype(np.int64) << np.arange(sets.shape[1])).sum(axis=1)
    return {
        "env": env_id,
        "episodes": episodes,
        "seed": seed,
        "returns": np.round(returns, 4).tolist(),
        "achievements": list(env.spec.achievements),
        "unlocked_bits": bits.tolist(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=GYMNAX)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--out", default=None, help="a folder for <env>.json (every episode)")
    args = parser.parse_args()
    for env_id in args.envs:
        if args.out:
            record = random_record(env_id, args.episodes)
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / f"{env_id}.json").write_text(json.dumps(record) + "\n")
            r = np.asarray(record["returns"])
        else:
            r = random_returns(env_id, args.episodes)
        sem = r.std(ddof=1) / np.sqrt(len(r)) if len(r) > 1 else float("nan")
        print(
            f"{env_id}: random {r.mean():.1f} +- {sem:.1f} "
            f"(min {r.min():.1f}, max {r.max():.1f}; {len(r)} episodes)"
        )


if __name__ == "__main__":
    main()
