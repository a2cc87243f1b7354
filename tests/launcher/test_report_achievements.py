"""analysis.achievements on synthetic run dirs (issue 46): the Crafter score's figure with
the published points labelled as pixel results, the per-achievement table of the last
evaluation (mean over seeds), both written by the report (``python -m analysis RUN_DIR``,
which prints the table) and neither for a run without a score."""

from __future__ import annotations

import json
from pathlib import Path

from agents.common import achievements as logged
from analysis import achievements
from analysis.cli import main

SCORE, RATE = "Eval/crafter_score", "Eval/achievements/"
RETURN = "Eval/episodic mean reward"


def eval_row(t: int, wood: float, stone: float, score: float, ret: float) -> dict:
    return {
        "kind": "eval",
        "chunk": t // 100,
        "timestep": t,
        RETURN: ret,
        f"{RATE}collect_wood": wood,
        f"{RATE}place_stone": stone,
        SCORE: score,
    }


def train_row(t: int) -> dict:
    return {"kind": "train", "chunk": t // 100, "timestep": t, "env_frames": t, "Train/x": 1.0}


def make_run(root: Path, seeds: dict[int, list[dict]], env_id: str = "craftax_classic") -> Path:
    run = root / "run"
    (run / "metrics").mkdir(parents=True)
    for seed, rows in seeds.items():
        (run / "metrics" / f"seed_{seed}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows)
        )
    identity = {"env": {"id": env_id, "action_repeat": 1}, "agent": {"name": "dreamerv3"}}
    (run / "run.json").write_text(json.dumps({"identity": identity}))
    return run


def crafter_run(root: Path) -> Path:
    """Seed 0: evaluations at 0 and 200; seed 1 at 0, 200 and 300 (its last is later)."""
    return make_run(
        root,
        {
            0: [eval_row(0, 0, 0, 0.0, 0.5), train_row(100), eval_row(200, 50, 10, 4.0, 3.3)],
            1: [
                eval_row(0, 10, 0, 0.5, 1.0),
                eval_row(200, 60, 0, 3.0, 2.0),
                eval_row(300, 90, 20, 6.0, 4.4),
            ],
        },
    )


def test_the_report_reads_the_names_the_agents_log():
    assert (achievements.SCORE_KEY, achievements.RATE_PREFIX) == (SCORE, RATE)
    assert (logged.SCORE_KEY, logged.RATE_PREFIX) == (SCORE, RATE)


def test_the_table_is_each_seeds_last_evaluation_and_their_mean(tmp_path):
    table = achievements.achievement_table(crafter_run(tmp_path))
    # seed 0's last is t=200, seed 1's t=300
    assert "agent step 200, 300" in table and "mean over 2 seeds" in table
    assert "| collect_wood | 70.0 | 50.0 | 90.0 |" in table  # (50 + 90) / 2
    assert "| place_stone | 15.0 | 10.0 | 20.0 |" in table
    assert "| **Crafter score** | **5.0** | 4.0 | 6.0 |" in table
    assert "| mean success rate | 42.5 | 30.0 | 55.0 |" in table  # (50+10)/2, (90+20)/2
    # 3.3 / 22 = 15%, 4.4 / 22 = 20%: the return as a share of Craftax-Classic's 22
    assert "| return, % of the maximum 22 | 17.5 | 15.0 | 20.0 |" in table
    assert "Published (pixel observations" in table
    assert (
        "Crafter score: DreamerV3 at 1M steps, pixels (Hafner et al., arXiv 2301.04104): 14.5"
        in (table)
    )
    assert "DreamerV3 at 1M steps, pixels (Dedieu et al., arXiv 2502.01591): 53.2" in table


def test_the_score_panel_has_the_seeds_their_mean_and_the_pixel_reference(tmp_path):
    panel = achievements.score_panel(crafter_run(tmp_path))
    assert panel.seeds == {0: [(0, 0.0), (200, 4.0)], 1: [(0, 0.5), (200, 3.0), (300, 6.0)]}
    assert panel.mean == [(0, 0.25), (200, 3.5)]  # where both seeds evaluated
    assert panel.band == [(0, 0.0, 0.5), (200, 3.0, 4.0)]
    (level,) = panel.levels
    assert (level.kind, level.y) == ("reference", 14.5) and "pixels" in level.label
    assert panel.bounds == (0.0, 100.0) and panel.xlabel == "env frames"


def test_the_report_writes_and_prints_them(tmp_path, capsys):
    run = crafter_run(tmp_path)
    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    png, md = achievements.paths(run)
    assert png.stat().st_size > 0 and (run / "plots" / "learning_curves.png").exists()
    assert md.read_text() == achievements.achievement_table(run)
    assert "| collect_wood | 70.0 |" in out and f"{png}\n{md}\n" in out


def test_a_run_without_a_score_gets_neither(tmp_path, capsys):
    run = make_run(tmp_path, {0: [train_row(100), {"kind": "eval", "timestep": 100, RETURN: 1.0}]})
    assert achievements.write_report(run) is None and achievements.achievement_table(run) is None
    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    assert out == f"{run / 'plots' / 'learning_curves.png'}\n"
    assert not any(p.exists() for p in achievements.paths(run))
