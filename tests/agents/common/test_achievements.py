"""Achievements in evaluation and the Crafter score (issue 46, agents/common/achievements.py,
agents/common/loop.py ``eval_episodes``): the score against hand-computed values and a NumPy
float64 oracle; the success rates of a toy env's first episodes (the ending step counts, the
next episode does not); an env without achievements evaluates with the same program and keys
as before; and a launch's metrics rows carry the rates and the score."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from achievement_toy import NAMES, SHORT, make_env

import envs
from agents.common.achievements import (
    RATE_PREFIX,
    SCORE_KEY,
    achievement_metrics,
    crafter_score,
    success_rates,
)
from agents.common.loop import episode_metrics, eval_episodes, run_episodes

EPS = float(np.finfo(np.float32).eps)
# float32 score vs the exact value: log1p, the mean's sum and division, and expm1 each round
# once (<= 1 ulp relative, XLA's log1p/expm1 within 2); expm1 at x multiplies x's relative
# error by x <= ln(101) < 4.7. (2 + 2 + 4.7 * 4) ulp < 24 ulp; 32 leaves room for K-term sums
# of up to 8 rounding steps at the sizes tested (K <= 8).
RTOL = 32 * EPS


@pytest.mark.parametrize(
    ("rates", "score"),
    [
        ([0.0, 0.0, 0.0], 0.0),  # nothing unlocked: exp(0) - 1
        ([100.0] * 22, 100.0),  # everything always: exp(ln 101) - 1
        # ln(1) + ln(4) + ln(16) = ln(64); / 3 = ln(4); exp - 1 = 3
        ([0.0, 3.0, 15.0], 3.0),
        # (ln(1) + ln(100)) / 2 = ln(10); exp - 1 = 9 (an arithmetic mean would say 49.5)
        ([0.0, 99.0], 9.0),
    ],
)
def test_crafter_score_by_hand(rates, score):
    np.testing.assert_allclose(float(crafter_score(jnp.asarray(rates))), score, rtol=RTOL, atol=0)


def test_crafter_score_against_a_numpy_oracle():
    rng = np.random.default_rng(0)
    rates = rng.uniform(0.0, 100.0, size=(16, 8)).astype(np.float32)
    rates[:4, :3] = 0.0  # zeros, as most of Crafter's hard achievements
    oracle = np.expm1(np.mean(np.log1p(rates.astype(np.float64)), axis=-1))
    got = np.asarray(jax.jit(crafter_score)(rates))
    assert got.shape == (16,)
    np.testing.assert_allclose(got, oracle, rtol=RTOL, atol=0)


def test_success_rates_are_percent_of_episodes():
    unlocked = jnp.asarray([[1, 0, 1], [1, 0, 0], [1, 0, 0], [0, 0, 1]], bool)
    np.testing.assert_array_equal(success_rates(unlocked), [75.0, 0.0, 50.0])  # exact: k/4
    m = achievement_metrics(NAMES, unlocked)
    assert list(m) == [f"{RATE_PREFIX}{n}" for n in NAMES] + [SCORE_KEY]
    np.testing.assert_allclose(  # (ln 76 + ln 1 + ln 51) / 3
        float(m[SCORE_KEY]), np.expm1(np.log(76 * 51) / 3), rtol=RTOL, atol=0
    )


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_eval_counts_each_envs_first_episode(mode):
    """64 envs of the toy (T = 5), random actions.

    Dynamic mode (DreamerV3's): the rates are those of the first episodes' kinds, read off
    their returns (3 or T); a b = 1 env's next episode may unlock wood, which must not count.
    Static mode (TD-MPC2's): every env steps T times in lockstep (the collector goes on past
    the toy's termination), so the kinds are not in the returns, but each env has one kind:
    wood and diamond together (b = 0), or stone (b = 1)."""
    T, n, key = 5, 64, jax.random.key(3)
    env = make_env(1, T)
    m = jax.jit(lambda k: eval_episodes(env, n, mode, None, None, k))(key)
    returns = np.asarray(m["Eval/episode returns"])
    np.testing.assert_array_equal(returns, run_episodes(env, n, mode, None, None, key))
    got = np.asarray([m[f"{RATE_PREFIX}{name}"] for name in NAMES])
    if mode == "static":
        assert set(returns) == {float(T)}
        wood, stone, diamond = got
        assert wood == diamond and wood + stone == 100.0 and 0 < stone < 100
    else:
        short = returns == SHORT
        assert set(returns) == {float(SHORT), float(T)} and 0 < short.sum() < n  # both kinds
        rates = np.stack([~short, short, ~short]).mean(axis=1, dtype=np.float32)
        want = np.float32(100.0) * rates
        np.testing.assert_array_equal(got, want)  # k/64 is exact; x 100 rounds once, as here
    oracle = np.expm1(np.mean(np.log1p(got.astype(np.float64))))
    np.testing.assert_allclose(float(m[SCORE_KEY]), oracle, rtol=RTOL, atol=0)


def test_an_env_without_achievements_evaluates_as_before():
    """Same keys, same program: the jaxpr of ``eval_episodes`` is the one of
    ``episode_metrics(run_episodes(...))`` that the agents ran before issue 46."""
    env = envs.make("cartpole")

    def before(k):
        return episode_metrics(run_episodes(env, 3, "dynamic", None, None, k))

    def after(k):
        return eval_episodes(env, 3, "dynamic", None, None, k)

    key = jax.random.key(0)
    assert env.spec.achievements == ()
    assert str(jax.make_jaxpr(after)(key)) == str(jax.make_jaxpr(before)(key))
    assert set(jax.eval_shape(after, key)) == {"Eval/episodic mean reward", "Eval/episode returns"}


def test_a_launch_logs_the_rates_and_the_score(tmp_path, capsys):
    """DreamerV3 at protocol=smoke on the toy as a user's env: every eval row of the metrics
    file (the record every output is fed from) carries each rate and the score, in range;
    train rows carry none."""
    from launcher.cli import main

    run = tmp_path / "run"
    code = main(
        [
            "agent=dreamerv3",
            "protocol=smoke",
            "env=custom",
            "env.factory=achievement_toy:make_env",
            "env.id=achievement_toy",
            "logger=disabled",
            "hydra/job_logging=none",
            "hydra/hydra_logging=none",
            f"hydra.run.dir={run}",
        ]
    )
    assert code == 0, capsys.readouterr().err[-2000:]
    rows = [json.loads(line) for line in (run / "metrics" / "seed_0.jsonl").open()]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert evals and any(r["kind"] == "train" for r in rows)
    keys = [f"{RATE_PREFIX}{name}" for name in NAMES] + [SCORE_KEY]
    for r in evals:
        for key in keys:  # 2 episodes per evaluation: each rate is 0, 50 or 100
            assert key in r and 0.0 <= r[key] <= 100.0
        assert r[f"{RATE_PREFIX}stone"] + r[f"{RATE_PREFIX}wood"] == 100.0  # one kind each
    assert not any(k in r for r in rows if r["kind"] == "train" for k in keys)


def _full_scan_first_episodes(env, n, key):
    """Oracle for the early-stopping evaluation loop: tick the collector all T + 1 ticks
    (the loop before it stopped early) and keep each env's first ended episode's return
    and achievements, computed here from the rows and the env states."""
    from envs.row_collector import RowCollector

    col = RowCollector(env, n, "dynamic")
    k_init, k_run = jax.random.split(key)
    state = col.init(k_init)
    returns, seen = np.zeros(n, np.float32), np.zeros(n, bool)
    unlocked = np.zeros((n, len(env.spec.achievements)), bool)
    tick = jax.jit(lambda s, i: col.tick(s, i, jax.random.fold_in(k_run, i), None))
    for i in range(env.spec.episode_length + 1):
        state, _, stats = tick(state, i)
        done = np.asarray(stats.done)
        returns = np.where(done & ~seen, np.asarray(stats.returns), returns)
        if env.spec.achievements:  # steps up to the first is_last belong to the first episode
            unlocked |= np.asarray(state.env_state.unlocked) & ~seen[:, None]
        seen |= done
    return returns, unlocked


def test_the_evaluation_stops_with_the_same_result_as_the_full_run():
    """The dynamic-mode evaluation stops once every env's first episode ended (a T = 10,000
    Craftax evaluation ran all 10,001 ticks before). Its returns and success rates equal a
    full T + 1 tick run's (exact: the same ticks, keys and float ops), for each of two seeds
    under the seed vmap (each seed's loop stops at the other's end, with its outputs kept)."""
    T, n = 40, 16
    env = make_env(1, T)
    keys = jax.random.split(jax.random.key(7), 2)
    got = jax.jit(jax.vmap(lambda k: eval_episodes(env, n, "dynamic", None, None, k)))(keys)
    for s in range(2):
        want_returns, want_unlocked = _full_scan_first_episodes(env, n, keys[s])
        np.testing.assert_array_equal(np.asarray(got["Eval/episode returns"])[s], want_returns)
        rates = np.asarray([got[f"{RATE_PREFIX}{name}"][s] for name in NAMES])
        np.testing.assert_array_equal(rates, np.float32(100.0) * want_unlocked.mean(0, np.float32))
    cartpole = envs.make("cartpole")  # variable lengths, no achievements; random actions
    key = jax.random.key(1)
    got = jax.jit(lambda k: run_episodes(cartpole, 8, "dynamic", None, None, k))(key)
    want, _ = _full_scan_first_episodes(cartpole, 8, key)
    assert len(set(want.tolist())) > 1  # the episodes end at different ticks
    np.testing.assert_array_equal(np.asarray(got), want)
