"""The published reference curves of an agent on our env ids: the derived tables, their
rebuild from the reference's files, and their loader.

An agent declares its paper in its entry (``agent_api.PaperReference``: the committed
table in its package, the source's format and path, the task map, the metric and the
budget). The table holds, per env id, the per-seed curves (x in env frames) copied from
the reference's files, which are not committed (their sha256 is recorded). Rebuilt /
checked (check: exit 1 when the committed table differs; 2 for bad input) with::

    python -m analysis paper-curves build --agent NAME --src reference_results
    python -m analysis paper-curves check --agent NAME --src reference_results

``--obs image`` picks an agent's curves of another observation mode (DreamerV3's DMC vision,
``--src`` the reference's ``scores/`` folder; TD-MPC2's DMC pixels, ``--src`` the reference's
``results/`` folder: neither source is shipped).

Readers of the source formats (:data:`READERS`): ``scores_json_gz`` (a gzip'd JSON list
of ``{task, method, seed, xs, ys}``) and ``csv_per_task`` (``<task>.csv`` with columns
``step,reward,seed``). Read a table with :func:`load` / :func:`curve`.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import gzip
import hashlib
import importlib.resources
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from agent_api import AgentEntry, PaperReference
from launcher.config.compose import compose
from launcher.config.validate import load_entry
from launcher.errors import ConfigError

FORMAT = 1
Seeds = dict[str, dict[str, list]]  # seed -> {"x": [...], "y": [...]}


class SourceError(Exception):
    """The --src folder lacks a file, or a file is not what the reference declares."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _int(x: float, where: str) -> int:
    if not float(x).is_integer():
        raise SourceError(f"{where}: non-integer x {x!r}")
    return int(x)


# ------------------------------------------------------------------ readers
def read_scores_json_gz(ref: PaperReference, src: Path) -> tuple[dict[str, Seeds], dict]:
    """reference task -> seeds, and {relative path: sha256}, from one gzip'd JSON file."""
    path = src / ref.files
    try:
        records = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError) as e:
        raise SourceError(f"cannot read {path}: {e}") from e
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise SourceError(f"{path}: not a list of {{task, method, seed, xs, ys}} records")
    out: dict[str, Seeds] = {}
    for r in records:
        if r.get("method") == ref.method and r.get("task") in ref.no_counterpart:
            continue
        if r.get("method") != ref.method or r.get("task") not in ref.tasks:
            raise SourceError(f"{path}: unexpected record {r.get('method')}/{r.get('task')}")
        seeds, seed = out.setdefault(r["task"], {}), str(r.get("seed"))
        if seed in seeds:
            raise SourceError(f"{path}: two records for {r['task']} seed {seed}")
        try:
            xs = [_int(x, f"{path} {r['task']}") for x in r["xs"]]
            seeds[seed] = _binned(ref, xs, [float(y) for y in r["ys"]])
        except (KeyError, TypeError, ValueError) as e:
            raise SourceError(f"{path}: bad xs/ys for {r['task']} seed {seed} ({e!r})") from e
    return out, {ref.files: _sha256(path)}


