"""A hand-written run dir for ``--compare paper`` tests: the identity the paper registers and
one metric value at every logged step (shared by test_compare_images.py and
test_tdmpc2_paper_pixels.py)."""

from __future__ import annotations

import json
from pathlib import Path

PROVENANCE = {"git_sha": "a" * 40, "git_dirty": False, "backend": "cpu", "devices": ["cpu"]}
# kind -> (the protocol's step between rows, the row's metric): the curve each paper compares
ROWS = {
    "train": ("log_frequency", "Train/episodic mean reward"),
    "eval": ("eval_frequency", "Eval/episodic mean reward"),
}


def fake_paper_run(path: Path, ident: dict, agent: dict, value: float, kind: str) -> Path:
    """A run dir of ``agent`` under ``ident`` whose every seed scores ``value`` in each
    ``kind`` row ("train": every chunk, "eval": every evaluation)."""
    p = ident["protocol"]
    every, key = ROWS[kind]
    (path / "metrics").mkdir(parents=True)
    run = {"identity": ident, "config": {"agent": agent}, "provenance": PROVENANCE}
    (path / "run.json").write_text(json.dumps(run))
    lines = [
        json.dumps({"kind": kind, "timestep": t, key: value})
        for t in range(0, p["n_timesteps"] + 1, p[every])
    ]
    for seed in p["seeds"]:
        (path / "metrics" / f"seed_{seed}.jsonl").write_text("\n".join(lines) + "\n")
    return path
