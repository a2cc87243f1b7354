"""The agents' committed paper tables (``agents/<agent>/paper_curves.json``, declared by
their entries' ``PaperReference``) and their loader and rebuild (analysis.paper_curves).

Spot values are the published ones; the regeneration test rebuilds each table from the
source files shipped in reference_results/ (README there: provenance, licences). Pure numpy:
nothing is compiled.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import json
import re
from pathlib import Path

import numpy as np
import pytest

import envs
from agents.dreamerv3.entry import ENTRY as DREAMERV3
from agents.tdmpc2.entry import ENTRY as TDMPC2
from analysis import paper_curves as pc

SRC = Path(__file__).resolve().parents[2] / "reference_results"  # shipped with the repo
SWEEP = importlib.resources.files("sweeps") / "sweep" / "dreamerv3_paper_dmc.yaml"
ENTRIES = {"dreamerv3": DREAMERV3, "tdmpc2": TDMPC2}


@pytest.fixture(scope="module")
def curves() -> dict[str, pc.PaperCurves]:
    return {name: pc.load(entry) for name, entry in ENTRIES.items()}


def _mean_at(c: pc.PaperCurve, x: int) -> float:
    return float(np.mean([y[list(xs).index(x)] for xs, y in c.seeds.values()]))


def test_spot_values_and_counts(curves):
    dv3, td = curves["dreamerv3"], curves["tdmpc2"]
    assert len(dv3.tasks()) == 18 and len(td.tasks()) == 22
    assert {len(dv3.curve(t).seeds) for t in dv3.tasks()} == {5}
    assert {len(td.curve(t).seeds) for t in td.tasks()} == {3}
    walker = dv3.curve("walker_walk")
    assert walker.reference_task == "dmc_walker_walk" and walker.metric == "train"
    assert _mean_at(walker, 490_000) == pytest.approx(881.0, abs=0.05)
    last = [_mean_at(dv3.curve(t), 490_000) for t in dv3.tasks()]
    assert np.mean(last) == pytest.approx(757.8, abs=0.05)
    swingup = td.curve("cartpole_swingup")
    assert swingup.metric == "eval" and swingup.budget_env_frames == 4_000_000
    assert _mean_at(swingup, 100_000) == pytest.approx(839.4, abs=0.05)
    assert td.curve("humanoid_run").budget_env_frames == 14_000_000
    sparse = td.curve("cartpole_swingup_sparse")
    assert sparse.budget_env_frames == 4_000_000 and int(sparse.seeds[3][0][-1]) == 3_900_000
    assert dv3.curve("fish_swim") is None and td.curve("pendulum") is None
    agent = {"name": "dreamerv3", "entry": "agents.dreamerv3.entry:ENTRY"}
    assert pc.curve(agent, "cup_catch").reference_task == "dmc_ball_in_cup_catch"
    assert pc.curve({"name": "nope"}, "cup_catch") is None  # no entry: no curve
    assert pc.load(DREAMERV3) is dv3  # cached


def test_task_maps_match_registry_and_sweep(curves):
    registry = set(envs.list_envs())
    for name, entry in ENTRIES.items():
        mapping = entry.tables.paper.tasks
        assert set(mapping.values()) <= registry
        assert sorted(mapping.values()) == curves[name].tasks()
        assert {curves[name].curve(e).reference_task for e in mapping.values()} == set(mapping)
    absent = TDMPC2.tables.paper.no_counterpart
    assert len(absent) == 17 and not {t.replace("-", "_") for t in absent} & registry
    assert not set(absent) & set(TDMPC2.tables.paper.tasks)
    assert curves["tdmpc2"].no_counterpart() == list(absent)
    assert curves["dreamerv3"].no_counterpart() == []
    sweep_map = dict(re.findall(r"^#\s+(dmc_\w+) -> (\w+)$", SWEEP.read_text(), re.MULTILINE))
    assert sweep_map == DREAMERV3.tables.paper.tasks


@pytest.mark.parametrize(
    ("agent", "env_id"), [("dreamerv3", "walker_walk"), ("tdmpc2", "cartpole_swingup_sparse")]
)
def test_mean_band_and_window_means(curves, agent, env_id):
    raw = json.loads(pc.table_path(ENTRIES[agent].tables.paper).read_text())
    seeds = raw["tasks"][env_id]["seeds"]
    xs = {int(s): np.array(c["x"]) for s, c in seeds.items()}
    ys = {int(s): np.array(c["y"]) for s, c in seeds.items()}
    common = sorted(set.intersection(*(set(x.tolist()) for x in xs.values())))
    at = np.array([[ys[s][list(xs[s]).index(x)] for x in common] for s in sorted(xs)])
    curve = curves[agent].curve(env_id)
    x, mean, lo, hi = curve.mean_band()
    np.testing.assert_array_equal(x, common)
    np.testing.assert_allclose(mean, at.mean(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(lo, at.min(axis=0))
    np.testing.assert_array_equal(hi, at.max(axis=0))
    if agent == "tdmpc2":  # seed 3 ends at 3.9M: the band stops there
        assert x[-1] == 3_900_000 and len(x) == 40
    lo_f, hi_f = int(x[len(x) // 2]), int(x[-1]) + 100_000
    want = {s: ys[s][(xs[s] >= lo_f) & (xs[s] <= hi_f)].mean() for s in xs}
    got = curve.window_means(lo_f, hi_f)
    assert got.keys() == want.keys()
    for s in want:
        assert got[s] == pytest.approx(want[s], rel=1e-12)
    assert curve.window_means(-10, -1) == {}
    assert curve.points()[min(xs)][0] == (float(xs[min(xs)][0]), float(ys[min(xs)][0]))


def test_final_level_and_the_band_up_to_a_run_s_span(curves):
    """final_level: the acceptance rule's reference score (mean over seeds of the last
    10% of the budget); mean_band(upto): the points before a run's span and at most one
    at or past it."""
    walker = curves["tdmpc2"].curve("walker_walk")
    means = walker.window_means(3_600_000, 4_000_000)
    assert walker.final_level() == pytest.approx(np.mean(list(means.values())), rel=1e-12)
    assert curves["dreamerv3"].curve("walker_walk").final_level() == pytest.approx(
        np.mean(
            [
                _mean_at(curves["dreamerv3"].curve("walker_walk"), x)
                for x in range(450_000, 500_000, 10_000)
            ]
        ),
        rel=1e-12,
    )
    full = walker.mean_band()
    assert [len(a) for a in walker.mean_band(80)] == [2] * 4  # a 40-step smoke: 0 and 100K
    assert walker.mean_band(100_000)[0].tolist() == [0, 100_000]  # one at the span: no more
    assert walker.mean_band(150_000)[0].tolist() == [0, 100_000, 200_000]
    for cut, whole in zip(walker.mean_band(150_000), full, strict=True):
        np.testing.assert_array_equal(cut, whole[:3])
    assert len(walker.mean_band(1e9)[0]) == len(full[0])


def test_loaded_curves_are_read_only(curves):
    x, y = curves["tdmpc2"].curve("walker_walk").seeds[1]
    assert x.dtype == np.int64 and y.dtype == np.float64
    with pytest.raises(ValueError):
        y[0] = 0.0


def _fake_src(root: Path) -> Path:
    """A minimal source tree: 1 seed per task of the scores file, 2 per CSV (one short)."""
    records = [
        {"task": t, "method": "dreamerv3", "seed": 0, "xs": [10000.0, 20000.0], "ys": [1.0, 2.5]}
        for t in DREAMERV3.tables.paper.tasks
    ]
    (root / "dreamerv3").mkdir(parents=True)
    (root / DREAMERV3.tables.paper.files).write_bytes(gzip.compress(json.dumps(records).encode()))
    (root / "tdmpc2").mkdir()
    rows = "step,reward,seed\n3900000,7.5,2\n0,0.0,2\n4000000,9.0,1\n0,0.5,1\n"
    for t in (*TDMPC2.tables.paper.tasks, "dog-run"):
        (root / "tdmpc2" / f"{t}.csv").write_text(rows)
    return root


def test_build_on_a_fake_source(tmp_path, capsys):
    src = _fake_src(tmp_path / "src")
    table = pc.build(TDMPC2.tables.paper, src)
    assert table["format"] == 1 and len(table["sources"]) == 22
    walker = table["tasks"]["walker_walk"]
    assert walker["budget_env_frames"] == 4_000_000
    assert walker["seeds"] == {
        "1": {"x": [0, 4000000], "y": [0.5, 9.0]},
        "2": {"x": [0, 3900000], "y": [0.0, 7.5]},
    }
    seed0 = pc.build(DREAMERV3.tables.paper, src)["tasks"]["cup_catch"]["seeds"]["0"]
    assert seed0 == {"x": [10000, 20000], "y": [1.0, 2.5]}
    assert all(type(v) is int for v in seed0["x"])
    out = tmp_path / "curves.json"
    args = ["--agent", "tdmpc2", "--src", str(src), "--out", str(out)]
    assert pc.main(["build", *args]) == 0
    assert json.loads(out.read_text()) == table and out.read_text().endswith("}\n")
    assert pc.main(["check", *args]) == 0
    out.write_text(out.read_text().replace("9.0", "9.5"))
    capsys.readouterr()
    assert pc.main(["check", *args]) == 1
    assert "differs from a rebuild" in capsys.readouterr().err
    (src / "tdmpc2" / "new-task.csv").write_text("step,reward,seed\n")
    assert pc.main(["check", *args]) == 2
    assert "new-task" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["--agent", "tdmpc2", "--src", "{tmp}/absent"],
        ["--agent", "tdmpc2", "--src", "{tmp}"],
        ["--agent", "tdmpc2_multitask", "--src", "{tmp}"],  # declares no paper
    ],
)
def test_bad_input_is_one_error_line_exit_2(tmp_path, capsys, args):
    assert pc.main(["check", *(a.format(tmp=tmp_path) for a in args)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


@pytest.mark.parametrize("agent", sorted(ENTRIES))
def test_committed_table_is_a_rebuild_of_the_sources(agent):
    if not SRC.is_dir():
        pytest.skip(f"reference sources not present at {SRC}: regeneration not checked")
    ref = ENTRIES[agent].tables.paper
    raw = json.loads(pc.table_path(ref).read_text())
    for rel, digest in raw["sources"].items():
        assert hashlib.sha256((SRC / rel).read_bytes()).hexdigest() == digest, rel
    assert pc.dumps(pc.build(ref, SRC)) + "\n" == pc.table_path(ref).read_text()
    assert pc.main(["check", "--agent", agent, "--src", str(SRC)]) == 0
