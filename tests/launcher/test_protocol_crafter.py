"""``protocol=crafter`` (issue 46): each value pinned to the `crafter` block and defaults of
danijar/dreamerv3 @ 29eb964 ``dreamerv3/configs.yaml``, and its dry-run plan. Composition
only: nothing is built, trained or compiled.

The reference values are written here with their lines. Where the reference's git snapshot is
on this machine (``REFERENCE_GIT``), the file itself is read and each value and line checked
against it (the file is read, never copied into the repository).
"""

from __future__ import annotations

import pytest
from reference_configs import check_pinned

from launcher.cli import compose_spec
from launcher.tools import dry_run

# (key path in the YAML, value, line of configs.yaml@29eb964 that sets it)
CRAFTER = {
    ("crafter", "run", "num_envs"): (1, 223),
    ("crafter", "run", "train_ratio"): (512, 227),
    ("crafter", "run", "steps"): (1.1e6, 228),
    ("crafter", "task"): ("crafter_reward", 221),
    ("crafter", "run", "log_keys_max"): ("^log_achievement_.*", 224),
    ("defaults", "seed"): (0, 3),
    ("defaults", "run", "eval_initial"): (True, 50),
    ("defaults", "batch_size"): (16, 91),
    ("defaults", "batch_length"): (65, 92),
    ("defaults", "replay_context"): (1, 96),
    ("defaults", "opt", "lr"): (4e-5, 99),
    ("defaults", "opt", "warmup"): (1000, 99),
    ("defaults", "dyn", "rssm", "deter"): (8192, 113),
    ("defaults", "dyn", "rssm", "hidden"): (1024, 113),
    ("defaults", "dyn", "rssm", "classes"): (64, 113),
    ("defaults", "enc", "simple", "units"): (1024, 117),
}


def test_the_pinned_values_are_the_reference_files():
    config = check_pinned(CRAFTER)
    # the block sets no size: the defaults are size200m's widths
    assert not any(k.startswith("size") or k == "<<" for k in config["crafter"])
    size200m = config["size200m"]
    assert size200m["dyn.rssm"] == {"deter": 8192, "hidden": 1024, "classes": 64}
    assert size200m[r".*\.units"] == 1024


def test_protocol_crafter_composes_the_reference_values():
    spec = compose_spec(["agent=dreamerv3", "protocol=crafter"])
    p, a = spec.protocol, spec.agent

    def ref(*path):
        return CRAFTER[path][0]

    assert p.name == "crafter" and spec.env.id == "craftax_classic"
    assert spec.env.action_repeat == 1 and spec.env.episode_length is None  # Craftax's 10,000
    assert p.n_timesteps == ref("crafter", "run", "steps")
    assert list(p.seeds) == [ref("defaults", "seed")]
    assert p.eval_at_start is ref("defaults", "run", "eval_initial")
    assert a.n_envs == ref("crafter", "run", "num_envs")
    assert a.train_ratio == ref("crafter", "run", "train_ratio")
    # batch_length counts the trained steps: the reference's 65 less its 1 context step
    assert a.batch_length == ref("defaults", "batch_length") - ref("defaults", "replay_context")
    assert a.batch_size == ref("defaults", "batch_size")
    assert a.learning_rate == ref("defaults", "opt", "lr")
    assert a.warmup == ref("defaults", "opt", "warmup")
    assert a.model_size == "200m" and a.eval_episodes == p.eval_episodes == 10


def test_the_dry_run_plans_it_with_its_accelerator_hours():
    """No figure for 200m (never timed here): unknown, with the CPU hours for comparison; at
    the measured 12m the plan gives 1.1M rows x 0.0122 s."""
    job = dry_run.estimate(compose_spec(["agent=dreamerv3", "protocol=crafter"]), cores=1)
    assert (job.env, job.model_size, job.seeds, job.agent_steps, job.env_frames) == (
        "craftax_classic",
        "dreamerv3_200m",
        1,
        1_100_000,
        1_100_000,
    )
    assert job.accelerator_hours is None and job.cpu_seconds > 0
    assert "unknown (no accelerator figure for agent=dreamerv3 model_size=dreamerv3_200m)" in (
        dry_run.format_plan([job], cores=1)
    )
    spec = compose_spec(["agent=dreamerv3", "protocol=crafter", "model_size=dreamerv3_12m"])
    job = dry_run.estimate(spec, cores=1)
    assert job.accelerator_hours == pytest.approx(1_100_000 * 0.0122 / 3600)
