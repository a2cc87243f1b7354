"""analysis.report (``python -m analysis``) on synthetic run dirs: env-frame x axis
(and agent steps), eval markers, the seeds' spread band, reference curves, errors and the
CLI; the levels (random policy, solved, the paper's final score), the y-range and the
panels' notes (analysis.plotting, analysis.levels); several runs overlaid
(analysis.overlay)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis import paper_curves
from analysis.cli import main
from analysis.overlay import overlay_panels, plot_overlay, run_labels
from analysis.plotting import LABEL_WIDTH, overlay_figure, y_limits
from analysis.report import (
    BAND_LABEL,
    build_figure,
    load_curves,
    load_reference,
    mean_curve,
    panel_series,
    plot_run,
    spread_band,
)
from envs.returns import episode_returns
from launcher.errors import ConfigError

TRAIN, EVAL = "Train/episodic mean reward", "Eval/episodic mean reward"


def train_row(chunk: int, t: int, y: float, repeat: int | None = 2) -> dict:
    row = {"kind": "train", "chunk": chunk, "timestep": t, TRAIN: y}
    if repeat is not None:
        row["env_frames"] = t * repeat
    return row


def eval_row(chunk: int, t: int, y: float, **extra) -> dict:
    return {"kind": "eval", "chunk": chunk, "timestep": t, EVAL: y, **extra}


def make_run(
    root: Path,
    seeds: dict[int, list[dict]],
    repeat: int | None = 2,
    where: str = "identity",
    *,
    env_id: str = "probe",
    name: str = "run",
    identity: dict | None = None,
    config: dict | None = None,
) -> Path:
    """A run dir ``root/name`` with ``metrics/seed_<s>.jsonl`` and (repeat given) a
    run.json holding the env id and action repeat in ``identity.env`` or ``env_spec``,
    plus ``identity`` sections (agent, protocol) and a composed ``config``."""
    run_dir = root / name
    (run_dir / "metrics").mkdir(parents=True)
    for seed, rows in seeds.items():
        text = "".join(json.dumps(r) + "\n" for r in rows)
        (run_dir / "metrics" / f"seed_{seed}.jsonl").write_text(text)
    if repeat is not None:
        env = {"id": env_id, "action_repeat": repeat}
        data = {"identity": {"env": env}} if where == "identity" else {"env_spec": env}
        data.setdefault("identity", {}).update(identity or {})
        if config is not None:
            data["config"] = config
        (run_dir / "run.json").write_text(json.dumps(data))
    return run_dir


def two_seed_run(root: Path, repeat: int | None = 2, **kw) -> Path:
    """Seeds 0 and 1: train at t=10,20,30 (seed 1 lacks t=30), eval at t=0 and 20."""
    seeds = {
        0: [
            eval_row(0, 0, 1.0),
            train_row(1, 10, 2.0),
            train_row(2, 20, 4.0),
            eval_row(2, 20, 5.0),
            train_row(3, 30, 6.0),
        ],
        1: [
            eval_row(0, 0, 3.0),
            train_row(1, 10, 4.0),
            train_row(2, 20, 8.0),
            eval_row(2, 20, 9.0),
        ],
    }
    return make_run(root, seeds, repeat, **kw)


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def by_kind(panels):
    return {p.kind: p for p in panels}


# ------------------------------------------------------------------------- x axis
@pytest.mark.parametrize("where", ["identity", "env_spec"])
def test_default_x_is_env_frames_eval_from_run_json(tmp_path, where):
    panels = by_kind(panel_series(two_seed_run(tmp_path, repeat=2, where=where)))
    train, ev = panels["train"], panels["eval"]
    assert train.seeds[0] == [(20, 2.0), (40, 4.0), (60, 6.0)]  # row env_frames
    assert ev.seeds[0] == [(0, 1.0), (40, 5.0)]  # timestep x action repeat 2
    assert ev.seeds[1] == [(0, 3.0), (40, 9.0)]
    for panel in panels.values():
        assert "env frames" in panel.xlabel and "action repeat 2" in panel.xlabel
        assert not panel.frames_fallback


def test_row_env_frames_win_over_run_json(tmp_path):
    seeds = {0: [eval_row(0, 10, 1.0, env_frames=30), eval_row(1, 20, 2.0)]}
    ev = by_kind(panel_series(make_run(tmp_path, seeds, repeat=2)))["eval"]
    assert ev.seeds[0] == [(30, 1.0), (40, 2.0)]


def test_agent_steps_axis(tmp_path):
    run_dir = two_seed_run(tmp_path)
    panels = by_kind(panel_series(run_dir, x="agent_steps"))
    assert panels["train"].seeds[0] == [(10, 2.0), (20, 4.0), (30, 6.0)]
    assert panels["eval"].seeds[1] == [(0, 3.0), (20, 9.0)]
    assert all(p.xlabel.startswith("agent steps") for p in panels.values())
    assert "env frames" not in panels["eval"].xlabel
    with pytest.raises(ConfigError, match="env_frames, agent_steps"):
        panel_series(run_dir, x="frames")


def test_no_action_repeat_anywhere_falls_back_to_agent_steps_with_a_note(tmp_path):
    panels = by_kind(panel_series(two_seed_run(tmp_path, repeat=None)))
    ev, train = panels["eval"], panels["train"]
    assert ev.frames_fallback and ev.seeds[0] == [(0, 1.0), (20, 5.0)]
    assert ev.xlabel.startswith("agent steps") and "env frames unknown" in ev.xlabel
    assert not train.frames_fallback and train.seeds[0][0] == (20, 2.0)
    assert train.xlabel.startswith("env frames")


def test_load_curves_and_mean_curve_keep_their_meaning(tmp_path):
    run_dir = two_seed_run(tmp_path)
    curves = load_curves(run_dir)  # agent steps, as before
    assert curves["train"][0] == [(10, 2.0), (20, 4.0), (30, 6.0)]
    assert curves["eval"][1] == [(0, 3.0), (20, 9.0)]
    assert mean_curve(curves["train"]) == [(10, 3.0), (20, 6.0)]
    assert mean_curve({}) == []
    assert load_curves(run_dir, x="env_frames")["eval"][0] == [(0, 1.0), (40, 5.0)]


# ------------------------------------------------------------- mean, band, markers
def test_mean_and_band_at_common_x(tmp_path):
    panels = by_kind(panel_series(two_seed_run(tmp_path)))
    train = panels["train"]
    assert train.mean == [(20, 3.0), (40, 6.0)]  # t=30 only in seed 0
    assert train.band == [(20, 2.0, 4.0), (40, 4.0, 8.0)]
    assert panels["eval"].band == [(0, 1.0, 3.0), (40, 5.0, 9.0)]
    assert spread_band({0: [(1, 2.0)]}) == []


def test_single_seed_has_no_mean_or_band(tmp_path):
    seeds = {3: [train_row(1, 10, 1.0), eval_row(1, 10, 2.0)]}
    for panel in panel_series(make_run(tmp_path, seeds)):
        assert list(panel.seeds) == [3] and panel.mean == [] and panel.band == []


def legend_texts(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_eval_lines_have_markers_even_with_one_point_per_seed(tmp_path):
    seeds = {
        s: [train_row(1, 10, s), train_row(2, 20, s + 1.0), eval_row(2, 20, 5.0 + s)]
        for s in (0, 1)
    }
    fig = build_figure(panel_series(make_run(tmp_path, seeds)), "demo")
    train_ax, eval_ax = fig.axes
    eval_lines = eval_ax.get_lines()
    assert {ln.get_label() for ln in eval_lines} >= {"seed 0", "seed 1", "mean of 2"}
    for line in eval_lines:
        assert len(line.get_xdata()) == 1
        assert line.get_marker() not in (None, "None", "", " ") and line.get_markersize() > 0
    # the one-x band is drawn as a bar, labelled in the legend
    assert any(c.get_label() == BAND_LABEL for c in eval_ax.collections)
    assert BAND_LABEL in legend_texts(eval_ax) and BAND_LABEL in legend_texts(train_ax)
    # multi-point multi-seed train lines stay plain
    seed_lines = [ln for ln in train_ax.get_lines() if ln.get_label().startswith("seed")]
    assert all(ln.get_marker() in (None, "None", "") for ln in seed_lines)


def test_figure_band_is_shaded_between_min_and_max(tmp_path):
    fig = build_figure(panel_series(two_seed_run(tmp_path)))
    train_ax = fig.axes[0]
    (band,) = [c for c in train_ax.collections if c.get_label() == BAND_LABEL]
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(2.0) and ys.max() == pytest.approx(8.0)


# ---------------------------------------------------------------------- reference
def test_reference_seeds_are_averaged_with_spread(tmp_path):
    csv = write_csv(
        tmp_path / "tdmpc2_walker.csv",
        "env_frames,return,seed\n0,10,0\n0,20,1\n100000,300,0\n100000,500,1\n",
    )
    ref = load_reference(csv)
    assert ref.label == "tdmpc2_walker" and ref.x == [0.0, 100000.0]
    assert ref.mean == [15.0, 400.0] and ref.lo == [10.0, 300.0] and ref.hi == [20.0, 500.0]
    assert ref.has_spread
    panels = by_kind(panel_series(two_seed_run(tmp_path), reference=csv, label="paper"))
    assert panels["train"].reference is None
    assert panels["eval"].reference.label == "paper"
    eval_ax = build_figure(list(panels.values())).axes[1]
    assert "paper" in legend_texts(eval_ax) and "paper min..max" in legend_texts(eval_ax)
    (line,) = [ln for ln in eval_ax.get_lines() if ln.get_label() == "paper"]
    assert list(line.get_ydata()) == [15.0, 400.0]


@pytest.mark.parametrize(
    "text", ["step,episode_reward\n0,1\n50,2\n", " Frames , Mean \n0,1\n50,2\n\n"]
)
def test_reference_column_aliases(tmp_path, text):
    ref = load_reference(write_csv(tmp_path / "r.csv", text))
    assert ref.x == [0.0, 50.0] and ref.mean == [1.0, 2.0] and not ref.has_spread


def test_reference_in_agent_steps_is_divided_by_action_repeat(tmp_path):
    csv = write_csv(tmp_path / "r.csv", "env_frames,return\n0,1\n200,2\n")
    ev = by_kind(panel_series(two_seed_run(tmp_path), x="agent_steps", reference=csv))["eval"]
    assert ev.reference.x == [0.0, 100.0] and ev.reference.label == "r"


@pytest.mark.parametrize(
    "text", [None, "x,y\n1,2\n", "env_frames,return\n", "env_frames,return\n1,abc\n"]
)
def test_bad_reference_is_one_config_error(tmp_path, text):
    path = tmp_path / "ref.csv"
    if text is not None:
        write_csv(path, text)
    with pytest.raises(ConfigError) as info:
        load_reference(path)
    msg = str(info.value)
    assert str(path) in msg and "env_frames" in msg and "return" in msg and "\n" not in msg


# ------------------------------------------------------------------ plot_run, CLI
def test_plot_run_writes_png_and_returns_its_path(tmp_path):
    run_dir = two_seed_run(tmp_path)
    csv = write_csv(tmp_path / "ref.csv", "env_frames,return\n0,1\n40,6\n")
    out = plot_run(run_dir, reference=csv)
    assert out == run_dir / "plots" / "learning_curves.png"
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert plot_run(run_dir, tmp_path / "s.png", x="agent_steps") == tmp_path / "s.png"


def test_cli_x_and_reference(tmp_path, capsys):
    run_dir = two_seed_run(tmp_path)
    csv = write_csv(tmp_path / "ref.csv", "step,mean\n0,1\n40,6\n")
    out = tmp_path / "c.png"
    args = [str(run_dir), "--out", str(out), "--x", "agent_steps", "--reference", str(csv)]
    assert main([*args, "--label", "paper"]) == 0
    assert capsys.readouterr().out.strip() == str(out) and out.exists()
    missing = tmp_path / "nope.csv"
    assert main([str(run_dir), "--reference", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and str(missing) in err
    assert main([str(tmp_path / "missing")]) == 2
    assert "no such run directory" in capsys.readouterr().err


# ---------------------------------------------- levels, y-range, notes, isolated points
TDMPC2 = {"name": "tdmpc2", "entry": "agents.tdmpc2.entry:ENTRY"}  # a composed agent section


def hlines(ax) -> dict[str, float]:
    """label -> y of the axes' horizontal lines (axhline: x 0..1 in axes units)."""
    return {
        ln.get_label(): float(ln.get_ydata()[0])
        for ln in ax.get_lines()
        if list(ln.get_xdata()) == [0, 1] and ln.get_ydata()[0] == ln.get_ydata()[1]
    }


