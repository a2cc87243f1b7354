"""``python -m analysis RUN_A RUN_B ...``: several runs in one figure.

Each argument is a run directory (it holds ``metrics/``) or a directory with run
directories below it (a sweep, a multirun: those with a ``run.json``, up to three levels
down). The runs are grouped by env: one row of panels per env (training episodes,
evaluation episodes), one labelled line per run: its seeds' mean (its one seed) and the
seeds' min..max band, the levels of :mod:`analysis.levels`. A run's label is its agent
and protocol (the row's panels name the env), then up to two identity keys (``run.json``)
in which it differs from the other runs on its env (two configs:
``agent.num_samples=256``; seeds launched separately: ``protocol.seeds=[1]``), leaving out
what follows from another agent or protocol (:func:`differing_keys`, issue 44: TD-MPC2
against DreamerV3 was 87 keys), and its directory's name where that still leaves two
alike. Each panel's legend lies under it (:func:`analysis.plotting.overlay_figure`).

Writes ``--out``, by default ``<the runs' common parent>/plots/overlay_<hash>.png`` (the
hash names the set of runs and the x axis, so another set does not overwrite it).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.levels import run_facts
from analysis.plotting import OverlayPanel, PanelSeries, RunLine, overlay_figure
from analysis.report import panel_series
from launcher.config.identity import flatten, plain
from launcher.errors import ConfigError
from launcher.store.rundir import RunDir, find_runs

MAX_KEYS = 2  # differing keys shown in a label (then "+N more"): a legend line fits a panel
KIND_TITLES = {"train": "training episodes", "eval": "evaluation episodes"}


def expand_runs(paths: Sequence[Path | str]) -> list[Path]:
    """The run directories named by ``paths`` (a run directory, or one with run
    directories below it), in order, each once.

    Raises:
      ConfigError: a path that does not exist, or a directory without metrics or runs.
    """
    runs: list[Path] = []
    for path in map(Path, paths):
        if RunDir(path).metrics.is_dir():
            found = [path]
        elif not path.is_dir():
            raise ConfigError(f"{path}: no such run directory")
        else:
            found = find_runs(path)
            if not found:
                raise ConfigError(
                    f"{path}: no metrics files (metrics/seed_<s>.jsonl) and no run "
                    f"directories below it; give a run directory (runs/<agent>-<env>-...)"
                )
        runs += [p for p in found if p.resolve() not in {r.resolve() for r in runs}]
    return runs


def _value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


_UNSET = object()  # a key a run's identity lacks (added later, at its default)


def _key(v: Any) -> str:
    """A comparable form of an identity value (lists, numbers, None, the unset marker)."""
    return "<unset>" if v is _UNSET else json.dumps(v, default=str)


def _protocol(flat: dict[str, Any]) -> str | None:
    name = flat.get("protocol.name")
    return name if isinstance(name, str) else None


def _follows(key: str, a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
    """Whether ``key``'s difference between two runs of (agent, protocol) ``a`` and ``b``
    follows from those: another agent has other agent keys, and another protocol other
    protocol keys and agent keys (``agent_protocol/<agent>_<protocol>.yaml``)."""
    if a[1] != b[1]:
        return key.startswith(("agent.", "protocol."))
    return a[0] != b[0] and key.startswith("agent.")


def differing_keys(facts: Sequence[dict[str, Any]]) -> list[str]:
    """The identity keys (sorted) worth naming in the labels of these runs: those in which
    two runs of one agent and protocol differ (a key one of them lacks: ``unset``), and
    those, held by both, in which two runs of different agents or protocols differ beyond
    what that explains (:func:`_follows`: not TD-MPC2's 87 keys against DreamerV3's). The
    agent, env and protocol names are left out: the label's base names them."""
    runs = [
        (flat, (flat.get("agent.name"), _protocol(flat)))
        for flat in (flatten(plain(f["identity"])) for f in facts if f["identity"])
    ]
    named = {"agent.name", "env.id", "protocol.name"}
    keys: set[str] = set()
    for (a, kind_a), (b, kind_b) in itertools.combinations(runs, 2):
        alike = kind_a == kind_b
        for k in (a.keys() | b.keys()) - named - keys:
            if not alike and (k not in a or k not in b or _follows(k, kind_a, kind_b)):
                continue
            if _key(a.get(k, _UNSET)) != _key(b.get(k, _UNSET)):
                keys.add(k)
    return sorted(keys)