def _binned(ref: PaperReference, xs: list[int], ys: list[float]) -> dict[str, list]:
    """One seed's curve as the table keeps it: with ``ref.bin_frames`` the mean of the
    points in each bin ``(b (k - 1), b k]`` at x = ``b k`` (empty bins left out); with
    ``ref.decimals`` the scores rounded."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} xs, {len(ys)} ys")
    if ref.bin_frames > 0:
        bins: dict[int, list[float]] = {}
        for x, y in zip(xs, ys, strict=True):
            bins.setdefault(-(-x // ref.bin_frames) * ref.bin_frames, []).append(y)
        xs, ys = sorted(bins), [float(np.mean(bins[k])) for k in sorted(bins)]
    if ref.decimals > 0:
        ys = [round(y, ref.decimals) for y in ys]
    return {"x": xs, "y": ys}


def read_csv_per_task(ref: PaperReference, src: Path) -> tuple[dict[str, Seeds], dict]:
    """reference task -> seeds, and {relative path: sha256}, from a folder of CSVs (every
    CSV must be a mapped task or listed in ``no_counterpart``)."""
    folder = src / ref.files
    found = {p.stem for p in folder.glob("*.csv")}
    if unknown := found - set(ref.tasks) - set(ref.no_counterpart):
        raise SourceError(f"{folder}: CSV tasks neither mapped nor listed: {sorted(unknown)}")
    out: dict[str, Seeds] = {}
    sources = {}
    for task in ref.tasks:
        path = folder / f"{task}.csv"
        runs: dict[int, list[tuple[int, float]]] = {}
        try:
            with path.open(newline="") as f:
                for row in csv.DictReader(f):
                    step = _int(float(row["step"]), str(path))
                    runs.setdefault(int(row["seed"]), []).append((step, float(row["reward"])))
        except OSError as e:
            raise SourceError(f"cannot read {path}: {e}") from e
        except (KeyError, TypeError, ValueError) as e:
            raise SourceError(f"{path}: not a step,reward,seed CSV ({e})") from e
        if not runs:
            raise SourceError(f"{path}: no rows")
        out[task] = {
            str(seed): {"x": [p[0] for p in pts], "y": [p[1] for p in pts]}
            for seed, pts in ((s, sorted(runs[s])) for s in sorted(runs))
        }
        sources[f"{ref.files}/{path.name}"] = _sha256(path)
    return out, sources


READERS: dict[str, Callable[[PaperReference, Path], tuple[dict[str, Seeds], dict]]] = {
    "scores_json_gz": read_scores_json_gz,
    "csv_per_task": read_csv_per_task,
}


def build(ref: PaperReference, src: Path | str) -> dict[str, Any]:
    """The table of ``ref`` from the reference files under ``src`` (SourceError if they
    are missing or not what ``ref`` declares)."""
    src = Path(src)
    if not src.is_dir():
        raise SourceError(f"--src {src} is not a directory")
    if ref.reader not in READERS:
        raise SourceError(f"unknown reader {ref.reader!r}; known: {sorted(READERS)}")
    curves, sources = READERS[ref.reader](ref, src)
    if missing := sorted(set(ref.tasks) - set(curves)):
        raise SourceError(f"{src / ref.files}: no curves for {missing}")
    tasks = {
        env_id: {
            "reference_task": task,
            "budget_env_frames": ref.budgets.get(env_id, ref.budget_env_frames),
            "seeds": curves[task],
        }
        for task, env_id in ref.tasks.items()
    }
    return {
        "format": FORMAT,
        "generated_by": "python -m analysis paper-curves build --agent <name> --src <dir>",
        "source": ref.source,
        "sources": sources,
        "metric": ref.metric,
        "x": "env_frames",
        "action_repeat": ref.action_repeat,
        "tasks": tasks,
        "no_counterpart": list(ref.no_counterpart),
    }


def dumps(obj: Any, indent: int = 0) -> str:
    """Deterministic JSON (sorted keys), one line per key down to a seed's curve (one line)."""
    kinds = {type(v) for v in obj.values()} if isinstance(obj, dict) else set()
    if not kinds or (list in kinds and dict not in kinds):
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)
    pad = "  " * (indent + 1)
    items = [f"{pad}{json.dumps(k)}: {dumps(obj[k], indent + 1)}" for k in sorted(obj)]
    return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"


def table_path(ref: PaperReference) -> Path:
    """The committed table's file (``"package:file.json"`` resolved in the package)."""
    package, _, name = ref.table.partition(":")
    return Path(str(importlib.resources.files(package) / name))


