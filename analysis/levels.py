"""The levels a run's learning-curve panels draw, and what a panel lacks.

Per kind of episodes ("train", "eval"): the uniform-random policy's return and a solved
level of the env (:mod:`envs.returns`), the agent's paper score at its budget on the
panel of the paper's metric (:meth:`analysis.paper_curves.PaperCurve.final_level`), the
env's range of returns (the report's y-range), and notes: no random level measured,
no reference. :func:`panel_levels` is pure; :func:`run_levels` reads ``run.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis import paper_curves
from analysis.acceptance import RULE
from analysis.plotting import Level
from envs.returns import EpisodeReturns, episode_returns
from launcher.store.rundir import peek_run

KINDS = ("train", "eval")


@dataclass(frozen=True)
class PanelLevels:
    """A panel's levels, the env's return bounds (None: unknown), its notes and, when
    it has neither a solved level nor a paper level, the note saying so
    (``no_reference``; the report drops it where a reference curve is drawn)."""

    levels: tuple[Level, ...] = ()
    bounds: tuple[float, float] | None = None
    notes: tuple[str, ...] = ()
    no_reference: str = ""


def _frames(n: float) -> str:
    return f"{n / 1e6:g}M" if n >= 1e6 else f"{n / 1e3:g}K"


def panel_levels(
    kind: str,
    env_id: str,
    agent: str,
    returns: EpisodeReturns | None,
    paper: Any = None,
) -> PanelLevels:
    """The levels of the ``kind`` panel of a run of ``agent`` on ``env_id``: from the
    env's ``returns`` (:func:`envs.returns.episode_returns`; None: unknown) and the
    agent's ``paper`` curve on the env (a :class:`analysis.paper_curves.PaperCurve`,
    drawn on the panel of its metric; None: no published curve)."""
    levels: list[Level] = []
    notes: list[str] = []
    if returns is not None and returns.random is not None:
        levels.append(Level("random", returns.random, f"random policy: {returns.random:.0f}"))
    else:
        notes.append(f"random-policy level of {env_id}: not measured")
    if returns is not None and returns.solved is not None:
        text = f"solved ({returns.solved_note}): {returns.solved:.0f}"
        levels.append(Level("solved", returns.solved, text))
    on_panel = paper is not None and paper.metric == kind
    final = paper.final_level(RULE.window_fraction) if on_panel else None
    if final is not None:
        text = f"{agent} paper at {_frames(paper.budget_env_frames)} frames: {final:.0f}"
        levels.append(Level("reference", final, text))
    missing = ""
    if not any(lv.kind in ("solved", "reference") for lv in levels):
        if paper is not None and paper.metric != kind:
            missing = f"no reference on this panel ({agent}'s paper: {paper.metric} episodes)"
        else:
            who = f"{agent} " if agent else ""
            missing = f"no reference: no published {who}curve or solved level for {env_id}"
    bounds = (returns.low, returns.high) if returns is not None else None
    return PanelLevels(tuple(levels), bounds, tuple(notes), missing)


def run_facts(run_dir: Path | str) -> dict[str, Any]:
    """``agent`` (name), ``agent_section`` (the composed config's), ``env_id`` and
    ``episode_length`` of a run from its ``run.json`` (missing ones: None / {})."""
    data = peek_run(run_dir)
    ident = data.get("identity") if isinstance(data.get("identity"), dict) else {}
    env = ident.get("env") if isinstance(ident.get("env"), dict) else {}
    agent = ident.get("agent") if isinstance(ident.get("agent"), dict) else {}
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    section = config.get("agent") if isinstance(config.get("agent"), Mapping) else {}
    return {
        "agent": agent.get("name") or section.get("name"),
        "agent_section": dict(section),
        "env_id": env.get("id"),
        "episode_length": env.get("episode_length"),
        "identity": ident,
    }


def run_levels(run_dir: Path | str) -> dict[str, PanelLevels]:
    """kind -> :class:`PanelLevels` of a run directory (from its ``run.json``; a run
    without one gets notes only)."""
    facts = run_facts(run_dir)
    env_id, agent = facts["env_id"], facts["agent"] or ""
    if env_id is None:
        note = "env unknown (no run.json): no levels"
        return {k: PanelLevels(notes=(note,), no_reference="no reference") for k in KINDS}
    returns = episode_returns(env_id, facts["episode_length"])
    obs = (facts["identity"].get("env") or {}).get("obs", "vector")
    section = facts["agent_section"]
    paper = paper_curves.curve(section, env_id, obs) if section else None
    return {k: panel_levels(k, env_id, agent, returns, paper) for k in KINDS}
