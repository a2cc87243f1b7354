"""The paper's curve as logger rows: the launcher's default ``reference_rows`` hook.

``conf/config.yaml`` names :func:`paper_rows` under ``callbacks.reference_rows``; the
launcher loads it by import path (:mod:`launcher.loop.callbacks`, like any user hook) and logs
its rows once per run to each seed's W&B run and to TensorBoard's ``paper/`` run, so the
run loop itself imports nothing of this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis import paper_curves


def wandb_reference_rows(
    agent: Mapping[str, Any],
    env_id: str,
    action_repeat: int,
    upto_frames: float | None = None,
    obs: str = "vector",
) -> list[dict[str, float]]:
    """The paper curve on ``env_id`` of the agent of a composed ``agent`` section as W&B
    rows (``Paper/<metric> episodic mean reward (mean)``, ``(min)``, ``(max)`` over its
    seeds), on the run's ``timestep`` axis (env frames / the run's action repeat); []
    without a curve. ``upto_frames`` (the run's span, n_timesteps x action repeat): the
    points up to it and at most one past it, so a short run's dashboard is not stretched
    to the paper's budget. ``obs``: the run's observation mode (the paper's curves of it)."""
    ref = paper_curves.curve(agent, env_id, obs)
    if ref is None:
        return []
    x, mean, lo, hi = ref.mean_band(upto_frames)
    name = f"Paper/{ref.metric} episodic mean reward"
    return [
        {
            "timestep": float(xv) / action_repeat,
            "env_frames": float(xv),
            f"{name} (mean)": float(m),
            f"{name} (min)": float(a),
            f"{name} (max)": float(b),
        }
        for xv, m, a, b in zip(x, mean, lo, hi, strict=True)
    ]


def paper_rows(spec: Any) -> list[dict[str, float]]:
    """The ``reference_rows`` hook: the paper's curve of a run (a
    :class:`launcher.config.schema.RunSpec`) on its env, up to the run's end in env frames
    (``n_timesteps`` x action repeat); [] for an agent or env without a published curve."""
    agent = spec.config.get("agent")
    if not isinstance(agent, Mapping):
        return []
    repeat = spec.env.action_repeat
    upto = spec.protocol.n_timesteps * repeat
    obs = getattr(spec.env, "obs", "vector")
    return wandb_reference_rows(agent, spec.env.id, repeat, upto_frames=upto, obs=obs)