def run_labels(facts: Sequence[dict[str, Any]], names: Sequence[str]) -> list[str]:
    """A legend label per run (``facts``: :func:`analysis.levels.run_facts`; ``names``:
    the run directories' names): ``<agent> <protocol>`` (the env is the panel's title),
    then ``key=value`` for at most :data:`MAX_KEYS` of :func:`differing_keys` (``key
    unset`` where it lacks one that a run of its agent and protocol has: DreamerV3 has no
    ``agent.num_samples``), then the directory name where two labels would still be alike;
    a run without ``run.json`` is its directory name."""
    keys = differing_keys(facts)
    flats = [flatten(plain(f["identity"])) for f in facts]
    kinds = [(flat.get("agent.name"), _protocol(flat)) for flat in flats]
    labels = []
    for f, flat, kind, name in zip(facts, flats, kinds, names, strict=True):
        if not f["identity"]:
            labels.append(name)
            continue
        base = " ".join(filter(None, [f["agent"] or "unknown agent", _protocol(flat)]))
        # a key this run lacks is news only beside a run of its agent and protocol that has it
        kin = [other for other, its in zip(flats, kinds, strict=True) if its == kind]
        parts = [
            f"{k}={_value(flat[k])}" if k in flat else f"{k} unset"
            for k in keys
            if k in flat or any(k in other for other in kin)
        ]
        if len(parts) > MAX_KEYS:
            parts = [*parts[:MAX_KEYS], f"+{len(parts) - MAX_KEYS} more"]
        labels.append(f"{base}: {', '.join(parts)}" if parts else base)
    return [
        f"{label} ({name})" if labels.count(label) > 1 else label
        for label, name in zip(labels, names, strict=True)
    ]


def _line(label: str, panel: PanelSeries) -> RunLine:
    """A run's line on one panel: its seeds' mean, or its one (first) seed."""
    n = len(panel.seeds)
    first = next(iter(panel.seeds.values()), [])
    points = panel.mean or first
    shown = f"{label} (mean of {n} seeds)" if panel.mean else label
    return RunLine(shown, list(points), list(panel.band), n, key=label)


def _whose(note: str, labels: list[str], n_runs: int) -> str:
    """A panel note, naming the runs it is about when it is not about all of them (a
    smoke run's 20-step episodes have no measured random level, a quick run's have)."""
    return note if len(labels) == n_runs else f"{note} ({'; '.join(labels)})"


def _merge(kind: str, title: str, items: list[tuple[str, PanelSeries]]) -> OverlayPanel:
    """One env's panel of one kind from each run's :class:`PanelSeries`."""
    panels = [p for _, p in items]
    levels = list(dict.fromkeys(lv for p in panels for lv in p.levels))
    ref = next((p.reference for p in panels if p.reference is not None), None)
    referenced = ref is not None or any(lv.kind != "random" for lv in levels)
    notes = [
        _whose(n, [label for label, p in items if n in p.notes], len(items))
        for n in dict.fromkeys(n for p in panels for n in p.notes)
        if not (referenced and n.startswith("no reference"))
    ]
    fallback = next((p for p in panels if p.frames_fallback), panels[0])
    return OverlayPanel(
        kind=kind,
        title=title,
        ylabel=panels[0].ylabel,
        xlabel=fallback.xlabel,
        runs=[_line(label, p) for label, p in items if p.seeds],
        reference=ref,
        levels=levels,
        bounds=next((p.bounds for p in panels if p.bounds is not None), None),
        notes=notes,
    )


def overlay_panels(
    runs: Sequence[Path],
    x: str = "env_frames",
    reference: Path | str | None = None,
    label: str | None = None,
) -> list[list[OverlayPanel]]:
    """One row per env (in the runs' order): its training and evaluation panels.

    Raises:
      ConfigError: a run's metrics missing, a bad ``x`` or reference, or a reference
        (one env's curve) with runs on several envs.
    """
    facts = [run_facts(r) for r in runs]
    envs = list(dict.fromkeys(f["env_id"] or "unknown env" for f in facts))
    if reference is not None and len(envs) > 1:
        raise ConfigError(
            f"--reference is one env's curve and these runs are on {len(envs)} envs "
            f"({', '.join(envs)}); overlay runs of one env with it"
        )
    series = [panel_series(r, x=x, reference=reference, label=label) for r in runs]
    rows = []
    for env in envs:
        mine = [i for i, f in enumerate(facts) if (f["env_id"] or "unknown env") == env]
        labels = dict(
            zip(
                mine,
                run_labels([facts[i] for i in mine], [runs[i].name for i in mine]),
                strict=True,
            )
        )
        rows.append(
            [
                _merge(
                    panel.kind,
                    f"{env}: {KIND_TITLES.get(panel.kind, panel.kind)}",
                    [(labels[i], series[i][k]) for i in mine],
                )
                for k, panel in enumerate(series[mine[0]])
            ]
        )
    return rows


def default_out(runs: Sequence[Path], x: str) -> Path:
    """``<common parent>/plots/overlay_<8 hex of the runs and x>.png``."""
    resolved = [str(r.resolve()) for r in runs]
    parent = Path(os.path.commonpath([str(Path(r).parent) for r in resolved]))
    digest = hashlib.sha256("\n".join([x, *sorted(resolved)]).encode()).hexdigest()[:8]
    return parent / "plots" / f"overlay_{digest}.png"


def plot_overlay(
    runs: Sequence[Path | str],
    out: Path | str | None = None,
    *,
    x: str = "env_frames",
    reference: Path | str | None = None,
    label: str | None = None,
) -> Path:
    """Write the overlay PNG of ``runs`` (default :func:`default_out`); its path.

    Raises:
      ConfigError: see :func:`overlay_panels`.
    """
    runs = [Path(r) for r in runs]
    rows = overlay_panels(runs, x=x, reference=reference, label=label)
    out = Path(out) if out is not None else default_out(runs, x)
    out.parent.mkdir(parents=True, exist_ok=True)
    overlay_figure(rows, f"{len(runs)} runs").savefig(out, dpi=100)
    return out
