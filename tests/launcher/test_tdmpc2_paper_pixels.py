"""TD-MPC2's published DMC-pixels curves (issue 48; ``agents/tdmpc2/paper.py``
``PAPER_PIXELS``, nicklashansen/tdmpc2 @ 88095e7 ``results/tdmpc2-pixels/*.csv``): the
committed table, a TD-MPC2 run with ``env.obs=image`` judged and drawn against them and a
vector run against the state curves. Synthetic run directories, as test_compare_images.py.

The CSVs are not shipped: where the reference's git snapshot is on this machine
(``REFERENCE_GIT``) they are read from it into a temporary folder (never into the
repository) and the table is checked against a rebuild and a value recomputed from them.
"""

from __future__ import annotations

import csv
import io
import subprocess
from pathlib import Path

import numpy as np
import pytest
from paper_runs import fake_paper_run

import envs
from agents.tdmpc2.entry import ENTRY
from agents.tdmpc2.paper import PAPER, PAPER_PIXELS
from analysis import levels, paper_curves, paper_line
from analysis.compare import judge_run, registered_identity

REFERENCE_GIT = Path("/work/.mirror/nicklashansen+tdmpc2/repo")
COMMIT = "88095e7"  # added results/tdmpc2-pixels/ (after b67b21c, the state CSVs' commit)
AGENT = {"name": "tdmpc2", "entry": "agents.tdmpc2.entry:ENTRY"}


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REFERENCE_GIT), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """The reference's ``results/`` folder at COMMIT, its pixel CSVs only (skips without
    the snapshot)."""
    try:
        names = _git("ls-tree", "--name-only", COMMIT, "results/tdmpc2-pixels/").split()
        root = tmp_path_factory.mktemp("reference") / "results"
        (root / "tdmpc2-pixels").mkdir(parents=True)
        for name in names:
            (root / "tdmpc2-pixels" / Path(name).name).write_text(_git("show", f"{COMMIT}:{name}"))
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("the TD-MPC2 reference's snapshot is not on this machine")
    return root


def test_the_pixel_table():
    table = paper_curves.load(ENTRY, "image")
    assert table.tasks() == sorted(PAPER_PIXELS.tasks.values()) and len(table.tasks()) == 10
    assert table.no_counterpart() == ["quadruped-run", "quadruped-walk"]
    # the same env ids as the state map, all in the registry
    assert set(PAPER_PIXELS.tasks.items()) <= set(PAPER.tasks.items())
    assert set(table.tasks()) <= set(envs.list_envs())
    for env_id in table.tasks():
        c = table.curve(env_id)
        assert (c.metric, c.budget_env_frames, sorted(c.seeds)) == ("eval", 2_000_000, [1, 2, 3])
        for x, _ in c.seeds.values():  # 0..2M env frames every 100K on every seed
            np.testing.assert_array_equal(x, np.arange(0, 2_000_001, 100_000))
    walker = table.curve("walker_walk")
    x, mean, _, _ = walker.mean_band()
    # the published walker-walk.csv: 961.2, 946.2, 940.1 at step 2000000 (their mean, to 0.01)
    assert mean[-1] == pytest.approx(949.17, abs=0.005)
    assert walker.final_level() == pytest.approx(960.3, abs=1e-9)  # 9 points 1.8M..2M
    assert paper_curves.curve(AGENT, "cartpole_balance", "image") is None  # no pixel curve


def test_the_table_is_a_rebuild_of_the_published_csvs(published):
    argv = ["check", "--agent", "tdmpc2", "--src", str(published), "--obs", "image"]
    assert paper_curves.main(argv) == 0
    assert {p.stem for p in (published / "tdmpc2-pixels").glob("*.csv")} == set(
        PAPER_PIXELS.tasks
    ) | set(PAPER_PIXELS.no_counterpart)
    # one value recomputed from the CSV itself: cheetah-run's mean over seeds at 2M frames
    text = (published / "tdmpc2-pixels" / "cheetah-run.csv").read_text()
    rows = [r for r in csv.DictReader(io.StringIO(text)) if int(r["step"]) == 2_000_000]
    want = np.mean([float(r["reward"]) for r in rows])
    _, mean, _, _ = paper_curves.curve(AGENT, "cheetah_run", "image").mean_band()
    assert len(rows) == 3 and mean[-1] == pytest.approx(want, rel=1e-12)


def walker_level() -> float:
    return paper_curves.curve(AGENT, "walker_walk", "image").final_level()


def fake_run(path: Path, ident: dict, value: float) -> Path:
    return fake_paper_run(path, ident, AGENT, value, "eval")


def test_an_image_run_is_judged_against_the_pixel_curves(tmp_path):
    ident = registered_identity("tdmpc2", "walker_walk", 2_000_000, "paper", "image")
    assert ident["env"]["obs"] == "image" and ident["protocol"]["n_timesteps"] == 1_000_000
    verdict, ref = judge_run(fake_run(tmp_path / "image", ident, 990.0))
    assert ref.budget_env_frames == 2_000_000  # the pixel table
    assert verdict.reasons == () and verdict.status == "pass"  # on the registered run
    assert verdict.window == (1_800_000, 2_000_000)
    eval_panel = levels.run_levels(tmp_path / "image")["eval"]
    (paper,) = [lv for lv in eval_panel.levels if lv.kind == "reference"]
    assert paper.label == "tdmpc2 paper at 2M frames: 960" and paper.y == walker_level()


def test_a_vector_run_keeps_the_state_curves(tmp_path):
    ident = registered_identity("tdmpc2", "walker_walk", 4_000_000)
    assert "obs" not in ident["env"]  # the default mode stays out of the identity
    verdict, ref = judge_run(fake_run(tmp_path / "vector", ident, 990.0))
    assert ref.budget_env_frames == 4_000_000 and verdict.reasons == ()
    # the vector registered run is not the image one: the image run names env.obs
    image = {**ident, "env": {**ident["env"], "obs": "image"}}
    verdict, ref = judge_run(fake_run(tmp_path / "image_4m", image, 990.0))
    assert ref.budget_env_frames == 2_000_000 and not verdict.judged
    assert any(r.startswith("protocol.n_timesteps: 2000000") for r in verdict.reasons)


def test_the_paper_line_of_an_image_run_is_the_pixel_curve():
    image = paper_line.wandb_reference_rows(AGENT, "walker_walk", 2, obs="image")
    vector = paper_line.wandb_reference_rows(AGENT, "walker_walk", 2)
    assert image[-1]["env_frames"] == 2_000_000 and image[-1]["timestep"] == 1_000_000
    assert vector[-1]["env_frames"] == 4_000_000
    assert paper_curves.protocol_of(AGENT, "image") == paper_curves.protocol_of(AGENT)
