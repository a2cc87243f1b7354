"""The learning-curve figures: what a panel draws (:class:`PanelSeries` for one run's
seeds, :class:`OverlayPanel` for several runs) and the matplotlib figures built from it.

Every panel draws its horizontal levels (:class:`Level`: the random policy's return, a
solved level, the paper's final score), says in a text box what it lacks (no reference,
no random level), marks points a line would not show (a one-point series, a point
between two gaps), and keeps its y-range meaningful: the data and the levels, widened to
at least :data:`MIN_SPAN_FRACTION` of the env's range of returns where that is known
(:func:`y_limits`), so 40 points of a -500..0 task do not fill the panel.
No I/O: the callers (:mod:`analysis.report`, :mod:`analysis.overlay`) read the runs
and save the figures.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

Points = list[tuple[float, float]]
Band = list[tuple[float, float, float]]  # (x, lo, hi)
BAND_LABEL = "seed min..max"
MIN_SPAN_FRACTION = 0.25  # a panel shows at least this share of the env's return range
MARGIN = 0.05  # of the y-range, above and below
NOTE_HEADROOM = 0.07  # of the y-range, added above it per line of a panel's notes
LEGEND_DROP = 34  # points from an overlay panel's bottom to its legend: tick labels, x label
LEGEND_LINE = 0.16  # inches per legend entry at fontsize 7 (with its spacing)
LABEL_WIDTH = 80  # characters of a run label per legend line (7 pt text in a 5.5 in panel)
NOTE_WIDTH = 90  # characters per line of an overlay panel's notes (they may name runs)
LEVEL_STYLE: dict[str, dict[str, Any]] = {
    "random": {"color": "tab:gray", "ls": ":", "lw": 1.5},
    "solved": {"color": "tab:green", "ls": "-.", "lw": 1.3},
    "reference": {"color": "tab:red", "ls": (0, (6, 3)), "lw": 1.2, "alpha": 0.8},
}


@dataclass(frozen=True)
class Level:
    """A horizontal line: ``kind`` "random", "solved" or "reference" (its style), at
    return ``y``, with a legend ``label``."""

    kind: str
    y: float
    label: str


@dataclass
class Reference:
    """A reference curve: mean return per x over its rows, and their min..max."""

    label: str
    x: list[float]
    mean: list[float]
    lo: list[float]
    hi: list[float]
    n_max: int = 1  # the most rows (seeds) sharing one x

    @property
    def has_spread(self) -> bool:
        """True when some x has two rows or more (then lo..hi is drawn)."""
        return self.n_max > 1


@dataclass
class PanelSeries:
    """What one panel of a run draws: per-seed points, their mean and band, an optional
    reference curve, levels, the env's return bounds (None: unknown) and notes."""

    kind: str
    title: str
    ylabel: str
    xlabel: str
    seeds: dict[int, Points] = field(default_factory=dict)
    mean: Points = field(default_factory=list)
    band: Band = field(default_factory=list)
    reference: Reference | None = None
    frames_fallback: bool = False  # env frames asked for, agent steps drawn
    levels: list[Level] = field(default_factory=list)
    bounds: tuple[float, float] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class RunLine:
    """One run in an overlay panel: its label, its seeds' mean (or its one seed), the
    seeds' min..max band (two seeds or more), its seed count and the key of its colour
    (the same on every panel; default: the label)."""

    label: str
    points: Points
    band: Band = field(default_factory=list)
    n_seeds: int = 1
    key: str = ""


@dataclass
class OverlayPanel:
    """One panel of an overlay (one env, one kind of episodes): a line per run."""

    kind: str
    title: str
    ylabel: str
    xlabel: str
    runs: list[RunLine] = field(default_factory=list)
    reference: Reference | None = None
    levels: list[Level] = field(default_factory=list)
    bounds: tuple[float, float] | None = None
    notes: list[str] = field(default_factory=list)


def _finite(y: Any) -> bool:
    try:
        return math.isfinite(float(y))
    except (TypeError, ValueError):
        return False


def isolated(ys: Sequence[float]) -> list[int]:
    """Indices of the finite values with no finite neighbour: a line through them draws
    nothing (a one-point series, a point between NaN gaps), so they get markers."""
    ok = [_finite(y) for y in ys]
    n = len(ok)
    return [
        i for i in range(n) if ok[i] and not (i > 0 and ok[i - 1]) and not (i + 1 < n and ok[i + 1])
    ]


