"""DreamerV3 on Craftax-Classic under ``protocol=smoke`` (issue 46), through the command line's
``main`` in process (``python -m launcher agent=dreamerv3 env=craftax_classic protocol=smoke``:
symbolic, 1,345 floats an observation, 17 actions), and what its evaluations give: each of the
env's 22 achievements' success rate and the Crafter score in every eval row of the metrics
file, the run's end writing the score's figure and the achievements' table, and
``python -m launcher.evaluate RUN --video`` drawing an episode with Craftax's own renderer."""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest
from real_agents import assert_episode_video, rows

import envs
from analysis import achievements
from launcher.cli import main
from launcher.tools.evaluate import main as evaluate_main

SMOKE = ["agent=dreamerv3", "protocol=smoke", "logger=disabled", "env=craftax_classic"]
# float32 score vs float64 of the same rates: log1p, mean (22 terms), expm1, each a few ulp;
# expm1 at x <= ln(101) < 4.7 scales x's error by x: well under 64 ulp (2^-23 each).
RTOL = 64 * float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def craftax(tmp_path_factory):
    """The run dir of the command line's run; its stdout (the end-of-run summary)."""
    run_dir = tmp_path_factory.mktemp("craftax") / "run"
    args = [*SMOKE, "logger.progress=false", "hydra/job_logging=none", "hydra/hydra_logging=none"]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main([*args, f"hydra.run.dir={run_dir}"]) == 0
    return run_dir, out.getvalue()


def test_smoke_through_the_command_line(craftax):
    run_dir, stdout = craftax
    assert "chunks:       2/2" in stdout
    train = [r for r in rows(run_dir) if r["kind"] == "train"]
    assert [r["timestep"] for r in train] == [20, 40]
    assert train[-1]["Train/n_updates"] == 16 and np.isfinite(train[-1]["Train/loss"])
    assert np.isfinite(rows(run_dir)[-1]["Eval/episodic mean reward"])


def test_every_evaluation_logs_the_achievements_and_the_score(craftax):
    names = envs.make("craftax_classic").spec.achievements
    assert len(names) == 22 and "collect_wood" in names and "collect_diamond" in names
    evals = [r for r in rows(craftax[0]) if r["kind"] == "eval"]
    assert evals
    for r in evals:
        rates = np.asarray([r[f"Eval/achievements/{n}"] for n in names], np.float64)
        assert set(rates) <= {0.0, 50.0, 100.0}  # 2 episodes per evaluation
        oracle = np.expm1(np.mean(np.log1p(rates)))
        np.testing.assert_allclose(r["Eval/crafter_score"], oracle, rtol=RTOL, atol=0)
    png, md = achievements.paths(craftax[0])  # written by the run's end (the report)
    assert png.stat().st_size > 0
    table = md.read_text()
    assert all(f"| {n} |" in table for n in names) and "**Crafter score**" in table


def test_episode_video_through_craftaxs_renderer(craftax, capsys):
    run_dir = craftax[0]
    assert evaluate_main([str(run_dir), "--video"]) == 0
    out = capsys.readouterr().out
    path = run_dir / "videos" / "step_40" / "seed_0_episode_0.mp4"
    (line,) = [x for x in out.splitlines() if x.startswith("seed 0 episode 0:")]
    steps = int(re.search(r"over (\d+) steps", line)[1])
    assert line.endswith(f"{steps + 1} frames at 10 fps -> {path}") and 1 <= steps <= 20
    assert_episode_video(path, steps + 1)
