"""``protocol=dmc_vision`` (issue 47): each value pinned to the `dmc_vision` block and defaults
of danijar/dreamerv3 @ 29eb964 ``dreamerv3/configs.yaml``, its published curves
(``--compare paper`` on an image run) and its dry-run plan with the image's accelerator
estimate. Composition only: nothing is built, trained or compiled.

The reference values are written here with their lines; where the reference's git snapshot
is on this machine (``REFERENCE_GIT``) the file itself is read and each value and line
checked against it (read, never copied into the repository). The curves' source is not
shipped: where the reference checkout's ``scores/`` folder is here, the committed table is
checked against a rebuild from it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_configs import check_pinned, reference_text

import envs
from agents.dreamerv3.cost import accelerator_cost, train_flops
from agents.dreamerv3.entry import ENTRY
from analysis import paper_curves
from launcher.cli import compose_spec
from launcher.tools import dry_run

SCORES = Path("/root/refs/dreamerv3-ref/scores")  # the reference checkout (2411f7d's file)
AGENT = {"name": "dreamerv3", "entry": "agents.dreamerv3.entry:ENTRY"}

# (key path in the YAML, value, line of configs.yaml@29eb964 that sets it)
DMC_VISION = {
    ("dmc_vision", "task"): ("dmc_walker_walk", 241),
    ("dmc_vision", "run.train_ratio"): (512, 242),
    ("dmc_vision", "run.steps"): (6e5, 243),
    ("dmc_vision", "enc.spaces"): ("image", 244),
    ("dmc_vision", "dec.spaces"): ("image", 245),
    ("defaults", "run", "num_envs"): (16, 44),
    ("defaults", "batch_size"): (16, 91),
    ("defaults", "batch_length"): (65, 92),
    ("defaults", "replay_context"): (1, 96),
    ("size12m", "dyn.rssm"): ({"deter": 2048, "hidden": 256, "classes": 16}, 149),
    ("size12m", ".*\\.depth"): (16, 150),
}


def test_the_pinned_values_are_the_reference_files():
    check_pinned(DMC_VISION)
    lines = reference_text().splitlines()
    # the block's size is size12m (a YAML merge of its anchor)
    assert lines[239].strip() == "<<: *size12m" and lines[147].startswith("size12m: &size12m")


def test_protocol_dmc_vision_composes_the_reference_values():
    spec = compose_spec(["agent=dreamerv3", "protocol=dmc_vision"])
    p, a, env = spec.protocol, spec.agent, spec.env

    def ref(*path):
        return DMC_VISION[path][0]

    assert p.name == "dmc_vision" and env.id == ref("dmc_vision", "task").removeprefix("dmc_")
    assert env.obs == ref("dmc_vision", "enc.spaces") == ref("dmc_vision", "dec.spaces")
    assert env.action_repeat == 2
    # the curves' span: 1M env frames; the block's steps count 1.2M frames at repeat 2
    assert (
        p.n_timesteps * env.action_repeat
        == paper_curves.curve(AGENT, env.id, "image").budget_env_frames
    )
    assert p.n_timesteps < ref("dmc_vision", "run.steps")
    assert a.model_size == "12m" and a.deter_size == ref("size12m", "dyn.rssm")["deter"]
    assert a.cnn_depth_size == ref("size12m", ".*\\.depth")
    assert a.train_ratio == ref("dmc_vision", "run.train_ratio")
    assert a.n_envs == ref("defaults", "run", "num_envs")
    assert a.batch_size == ref("defaults", "batch_size")
    # batch_length counts the trained steps: the reference's 65 less its 1 context step
    assert a.batch_length == ref("defaults", "batch_length") - ref("defaults", "replay_context")
    assert list(p.seeds) == list(range(10))  # the published file's seeds
    # another DMC task keeps the image: the protocol sets env.obs after the env's file
    other = compose_spec(["agent=dreamerv3", "protocol=dmc_vision", "env=cheetah_run"])
    assert (other.env.id, other.env.obs) == ("cheetah_run", "image")


def test_the_image_curves_are_the_vision_table():
    image, vector = (paper_curves.curve(AGENT, "walker_walk", o) for o in ("image", "vector"))
    assert (image.budget_env_frames, vector.budget_env_frames) == (1_000_000, 500_000)
    assert len(image.seeds) == 10 and image.metric == "train"
    x, *_ = image.mean_band()
    assert x[0] == 20_000 and x[-1] == 1_000_000 and (x % 20_000 == 0).all()  # 20K bins
    assert paper_curves.protocol_of(AGENT, "image") == "dmc_vision"
    assert paper_curves.protocol_of(AGENT) == "paper"
    table = paper_curves.load(ENTRY, "image")
    assert table.no_counterpart() == ["dmc_quadruped_run", "dmc_quadruped_walk"]
    assert set(table.tasks()) == set(paper_curves.load(ENTRY).tasks())  # the 18 DMC ids


def test_the_vision_table_is_a_rebuild_of_the_published_file():
    if not (SCORES / "dmc_vision-dreamerv3.json.gz").is_file():
        pytest.skip("the reference checkout's scores/ folder is not on this machine")
    argv = ["check", "--agent", "dreamerv3", "--src", str(SCORES), "--obs", "image"]
    assert paper_curves.main(argv) == 0


class _Facts:
    obs_size, action_size, discrete, image_shape = 0, 6, False, (64, 64, 3)


def test_the_image_accelerator_figure_scales_the_measured_one():
    cfg = compose_spec(["agent=dreamerv3", "protocol=dmc_vision"]).agent
    cost = accelerator_cost(cfg, _Facts())
    ratio = train_flops(cfg, 0, 6, False, (64, 64, 3)) / train_flops(cfg, 24, 6, False)
    measured = ENTRY.tables.accelerator_seconds_per_step["12m"]
    assert cost.seconds_per_step == pytest.approx(measured.seconds_per_step * ratio)
    assert cost.derived.startswith("the 12m walker_walk vector figure")
    assert "x 3.23" in cost.derived  # 1387 / 429 GFLOP (agents/dreamerv3/cost.py)
    assert accelerator_cost(cfg, type("V", (), {"image_shape": None})()) is None  # vector


def test_the_dry_run_plans_it_with_its_accelerator_hours():
    try:
        envs.facts("walker_walk", 2, obs="image")
    except ValueError:
        pytest.skip("the DMC envs offer no image mode yet (envs/: rendering on the host)")
    job = dry_run.estimate(compose_spec(["agent=dreamerv3", "protocol=dmc_vision"]), cores=1)
    assert (job.env, job.model_size, job.seeds, job.agent_steps, job.env_frames) == (
        "walker_walk",
        "dreamerv3_12m",
        10,
        500_000,
        1_000_000,
    )
    assert job.cost.derived and job.accelerator_hours > 500_000 * 10 * 0.0122 / 3600
    assert "not measured: the 12m walker_walk vector figure" in dry_run.format_plan([job], 1)