# ------------------------------------------------------------------- loader
@dataclasses.dataclass(frozen=True, eq=False)
class PaperCurve:
    """One agent's reference curves on one env id: seed -> (x env frames, y score),
    read-only; ``metric``: "eval" or "train" episodes."""

    agent: str
    env_id: str
    reference_task: str
    metric: str
    budget_env_frames: int
    seeds: dict[int, tuple[np.ndarray, np.ndarray]]

    def mean_band(
        self, upto: float | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(x, mean, lo, hi) over seeds at the x values every seed has; lo/hi: min/max.
        With ``upto`` (env frames: a run's span), only the points before it and the first
        point at or past it (a short run is shown the part of the paper it compares with)."""
        x = functools.reduce(np.intersect1d, [sx for sx, _ in self.seeds.values()])
        ys = np.stack([sy[np.isin(sx, x)] for sx, sy in self.seeds.values()])
        n = len(x)
        if upto is not None and upto < x[-1]:
            n = int(np.searchsorted(x, upto, side="left")) + 1
        return x[:n], ys.mean(axis=0)[:n], ys.min(axis=0)[:n], ys.max(axis=0)[:n]

    def final_level(self, window_fraction: float = 0.1) -> float | None:
        """The paper's score at its budget: the mean over seeds of each seed's mean over
        the last ``window_fraction`` of the budget (the acceptance rule's window); None
        when no seed has a point there."""
        lo = self.budget_env_frames * (1.0 - window_fraction)
        means = self.window_means(lo, self.budget_env_frames)
        return float(np.mean(list(means.values()))) if means else None

    def window_means(self, lo_frames: float, hi_frames: float) -> dict[int, float]:
        """Seed -> mean y over its points with lo_frames <= x <= hi_frames (seeds with none
        left out)."""
        out = {}
        for seed, (x, y) in self.seeds.items():
            inside = (x >= lo_frames) & (x <= hi_frames)
            if inside.any():
                out[seed] = float(y[inside].mean())
        return out

    def points(self) -> dict[int, list[tuple[float, float]]]:
        """seed -> [(x, y)] as plain floats (``analysis.acceptance``'s curves)."""
        return {
            s: list(zip(x.tolist(), y.tolist(), strict=True)) for s, (x, y) in self.seeds.items()
        }


def _array(values: list[float], dtype: type) -> np.ndarray:
    a = np.asarray(values, dtype=dtype)
    a.setflags(write=False)
    return a


class PaperCurves:
    """One agent's loaded table: :meth:`curve` per env id, :meth:`tasks`."""

    def __init__(self, agent: str, table: Mapping[str, Any]):
        if table.get("format") != FORMAT:
            raise ValueError(f"unknown paper-curves format {table.get('format')!r}")
        self.agent, self.table = agent, table
        self._curves = {
            env_id: PaperCurve(
                agent,
                env_id,
                t["reference_task"],
                table["metric"],
                int(t["budget_env_frames"]),
                {
                    int(s): (_array(c["x"], np.int64), _array(c["y"], np.float64))
                    for s, c in sorted(t["seeds"].items(), key=lambda kv: int(kv[0]))
                },
            )
            for env_id, t in table["tasks"].items()
        }

    def tasks(self) -> list[str]:
        """The env ids with reference curves, sorted."""
        return sorted(self._curves)

    def no_counterpart(self) -> list[str]:
        """The reference's tasks that our registry lacks."""
        return list(self.table["no_counterpart"])

    def curve(self, env_id: str) -> PaperCurve | None:
        """The curves on ``env_id``; None when the reference has none for it."""
        return self._curves.get(env_id)


def paper_of(entry: AgentEntry, obs: str = "vector") -> PaperReference | None:
    """The entry's published curves of observation mode ``obs`` (its optional
    ``tables.paper`` and ``tables.more_papers``, by ``PaperReference.obs``); None without."""
    if entry.tables is None:
        return None
    papers = [entry.tables.paper, *entry.tables.more_papers]
    return next((p for p in papers if p is not None and p.obs == obs), None)


@functools.lru_cache(maxsize=16)
def _load(agent: str, path: Path) -> PaperCurves:
    return PaperCurves(agent, json.loads(path.read_text()))


def load(entry: AgentEntry, obs: str = "vector") -> PaperCurves | None:
    """The committed table of ``entry``'s paper of mode ``obs`` (cached); None when it
    declares none."""
    paper = paper_of(entry, obs)
    if paper is None:
        return None
    return _load(entry.name, table_path(paper).resolve())


def protocol_of(agent: Mapping[str, Any], obs: str = "vector") -> str:
    """The registered protocol of the paper of mode ``obs`` of the agent of a composed
    ``agent`` section (``PaperReference.protocol``); ``paper`` without one."""
    try:
        paper = paper_of(load_entry(agent), obs)
    except ConfigError:
        return "paper"
    return paper.protocol if paper is not None else "paper"


def curve(agent: Mapping[str, Any], env_id: str, obs: str = "vector") -> PaperCurve | None:
    """The paper curve on ``env_id`` observed as ``obs`` (the run's ``env.obs``) of the
    agent of a composed ``agent`` section (``name``, ``entry``); None without one (or when
    the entry does not load)."""
    try:
        table = load(load_entry(agent), obs)
    except ConfigError:
        return None
    return table.curve(env_id) if table is not None else None


# ---------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        "python -m analysis paper-curves",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=["build", "check"])
    parser.add_argument("--agent", required=True, help="an agent name (conf/agent/<name>.yaml)")
    parser.add_argument("--src", type=Path, required=True, help="the sources (reference_results)")
    parser.add_argument("--out", type=Path, default=None, help="default: the committed table")
    parser.add_argument(
        "--obs", default="vector", help="the curves of this observation mode (PaperReference.obs)"
    )
    args = parser.parse_args(argv)
    try:
        entry = load_entry(compose([f"agent={args.agent}"])["agent"])
        paper = paper_of(entry, args.obs)
        if paper is None:
            raise ConfigError(
                f"agent={args.agent} declares no paper of obs={args.obs} (AgentTables.paper)"
            )
        table = build(paper, args.src)
    except (ConfigError, SourceError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = args.out or table_path(paper)
    text = dumps(table) + "\n"
    if args.command == "build":
        out.write_text(text)
        print(f"wrote {out} ({out.stat().st_size} bytes)")
        return 0
    if not out.is_file() or out.read_text() != text:
        fix = f"python -m analysis paper-curves build --agent {args.agent} --src {args.src}"
        fix += f" --obs {args.obs}" if args.obs != "vector" else ""
        print(f"{out} differs from a rebuild from {args.src}; run: {fix}", file=sys.stderr)
        return 1
    print(f"{out} matches a rebuild from {args.src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