def markers(ys: Sequence[float], always: bool, size: float = 3.0) -> dict[str, Any]:
    """Line kwargs: markers on every point (``always``), else on the isolated ones only."""
    if always:
        return {"marker": "o", "ms": size}
    idx = isolated(ys)
    return {"marker": "o", "ms": size + 1, "markevery": idx} if idx else {}


def y_limits(
    values: Iterable[float],
    bounds: tuple[float, float] | None = None,
    min_fraction: float = MIN_SPAN_FRACTION,
    margin: float = MARGIN,
) -> tuple[float, float] | None:
    """A panel's y-range: the finite ``values`` (data and levels), widened around their
    middle to at least ``min_fraction`` of the env's return ``bounds`` (low, high) and
    moved inside them where that fits, plus ``margin`` of the range on each side; None
    (autoscale) without a finite value."""
    ys = [float(v) for v in values if _finite(v)]
    if not ys:
        return None
    lo, hi = min(ys), max(ys)
    if bounds is not None:
        b_lo, b_hi = bounds
        need = min_fraction * (b_hi - b_lo)
        if hi - lo < need:
            mid = (lo + hi) / 2
            new_lo, new_hi = mid - need / 2, mid + need / 2
            if new_lo < b_lo:
                new_lo, new_hi = b_lo, b_lo + need
            elif new_hi > b_hi:
                new_lo, new_hi = b_hi - need, b_hi
            lo, hi = min(lo, new_lo), max(hi, new_hi)
    pad = margin * (hi - lo) if hi > lo else max(abs(lo) * 0.1, 1.0)
    return lo - pad, hi + pad


def _band(ax: Any, xs: Sequence[float], lo: Sequence[float], hi: Sequence[float], **kw) -> None:
    """A shaded band, or a bar at a single x (a one-point fill is invisible)."""
    if len(xs) == 1:
        ax.vlines(xs, lo, hi, lw=8, **kw)
    else:
        ax.fill_between(xs, lo, hi, lw=0, **kw)


def _ys(points: Points) -> list[float]:
    return [y for _, y in points]


def _finish(
    ax: Any,
    panel: PanelSeries | OverlayPanel,
    values: list[float],
    empty: bool,
    legend_below: bool = False,
) -> None:
    """Levels, y-range, notes, titles, grid and legend of a drawn panel: the legend inside
    the axes, below the notes' band, or (``legend_below``: an overlay, whose run labels are
    long) under the x label, where it covers no line."""
    for level in panel.levels:
        ax.axhline(level.y, label=level.label, **LEVEL_STYLE[level.kind])
    notes = [*(["no data"] if empty else []), *panel.notes]
    if legend_below:
        notes = [textwrap.fill(n, NOTE_WIDTH, subsequent_indent="  ") for n in notes]
    lines = sum(n.count("\n") + 1 for n in notes)
    extra = NOTE_HEADROOM * lines + 0.05 * bool(notes)  # room for the notes' box
    limits = y_limits([*values, *(lv.y for lv in panel.levels)], panel.bounds)
    if limits is not None:
        lo, hi = limits
        ax.set_ylim(lo, hi + extra * (hi - lo))  # the box covers no line or level
    if notes:
        ax.text(
            0.02,
            0.97,
            "\n".join(notes),
            transform=ax.transAxes,
            ha="left",
            va="top",
            fontsize=7,
            color="dimgray",
            bbox={"boxstyle": "round", "fc": "white", "ec": "lightgray", "alpha": 0.85},
        )
    ax.set_title(panel.title, fontsize=10)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    ax.grid(alpha=0.3)
    if not ax.get_legend_handles_labels()[0]:
        return
    if legend_below:
        from matplotlib.transforms import offset_copy

        # LEGEND_DROP points under the axes: below the tick labels and the x label
        under = offset_copy(ax.transAxes, fig=ax.figure, y=-LEGEND_DROP, units="points")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=under)
    else:  # placed below the notes' band
        ax.legend(fontsize=7, loc="best", bbox_to_anchor=(0, 0, 1, 1 / (1 + extra)))


def _reference(ax: Any, ref: Reference | None) -> list[float]:
    """Draw a reference curve (and its spread); its y values."""
    if ref is None:
        return []
    if ref.has_spread:
        _band(ax, ref.x, ref.lo, ref.hi, color="tab:red", alpha=0.12, label=f"{ref.label} min..max")
    ax.plot(
        ref.x,
        ref.mean,
        color="tab:red",
        lw=1.8,
        ls="--",
        label=ref.label,
        **markers(ref.mean, len(ref.x) == 1),
    )
    return [*ref.mean, *ref.lo, *ref.hi]


