"""What DreamerV3's ``protocol=quick`` covers (issue 30, item 13; docs/launcher.md): the
training episodes its rows hold per env family, as the docs say, and the longer run the
docs give for 500-step episodes stays a CPU-sized launch. Composition only."""

from __future__ import annotations

from pathlib import Path

import pytest

import envs
from launcher.cli import compose_spec
from launcher.config import cpu_budget
from launcher.config.schema import RunSpec

DOCS = Path(__file__).parents[2] / "docs" / "launcher.md"
LONGER = "protocol.n_timesteps=16000"  # the docs' advice for 500-step episodes


def training_episodes(spec: RunSpec) -> int:
    """Episodes that end within the run at the env's time limit: each env's episode of T
    steps takes T + 1 rows (the first observation, then T steps; the dynamic collector),
    ``n_envs`` rows per tick."""
    facts = envs.facts(spec.env.id, spec.env.action_repeat, spec.env.episode_length)
    ticks = -(-spec.protocol.n_timesteps // spec.agent.n_envs)
    return ticks // (facts.episode_length + 1) * spec.agent.n_envs


@pytest.mark.parametrize(
    ("env", "extra", "episodes"),
    [
        ("pendulum", [], 24),  # T = 200: 3 rounds of 8 envs
        ("acrobot", [], 8),  # T = 500: one round, ending at row 4,008
        ("walker_walk", [], 8),  # DMC, 1,000 backend steps at repeat 2: T = 500
        ("acrobot", [LONGER], 24),
        ("walker_walk", [LONGER], 24),
    ],
)
def test_quick_holds_the_training_episodes_the_docs_say(env, extra, episodes):
    spec = compose_spec(["agent=dreamerv3", "protocol=quick", f"env={env}", *extra])
    assert training_episodes(spec) == episodes
    text = " ".join(DOCS.read_text().split())
    assert "On Pendulum (200 steps) its 6,000 rows hold 24 training episodes" in text
    assert "end their first episodes at row 4,008: one round of 8 training episodes" in text
    assert f"There add `{LONGER}` (3 rounds, 24 episodes;" in text


def test_the_longer_run_the_docs_advise_is_minutes_on_a_cpu():
    spec = compose_spec(["agent=dreamerv3", "protocol=quick", "env=acrobot", LONGER])
    assert cpu_budget.estimate(spec, cores=2).wall_s < 30 * 60  # measured: 12 min 16 s
