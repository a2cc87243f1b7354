"""The DreamerV3 agent on gymnax CartPole (discrete, terminating), tiny config, in process.

One module-scoped set of runs, compiled once per program (docs/design.md §13, agent tests):

the agent built for the whole run (``K`` ticks), trained as two chunks of ``K/2`` ticks,
and as one uninterrupted scan of ``K`` ticks.

Counters are exact (rows, updates from the schedule's closed form, replay rows, queue
pops); chunked and uninterrupted runs are bit-identical. A resumed run whose ring grows
(``DreamerV3.migrate``) is tested through the launcher
(``tests/launcher/test_launcher_dreamerv3.py``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from agents.dreamerv3.agent import DreamerV3
from tests.agents.dreamerv3.conftest import agent_config

K = 40  # ticks: 120 rows with 3 envs; the gate opens at tick 6
HALF = K // 2


def _raw(x):
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(x)
    return x


def _leaves(tree):
    return jax.tree_util.tree_flatten_with_path(jax.tree.map(_raw, tree))[0]


def assert_trees_equal(a, b):
    for (path, x), (_, y) in zip(_leaves(a), _leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), jax.tree_util.keystr(path))


@pytest.fixture(scope="module")
def runs():
    env = envs.make("cartpole")
    cfg = agent_config()
    full = DreamerV3(cfg, env, total_env_steps=cfg.n_envs * K)
    train = jax.jit(full.train)
    s0 = jax.jit(full.init)(jax.random.key(3))
    s1, m1 = train(s0, jnp.arange(HALF))
    s2, m2 = train(s1, jnp.arange(HALF, K))
    whole, mw = train(s0, jnp.arange(K))
    return dict(full=full, s1=s1, m1=m1, s2=s2, m2=m2, whole=whole, mw=mw)


def test_counters_are_exact(runs):
    full, s2, m1, m2 = runs["full"], runs["s2"], runs["m1"], runs["m2"]
    n = full.cfg.n_envs
    assert full.schedule.gate == (6, 19)  # env 0 of tick 6 brings the 4th item
    assert int(m1["timestep"]) == n * HALF and int(m2["timestep"]) == n * K
    assert int(m2["env_frames"]) == n * K  # gymnax: no action repeat
    assert int(m1["Train/n_updates"]) == full.schedule.updates_through(HALF - 1)
    assert int(m2["Train/n_updates"]) == full.schedule.updates_through(K - 1)
    # closed form: 1 + floor((n K - s0) / 2) updates, r = 10 / (4 * 5)
    assert int(m2["Train/n_updates"]) == 1 + (n * K - 19) // 2
    assert int(s2.replay.rows) == K and int(s2.tick) == K
    assert int(s2.train.updates) == int(m2["Train/n_updates"])
    # every window of 6 rows starting at 1 + 6k that ends by row K - 1 was queued and,
    # with 4 draws per update, popped
    assert int(s2.replay.popped) == n * ((K - 1) // 6)
    chunk2 = int(m2["Train/n_updates"]) - int(m1["Train/n_updates"])
    assert int(m2["Train/updates in chunk"]) == chunk2


def test_metrics_are_finite_and_episodes_end(runs):
    m2 = runs["m2"]
    assert int(m2["Train/episodes"]) > 0  # random CartPole episodes last ~20 steps
    assert np.isfinite(float(m2["Train/episodic mean reward"]))
    for key in ("Train/loss", "Train/dyn_loss", "Train/actor_loss", "Train/opt/grad_norm"):
        assert key in m2 and np.isfinite(float(m2[key])), key


def test_chunked_equals_uninterrupted(runs):
    assert_trees_equal(runs["s2"], runs["whole"])
    mw, m1, m2 = runs["mw"], runs["m1"], runs["m2"]
    assert int(mw["timestep"]) == int(m2["timestep"])
    assert int(mw["Train/n_updates"]) == int(m2["Train/n_updates"])
    assert int(mw["Train/episodes"]) == int(m1["Train/episodes"]) + int(m2["Train/episodes"])


def test_replay_rows_follow_the_collector(runs):
    """Per env: an is_last row is followed by an is_first row, its action is zero, and the
    other actions are one-hot (discrete); stored latents are valid class indices."""
    s2, cfg = runs["s2"], runs["full"].cfg
    r = jax.tree.map(np.asarray, s2.replay)
    rows = slice(0, K)  # the ring holds the whole run: row a at slot a
    first, last = r.is_first[:, rows], r.is_last[:, rows]
    assert first[:, 0].all()
    np.testing.assert_array_equal(first[:, 1:], last[:, :-1])
    act = r.action[:, rows]
    np.testing.assert_array_equal(act[last], 0.0)
    np.testing.assert_array_equal(act[~last].sum(-1), 1.0)
    assert set(np.unique(act)) <= {0.0, 1.0}
    assert r.stoch.dtype == np.uint8 and r.stoch.max() < cfg.classes_size
    assert (r.reward[:, rows][first] == 0).all()


def test_evaluate_samples_fresh_episodes():
    env = envs.make("cartpole", episode_length=30)
    cfg = agent_config()
    agent = DreamerV3(cfg, env, total_env_steps=30)
    state = jax.jit(agent.init)(jax.random.key(0))
    ev = jax.jit(agent.evaluate)
    s1, m1 = ev(state, jax.random.key(1))
    s2, m2 = ev(s1, jax.random.key(1))
    returns = np.asarray(m1["Eval/episode returns"])
    assert returns.shape == (cfg.eval_episodes,)
    # CartPole pays 1 per step: every first episode ended within the 30-step limit
    assert ((returns >= 1) & (returns <= 30)).all()
    assert float(m1["Eval/episodic mean reward"]) == pytest.approx(returns.mean())
    assert int(s2.n_evals) == 2
    assert not np.array_equal(returns, np.asarray(m2["Eval/episode returns"]))
