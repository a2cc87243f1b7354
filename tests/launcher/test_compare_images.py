"""``--compare paper`` on an image run (issue 47): a DreamerV3 run with ``env.obs=image`` is
judged against the paper's DMC-vision curves (``tables.more_papers``) and the registered
``protocol=dmc_vision``; the same task's vector run keeps the proprio curves. Synthetic run
directories, as test_launcher_compare.py."""

from __future__ import annotations

from pathlib import Path

from paper_runs import fake_paper_run

from analysis import paper_line
from analysis.compare import judge_run, registered_identity

AGENT = {"name": "dreamerv3", "entry": "agents.dreamerv3.entry:ENTRY"}


def fake_run(path: Path, ident: dict, value: float) -> Path:
    return fake_paper_run(path, ident, AGENT, value, "train")


def test_an_image_run_is_judged_against_the_vision_curves(tmp_path):
    ident = registered_identity("dreamerv3", "walker_walk", 1_000_000, "dmc_vision")
    assert ident["env"]["obs"] == "image"
    verdict, ref = judge_run(fake_run(tmp_path / "image", ident, 990.0))
    assert ref.budget_env_frames == 1_000_000 and len(ref.seeds) == 10  # the vision table
    assert verdict.reasons == () and verdict.status == "pass"  # on the registered protocol
    assert verdict.window == (900_000, 1_000_000)


def test_a_vector_run_keeps_the_proprio_curves(tmp_path):
    ident = registered_identity("dreamerv3", "walker_walk", 500_000)
    assert "obs" not in ident["env"]  # the default mode stays out of the identity
    verdict, ref = judge_run(fake_run(tmp_path / "vector", ident, 990.0))
    assert ref.budget_env_frames == 500_000 and len(ref.seeds) == 5
    assert verdict.reasons == ()


def test_an_image_run_off_the_vision_protocol_names_its_differences(tmp_path):
    ident = registered_identity("dreamerv3", "walker_walk", 1_000_000, "dmc_vision")
    ident = {**ident, "protocol": {**ident["protocol"], "seeds": [0, 1]}}
    verdict, _ = judge_run(fake_run(tmp_path / "off", ident, 990.0))
    assert not verdict.judged and any("seeds" in r for r in verdict.reasons)


def test_the_paper_line_of_an_image_run_is_the_vision_curve():
    image = paper_line.wandb_reference_rows(AGENT, "walker_walk", 2, obs="image")
    vector = paper_line.wandb_reference_rows(AGENT, "walker_walk", 2)
    assert image[-1]["env_frames"] == 1_000_000 and vector[-1]["env_frames"] == 490_000