def texts(ax) -> str:
    return "\n".join(t.get_text() for t in ax.texts)


def test_points_a_line_cannot_show_are_marked(tmp_path):
    """A training curve with NaN rows (no episode ended in those chunks): the points
    between two gaps get markers, the others stay a plain line."""
    nan = float("nan")
    ys = [nan, 5.0, nan, 6.0, 7.0]
    seeds = {s: [train_row(i + 1, 10 * (i + 1), y + s) for i, y in enumerate(ys)] for s in (0, 1)}
    train_ax = build_figure(panel_series(make_run(tmp_path, seeds))).axes[0]
    lines = {ln.get_label(): ln for ln in train_ax.get_lines()}
    for label in ("seed 0", "seed 1", "mean of 2"):
        assert lines[label].get_marker() not in (None, "None", ""), label
        assert list(lines[label].get_markevery()) == [1], label


def test_levels_are_drawn_and_kept_in_the_y_range(tmp_path):
    """40 evaluations from -500 to -461 on acrobot: the random-policy and solved levels
    are horizontal lines and in view, so the climb fills a tenth of the panel, not all."""
    seeds = {0: [eval_row(i, 10 * i, -500.0 + i) for i in range(40)]}
    eval_ax = build_figure(panel_series(make_run(tmp_path, seeds, 1, env_id="acrobot"))).axes[1]
    facts = episode_returns("acrobot")
    assert sorted(hlines(eval_ax).values()) == [facts.random, facts.solved] == [-498.9, -100.0]
    lo, hi = eval_ax.get_ylim()
    assert lo <= -500 and hi >= -100 and 39 / (hi - lo) < 0.1
    assert "no reference" not in texts(eval_ax)  # the solved level is one