def _draw_seeds(ax: Any, panel: PanelSeries) -> list[float]:
    """The seeds' lines, their band and mean; the y values drawn."""
    single = len(panel.seeds) == 1
    short = any(len(points) < 2 for points in panel.seeds.values())
    marked = panel.kind == "eval" or single or short
    values: list[float] = []
    for seed, points in panel.seeds.items():
        xs, ys = zip(*points, strict=True) if points else ((), ())
        style: dict[str, Any] = {"lw": 2.0} if single else {"lw": 0.8, "alpha": 0.6}
        style.update(markers(ys, marked, 4 if single else 3))
        ax.plot(xs, ys, label=f"seed {seed}", **style)
        values += ys
    if panel.band:
        xs, lo, hi = zip(*panel.band, strict=True)
        _band(ax, xs, lo, hi, color="black", alpha=0.15, label=BAND_LABEL)
    if panel.mean:
        xs, ys = zip(*panel.mean, strict=True)
        mark = markers(ys, marked, 5)
        ax.plot(xs, ys, lw=2.2, color="black", label=f"mean of {len(panel.seeds)}", **mark)
    return values + _reference(ax, panel.reference)


def build_figure(panels: Sequence[PanelSeries], title: str = "") -> Any:
    """A matplotlib ``Figure`` with one axes per panel: thin per-seed lines, the mean in
    black, the seeds' min..max band, the reference in red, the levels as horizontal
    lines; eval lines and isolated points marked; the y-range from :func:`y_limits`."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels, strict=True):
        draw_panel(ax, panel)
    fig.suptitle(title)
    return fig


def draw_panel(ax: Any, panel: PanelSeries) -> None:
    """Draw one run's panel on matplotlib axes ``ax`` (as :func:`build_figure` does)."""
    values = _draw_seeds(ax, panel)
    _finish(ax, panel, values, empty=not panel.seeds)


def _wrapped(label: str) -> str:
    """A run's legend label in lines of at most :data:`LABEL_WIDTH` characters."""
    return textwrap.fill(label, LABEL_WIDTH, subsequent_indent="  ")


def _legend_lines(panel: OverlayPanel) -> int:
    """Lines of an overlay panel's legend: its runs' wrapped labels, reference, levels."""
    runs = sum(_wrapped(r.label).count("\n") + 1 for r in panel.runs)
    reference = 0 if panel.reference is None else 1 + panel.reference.has_spread
    return runs + reference + len(panel.levels)


def overlay_figure(rows: Sequence[Sequence[OverlayPanel]], title: str = "") -> Any:
    """A ``Figure`` with one row of panels per env (training, evaluation episodes): a
    line per run (its seeds' mean, their band), in the same colour on every panel."""
    from matplotlib.figure import Figure

    n_cols = max(len(r) for r in rows)
    # each row's legend sits under its panels: room for its entries and their wrapped lines
    legend_lines = [max((_legend_lines(p) for p in panels), default=0) for panels in rows]
    height = sum(3.8 + LEGEND_LINE * n for n in legend_lines) + 0.4
    fig = Figure(figsize=(5.5 * n_cols, height), layout="constrained")
    axes = fig.subplots(len(rows), n_cols, squeeze=False)
    colours: dict[str, str] = {}
    for row, panels in zip(axes, rows, strict=True):
        for ax, panel in zip(row, panels, strict=False):
            values: list[float] = []
            for run in panel.runs:
                colour = colours.setdefault(run.key or run.label, f"C{len(colours) % 10}")
                ys = _ys(run.points)
                always = panel.kind == "eval" or len(run.points) < 3
                xs = [x for x, _ in run.points]
                label = _wrapped(run.label)
                ax.plot(xs, ys, lw=1.8, color=colour, label=label, **markers(ys, always, 4))
                if run.band:
                    bx, lo, hi = zip(*run.band, strict=True)
                    _band(ax, bx, lo, hi, color=colour, alpha=0.15)
                    values += [*lo, *hi]
                values += ys
            values += _reference(ax, panel.reference)
            empty = not any(r.points for r in panel.runs)
            _finish(ax, panel, values, empty, legend_below=True)
        for ax in row[len(panels) :]:
            ax.set_visible(False)
    fig.suptitle(title)
    return fig
