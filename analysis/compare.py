"""``python -m analysis RUN_DIR [RUN_DIR ...] --compare paper``: runs against the
published curves, judged by :mod:`analysis.acceptance`.

Each argument is a run directory (it holds ``run.json``) or a sweep directory (the run
directories below it, up to three levels down). Per run: the agent's paper metric (its
``PaperReference.metric``: evaluation or training episodes) per seed against env frames,
the reference's seed mean and min..max band (:mod:`analysis.paper_curves`), and the
task's verdict. Writes, under ``--out`` (default ``<the one directory given>/plots``):

* ``paper_<env>.png`` for one run (the report's two panels, the reference on the
  metric's), or ``paper_grid.png`` for several (one panel per task);
* ``paper_table.md`` and ``paper_table.csv``: task, status, our window mean, the
  reference's, the bar, the seeds, why a row is not judged, provenance;

and prints the Markdown table and the verdict over the judged tasks.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis import acceptance, paper_curves
from analysis.plotting import Reference, draw_panel
from analysis.report import action_repeat, load_curves, panel_series, plot_run
from launcher.config.compose import compose_spec
from launcher.config.identity import diff, identity
from launcher.errors import ConfigError
from launcher.store import rundir
from launcher.store.rundir import RUN_FILE, RunDir

COLUMNS = (
    "task",
    "agent",
    "status",
    "seeds",
    "window_env_frames",
    "ours",
    "reference",
    "bar",
    "ours_minus_reference",
    "reasons",
    "git_sha",
    "git_dirty",
    "jax",
    "backend",
    "devices",
    "config_hash",
    "run_dir",
)
# The printed table: the judgement; the seeds and provenance (git sha, jax, devices, config
# hash, run directory) stay in paper_table.csv.
SHOWN = (
    "task",
    "agent",
    "status",
    "ours",
    "reference",
    "bar",
    "window_env_frames",
    "reasons",
)


def find_runs(paths: Sequence[Path | str]) -> list[Path]:
    """The run directories named by ``paths`` (each a run dir or a sweep dir)."""
    runs: list[Path] = []
    for path in map(Path, paths):
        if (path / RUN_FILE).is_file():
            runs.append(path)
            continue
        if not path.is_dir():
            raise ConfigError(f"{path}: no such run or sweep directory")
        found = rundir.find_runs(path)
        if not found:
            raise ConfigError(f"{path}: no run directories (no {RUN_FILE}) in it or below it")
        runs.extend(found)
    return runs


def registered_spec(
    agent: str,
    env_id: str,
    budget: int,
    action_repeat: int = 2,
    protocol: str = "paper",
    obs: str = "vector",
) -> Any:
    """The RunSpec of the registered paper run of ``agent`` on ``env_id``: ``agent=A
    env=E protocol=P`` (the paper's ``PaperReference.protocol``) for ``budget`` env frames,
    observed as ``obs`` (the paper's ``PaperReference.obs``; ``env.obs=O`` unless vector,
    e.g. TD-MPC2's pixel curves on protocol=paper) (ConfigError if it does not compose)."""
    steps = budget // action_repeat
    overrides = [f"agent={agent}", f"env={env_id}", f"protocol={protocol}"]
    overrides.append(f"protocol.n_timesteps={steps}")
    # the default mode is no override: a vector run's identity keeps no obs key
    overrides += [f"env.obs={obs}"] if obs != "vector" else []
    return compose_spec(overrides)


def registered_identity(
    agent: str, env_id: str, budget: int, protocol: str = "paper", obs: str = "vector"
) -> dict[str, Any]:
    """The identity of :func:`registered_spec`."""
    return identity(registered_spec(agent, env_id, budget, protocol=protocol, obs=obs))


def deviations(stored: dict[str, Any], registered: dict[str, Any]) -> list[str]:
    """``key: value (registered: value)`` for each identity key that differs."""
    return [f"{k}: {a!r} (registered: {b!r})" for k, a, b in diff(stored, registered)]


def run_provenance(rd: RunDir, run: dict[str, Any]) -> dict[str, Any]:
    """run.json's provenance plus the config hash and, when launches ran different code,
    every launch's commit (``launch_shas``)."""
    out = dict(run.get("provenance") or {})
    out["config_hash"] = run.get("config_hash")
    shas = [r.get("git_sha") for r in rd.read_launches()]
    if len(set(shas)) > 1:
        out["launch_shas"] = shas
    return out


def judge_run(run_dir: Path) -> tuple[Any, Any]:
    """(TaskVerdict, PaperCurve or None) of one run directory."""
    rd = RunDir(run_dir)
    run = rd.read_run() or {}
    ident = run.get("identity", {})
    agent = ident.get("agent", {}).get("name", "unknown")
    env_id = ident.get("env", {}).get("id", "unknown")
    obs = ident.get("env", {}).get("obs", "vector")  # an image run: the paper's image curves
    section = run.get("config", {}).get("agent", {"name": agent})
    ref = paper_curves.curve(section, env_id, obs)
    metric = ref.metric if ref is not None else "eval"
    ours = load_curves(run_dir, x="env_frames")[metric]
    if action_repeat(run_dir) is None and ours:
        raise ConfigError(
            f"{run_dir}: run.json has no action repeat; cannot place it on env frames"
        )
    budget = ref.budget_env_frames if ref is not None else 0
    reasons: list[str] = []
    if ref is not None:
        try:
            protocol = paper_curves.protocol_of(section, obs)
            registered = registered_identity(agent, env_id, budget, protocol, obs)
            reasons = deviations(ident, registered)
        except ConfigError as err:
            reasons = [f"no registered paper composition ({err})"]
    seeds = ident.get("protocol", {}).get("seeds", [])  # the registered ones when on protocol
    verdict = acceptance.judge_task(
        env_id,
        agent,
        ours,
        ref.points() if ref is not None else None,
        budget,
        seeds=seeds,
        deviations=reasons,
        provenance=run_provenance(rd, run),
        run_dir=str(run_dir),
    )
    return verdict, ref


def reference_line(ref: paper_curves.PaperCurve, upto: float | None = None) -> Reference:
    """The report's :class:`Reference` (seed mean, min..max) of a paper curve; with
    ``upto`` (a run's last x), cut after its first point at or past ``upto``, so a short
    run's figure shows the part of the paper it compares with."""
    x, mean, lo, hi = ref.mean_band(upto)
    return Reference(
        label=f"{ref.agent} paper ({len(ref.seeds)} seeds)",
        x=x.tolist(),
        mean=mean.tolist(),
        lo=lo.tolist(),
        hi=hi.tolist(),
        n_max=len(ref.seeds),
    )


def last_x(run_dir: Path) -> float | None:
    """The largest env frame of any row of the run (None without rows)."""
    curves = load_curves(run_dir, x="env_frames")
    xs = [x for kind in curves.values() for pts in kind.values() for x, _ in pts]
    return max(xs) if xs else None


def _num(v: float | None) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1f}"


def row(v: acceptance.TaskVerdict) -> dict[str, str]:
    """One table row of a verdict, as strings (the CSV and Markdown cells)."""
    p = v.provenance
    diff = v.ours - v.reference if v.ours is not None and v.reference is not None else None
    return {
        "task": v.task,
        "agent": v.agent,
        "status": v.status,
        "seeds": " ".join(f"{s}:{m:.1f}" for s, m in sorted(v.ours_per_seed.items())),
        "window_env_frames": f"{v.window[0]:,.0f}..{v.window[1]:,.0f}",
        "ours": _num(v.ours),
        "reference": _num(v.reference),
        "bar": _num(v.bar),
        "ours_minus_reference": _num(diff),
        "reasons": "; ".join(v.reasons),
        "git_sha": (p.get("git_sha") or "")[:12],
        "git_dirty": "" if p.get("git_dirty") is None else str(p["git_dirty"]).lower(),
        "jax": str(p.get("jax", "")),
        "backend": str(p.get("backend", "")),
        "devices": " ".join(p.get("devices", [])),
        "config_hash": str(p.get("config_hash") or ""),
        "run_dir": v.run_dir,
    }


def markdown(rows: Sequence[dict[str, str]], summary: acceptance.SweepVerdict) -> str:
    """The table as Markdown (the ``SHOWN`` columns), then one verdict line."""
    lines = ["| " + " | ".join(SHOWN) + " |", "|" + "---|" * len(SHOWN)]
    for r in rows:
        cells = {**r, "reasons": _short(r["reasons"])}
        lines.append("| " + " | ".join(cells[c].replace("|", "/") for c in SHOWN) + " |")
    more = "per-seed means and provenance (git sha, jax, devices, config hash): paper_table.csv"
    return "\n".join([*lines, "", verdict_line(summary), more]) + "\n"


def _short(reasons: str, keep: int = 3) -> str:
    """The first ``keep`` reasons, and how many more the CSV lists."""
    parts = [p for p in reasons.split("; ") if p]
    more = f"; +{len(parts) - keep} more (paper_table.csv)" if len(parts) > keep else ""
    return "; ".join(parts[:keep]) + more


def verdict_line(s: acceptance.SweepVerdict) -> str:
    if not s.judged:
        return "verdict: nothing judged (no row on the registered paper protocol with a reference)"
    word = "PASS" if s.passed else "FAIL"
    return (
        f"verdict: {word}: {s.passed_tasks}/{s.judged} judged tasks pass (need "
        f"{s.rule.pass_fraction:.0%}); median {s.median_ours:.1f} vs reference "
        f"{s.median_reference:.1f}, mean {s.mean_ours:.1f} vs {s.mean_reference:.1f} "
        f"(each may be at most {s.rule.margin:.0f} below)"
    )


def grid_figure(items: Sequence[tuple[Path, Any, Any]]) -> Any:
    """One panel per run: its paper metric's panel of the report (per-seed curves, their
    mean, the levels), the reference's mean and band up to the run's end, the verdict."""
    from matplotlib.figure import Figure

    n = len(items)
    cols = min(4, n)
    rows = -(-n // cols)
    fig = Figure(figsize=(4 * cols, 3.2 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (run_dir, verdict, ref) in zip(axes, items, strict=False):
        metric = ref.metric if ref is not None else "eval"
        line = reference_line(ref, last_x(run_dir)) if ref is not None else None
        panels = panel_series(run_dir, reference=line, reference_kind=metric)
        panel = next(p for p in panels if p.kind == metric)
        panel.title = f"{verdict.task} ({verdict.agent}): {verdict.status}"
        draw_panel(ax, panel)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig


def compare(paths: Sequence[Path | str], out: Path | str | None = None) -> dict[str, Any]:
    """Judge the runs of ``paths``; write the figure and tables under ``out``; return
    ``{"rows", "summary", "markdown", "files"}`` (ConfigError on bad input)."""
    runs = find_runs(paths)
    judged = [(run_dir, *judge_run(run_dir)) for run_dir in runs]
    verdicts = [v for _, v, _ in judged]
    summary = acceptance.judge_sweep(verdicts)
    rows = [row(v) for v in verdicts]
    if out is None:
        if len(paths) != 1:
            raise ConfigError("several directories given: name the output folder with --out")
        out = Path(paths[0]) / "plots"
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if len(judged) == 1:
        run_dir, verdict, ref = judged[0]
        fig_path = out / f"paper_{verdict.task}.png"
        plot_run(
            run_dir,
            fig_path,
            reference=reference_line(ref, last_x(run_dir)) if ref is not None else None,
            reference_kind=ref.metric if ref is not None else "eval",
        )
    else:
        fig_path = out / "paper_grid.png"
        grid_figure(judged).savefig(fig_path, dpi=100)
    text = markdown(rows, summary)
    (out / "paper_table.md").write_text(text)
    with (out / "paper_table.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    (out / "paper_verdict.json").write_text(
        json.dumps({"summary": verdict_line(summary), "rows": rows}, indent=1) + "\n"
    )
    files = [fig_path, out / "paper_table.md", out / "paper_table.csv", out / "paper_verdict.json"]
    return {"rows": rows, "summary": summary, "markdown": text, "files": files}