def test_a_panel_without_reference_says_so_and_spans_a_quarter_of_the_returns(tmp_path):
    seeds = {0: [eval_row(i, 10 * i, 20.0 + i) for i in range(5)]}
    run_dir = make_run(tmp_path, seeds, env_id="point_mass_easy")
    eval_ax = build_figure(panel_series(run_dir)).axes[1]
    assert "no reference: no published curve or solved level for point_mass_easy" in texts(eval_ax)
    assert "random-policy level of point_mass_easy: not measured" in texts(eval_ax)
    lo, hi = eval_ax.get_ylim()  # DMC returns: 0..1000; data 20..24
    assert hi - lo >= 250 and -50 < lo < 0 and hi > 250 and hlines(eval_ax) == {}


def test_the_paper_level_is_on_its_metric_panel(tmp_path):
    seeds = {0: [train_row(1, 10, 5.0), eval_row(1, 10, 7.0)]}
    ident = {"agent": {"name": "tdmpc2"}}
    run_dir = make_run(
        tmp_path, seeds, env_id="walker_walk", identity=ident, config={"agent": TDMPC2}
    )
    train_ax, eval_ax = build_figure(panel_series(run_dir)).axes
    final = paper_curves.curve(TDMPC2, "walker_walk").final_level()
    (label,) = hlines(eval_ax)
    assert hlines(eval_ax)[label] == pytest.approx(final) and "tdmpc2 paper at 4M" in label
    assert eval_ax.get_ylim()[1] > final > 900 and "no reference" not in texts(eval_ax)
    assert "no reference on this panel (tdmpc2's paper: eval episodes)" in texts(train_ax)
    # a reference curve on the panel (--reference) replaces the note
    csv = write_csv(tmp_path / "r.csv", "env_frames,return\n0,1\n40,6\n")
    panels = by_kind(panel_series(run_dir, reference=csv, reference_kind="train"))
    assert not any(n.startswith("no reference") for n in panels["train"].notes)


def test_y_limits():
    assert y_limits([]) is None and y_limits([float("nan")]) is None
    assert y_limits([5.0, 5.0]) == (4.0, 6.0)  # flat, bounds unknown
    assert y_limits([-500.0, -460.0], (-500.0, 0.0)) == (-506.25, -368.75)  # >= 125 wide
    assert y_limits([990.0], (0.0, 1000.0)) == (737.5, 1012.5)  # moved inside the bounds
    assert y_limits([-1450.0, -180.0], (-3254.7, 0.0)) == (-1513.5, -116.5)  # wide enough


# ------------------------------------------------------------------------ overlay
def labelled_run(root: Path, name: str, env_id: str, seeds: list[int], lr: float) -> Path:
    """A run of the fake agent named ``name`` with the given seeds and learning rate."""
    rows = {s: [train_row(1, 10, 1.0 + s), eval_row(1, 10, 2.0 + s)] for s in seeds}
    ident = {"agent": {"name": "fake", "lr": lr}, "protocol": {"name": "quick", "seeds": seeds}}
    return make_run(root, rows, env_id=env_id, name=name, identity=ident)


def test_several_runs_are_overlaid_one_row_of_panels_per_env(tmp_path, capsys):
    a = labelled_run(tmp_path, "a", "pendulum", [0], 0.1)
    b = labelled_run(tmp_path, "b", "pendulum", [1, 2], 0.1)  # seeds launched separately
    c = labelled_run(tmp_path, "c", "cartpole", [0], 0.01)
    out = tmp_path / "overlay.png"
    assert main([str(a), str(b), str(c), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out) and out.read_bytes()[:4] == b"\x89PNG"
    axes = overlay_figure(overlay_panels([a, b, c])).axes
    assert [ax.get_title() for ax in axes] == [
        "pendulum: training episodes",
        "pendulum: evaluation episodes",
        "cartpole: training episodes",
        "cartpole: evaluation episodes",
    ]
    labels = legend_texts(axes[1])
    assert "fake quick: protocol.seeds=[0]" in labels  # the env is the panel's title
    assert "fake quick: protocol.seeds=[1,2] (mean of 2 seeds)" in labels
    assert "fake quick" in legend_texts(axes[3]) and "random policy: 23" in legend_texts(axes[3])
    # the one-point lines are marked; a sweep directory overlays the runs below it
    assert all(ln.get_marker() not in (None, "None", "") for ln in axes[1].get_lines()[:2])
    assert main([str(tmp_path)]) == 0
    assert Path(capsys.readouterr().out.strip()).parent == tmp_path / "plots"


def test_run_labels_fall_back_to_the_directory_name():
    same = {"agent": "fake", "env_id": "pendulum", "identity": {"agent": {"name": "fake"}}}
    bare = {"agent": None, "env_id": None, "identity": {}}
    assert run_labels([same, same, bare], ["r1", "r2", "r3"]) == ["fake (r1)", "fake (r2)", "r3"]


# ------------------------------------------- overlays of two agents, mixed protocols
COMPOSED = {
    "tdmpc2 quick": ["protocol=quick"],
    "dreamerv3 quick": ["agent=dreamerv3", "protocol=quick"],
    "tdmpc2 smoke": ["protocol=smoke"],
    "tdmpc2 quick 256": ["protocol=quick", "agent.num_samples=256"],
}


@pytest.fixture(scope="module")
def identities() -> dict[str, dict]:
    """The run identities ``python -m launcher`` records for :data:`COMPOSED` (composed
    and validated, nothing trained): TD-MPC2 and DreamerV3 differ in 87 keys, quick and
    smoke in 20."""
    from launcher.config.compose import compose_spec
    from launcher.config.identity import identity

    return {name: identity(compose_spec(overrides)) for name, overrides in COMPOSED.items()}


def facts_of(ident: dict) -> dict:
    return {"agent": ident["agent"]["name"], "env_id": ident["env"]["id"], "identity": ident}


def composed_run(root: Path, name: str, ident: dict, seeds: list[int], n: int) -> Path:
    """A run dir with ``ident`` in its run.json and ``n`` chunks of rows per seed."""
    rows = {
        s: [
            r
            for i in range(1, n + 1)
            for r in (train_row(i, 20 * i, -1400.0 + 90 * i + s), eval_row(i, 20 * i, -1300.0))
        ]
        for s in seeds
    }
    return make_run(root, rows, repeat=1, env_id=ident["env"]["id"], name=name, identity=ident)


def test_labels_of_two_agents_name_the_agents_not_their_87_keys(identities):
    tq, dq, t256 = (identities[k] for k in ("tdmpc2 quick", "dreamerv3 quick", "tdmpc2 quick 256"))
    names = ["a", "b", "c"]
    assert run_labels([facts_of(tq), facts_of(dq)], names[:2]) == [
        "tdmpc2 quick",
        "dreamerv3 quick",
    ]
    # a key two runs of one agent differ in is named; DreamerV3, which lacks it, is not
    # said to leave it unset, a TD-MPC2 run would be
    assert run_labels([facts_of(i) for i in (tq, t256, dq)], names) == [
        "tdmpc2 quick: agent.num_samples=128",
        "tdmpc2 quick: agent.num_samples=256",
        "dreamerv3 quick",
    ]
    old = {**tq, "agent": {k: v for k, v in tq["agent"].items() if k != "num_samples"}}
    assert run_labels([facts_of(old), facts_of(t256)], names[:2]) == [
        "tdmpc2 quick: agent.num_samples unset",
        "tdmpc2 quick: agent.num_samples=256",
    ]
    # an agent-neutral key both agents have is named across agents
    seeds = {**dq, "protocol": {**dq["protocol"], "seeds": [1]}}
    assert run_labels([facts_of(tq), facts_of(seeds)], names[:2]) == [
        "tdmpc2 quick: protocol.seeds=[0]",
        "dreamerv3 quick: protocol.seeds=[1]",
    ]


def test_labels_of_mixed_protocols_name_the_protocol_and_the_episode_length(identities):
    """quick and smoke differ in 20 keys, all but the episode length set by the protocol
    (its own keys, and the agent keys of agent_protocol/tdmpc2_smoke.yaml)."""
    runs = [identities[k] for k in ("tdmpc2 quick", "dreamerv3 quick", "tdmpc2 smoke")]
    assert run_labels([facts_of(i) for i in runs], ["a", "b", "c"]) == [
        "tdmpc2 quick: env.episode_length=null",
        "dreamerv3 quick: env.episode_length=null",
        "tdmpc2 smoke: env.episode_length=20",
    ]


def test_overlay_of_two_agents_and_mixed_protocols_renders_without_warnings(
    tmp_path, identities, recwarn
):
    """Three runs mixing quick and smoke (the figure matplotlib once cut with "axes sizes
    collapsed to zero"): no warning, a PNG, and each panel's legend lies under its axes and
    inside the figure."""
    runs = [
        composed_run(tmp_path, "tq", identities["tdmpc2 quick"], [0, 1, 2], 6),
        composed_run(tmp_path, "dq", identities["dreamerv3 quick"], [0, 1, 2], 6),
        composed_run(tmp_path, "ts", identities["tdmpc2 smoke"], [0], 2),
    ]
    out = plot_overlay(runs, tmp_path / "overlay.png")
    assert out.read_bytes()[:4] == b"\x89PNG"
    fig = overlay_figure(overlay_panels(runs))
    fig.draw_without_rendering()
    width, height = fig.bbox.width, fig.bbox.height
    for ax in fig.axes:
        box, legend = ax.get_window_extent(), ax.get_legend().get_window_extent()
        assert legend.y1 < box.y0 and box.height > 0  # below the axes: covers no curve
        assert legend.x0 >= 0 and legend.y0 >= 0 and legend.x1 <= width and legend.y1 <= height
    assert "tdmpc2 smoke: env.episode_length=20" in legend_texts(fig.axes[1])
    # the smoke run's 20-step episodes have no measured random level: the note names it
    # (notes wrapped to the panel: compared with their line breaks as spaces)
    note = "random-policy level of pendulum: not measured (tdmpc2 smoke: env.episode_length=20)"
    assert note in " ".join(texts(fig.axes[1]).split())
    assert [str(w.message) for w in recwarn] == []


def test_a_long_label_is_wrapped_to_the_panel(tmp_path):
    """Two runs of one agent differing in two long lists: the legend breaks the label into
    lines of at most LABEL_WIDTH characters."""
    long = [list(range(40)), list(range(41))]
    runs = [
        labelled_run(tmp_path, name, "pendulum", seeds, lr=0.1)
        for name, seeds in (("a", long[0]), ("b", long[1]))
    ]
    labels = legend_texts(overlay_figure(overlay_panels(runs)).axes[0])
    lines = [line for label in labels for line in label.split("\n")]
    assert any("\n" in label for label in labels)
    assert max(len(line) for line in lines) <= LABEL_WIDTH
