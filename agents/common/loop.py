"""The loop skeleton every agent's ``train`` and ``evaluate`` share (docs/design.md §4.4).

An agent writes one *tick*: ``tick(state, i, sums) -> (state, sums, EpisodeEnds)`` acts on
(or skips) its envs at absolute tick ``i``, stores the rows, runs the tick's updates
(:func:`run_updates`, or its own call of the update) and adds each update's metrics to the
running ``sums``. :func:`train_chunk` scans it over a chunk's ticks and reduces what the
ticks report into the chunk's metrics, with one meaning for every agent:

* ``Train/<name>`` of an update metric: its **mean over the chunk's updates** (NaN for a
  chunk that ran none, ``agent_api.Agent.train``), as danijar/dreamerv3's ``Agg`` averages
  the train metrics over its logging interval; TD-MPC2's reference logs the last update's
  values instead (deviation T50);
* ``Train/updates in chunk``: how many updates that mean is over;
* ``Train/episodic mean reward``: the mean return of the training episodes that ended in
  the chunk (NaN if none), ``Train/episodes``: how many;
* the agent's counters (``timestep``, ``env_frames``, ``Train/n_updates``).

Evaluation: :func:`evaluate` folds the evaluation count into the key and counts it, and
:func:`run_episodes` plays fresh envs in parallel and keeps each env's first episode;
:func:`eval_episodes` makes an evaluation's metrics of them, with the achievements' success
rates and the Crafter score on an env that has achievements (:mod:`agents.common.achievements`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from agents.common.achievements import achievement_metrics
from envs.core import Env
from envs.row_collector import RowCollector

Metrics = dict[str, jax.Array]


@struct.dataclass
class EpisodeEnds:
    """The training episodes that ended at one tick: ``done [n]`` bool and ``returns [n]``
    float32 (0 where none ended; ``envs.row_collector.EpisodeStats``). ``n`` may be 0: an
    agent that steps no env (:meth:`none`)."""

    done: jax.Array
    returns: jax.Array

    @classmethod
    def none(cls) -> EpisodeEnds:
        """No env, no episode (an offline agent's ticks)."""
        return cls(done=jnp.zeros((0,), bool), returns=jnp.zeros((0,), jnp.float32))


def zero_sums(like: Any) -> Metrics:
    """Float32 zeros shaped as ``like`` (an update's metrics, arrays or shape structs): the
    start of a chunk's running sums."""
    return jax.tree.map(lambda s: jnp.zeros(s.shape, jnp.float32), like)


def add_metrics(sums: Metrics, metrics: Metrics) -> Metrics:
    """``sums + metrics``, leaf by leaf (one update's metrics into the running sums)."""
    return jax.tree.map(jnp.add, sums, metrics)


def run_updates(
    update: Callable[[Any, jax.Array], tuple[Any, Metrics]],
    carry: Any,
    n: jax.Array,
    key: jax.Array,
    sums: Metrics,
) -> tuple[Any, Metrics]:
    """``n`` updates in a ``fori_loop``: update ``j`` is ``update(carry, fold_in(key, j))
    -> (carry, metrics)``, its metrics added to ``sums``. ``n`` is the tick's unbatched
    update count (a loop trip count under the seed vmap, never a select: docs/design.md
    §2.4). Returns ``(carry, sums)``."""

    def body(j: jax.Array, c: tuple[Any, Metrics]) -> tuple[Any, Metrics]:
        carry, sums = c
        carry, metrics = update(carry, jax.random.fold_in(key, j))
        return carry, add_metrics(sums, metrics)

    return jax.lax.fori_loop(0, n, body, (carry, sums))


def train_chunk(
    tick: Callable[[Any, jax.Array, Metrics], tuple[Any, Metrics, EpisodeEnds]],
    counters: Callable[[Any], Mapping[str, jax.Array]],
    state: Any,
    ticks: jax.Array,
    metrics_like: Any,
) -> tuple[Any, Metrics]:
    """Scan ``tick`` over the absolute ``ticks`` (int32 ``[C]``, unbatched) from ``state``;
    returns the state and the chunk's metrics (module docstring). ``counters(state)`` gives
    ``Train/n_updates`` (the updates run: its change over the chunk); ``metrics_like``: the
    structure of one update's metrics (arrays or shape structs)."""

    def body(carry, i):
        state, sums, ret_sum, ep_count = carry
        state, sums, ep = tick(state, i, sums)
        ret_sum = ret_sum + jnp.sum(ep.returns)
        ep_count = ep_count + jnp.sum(ep.done, dtype=jnp.int32)
        return (state, sums, ret_sum, ep_count), None

    before = counters(state)["Train/n_updates"]
    init = (state, zero_sums(metrics_like), jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))
    (state, sums, ret_sum, ep_count), _ = jax.lax.scan(body, init, ticks)
    counts = dict(counters(state))
    ran = counts["Train/n_updates"] - before
    means = jax.tree.map(lambda s: jnp.where(ran > 0, s / jnp.maximum(ran, 1), jnp.nan), sums)
    return state, {
        **counts,
        "Train/episodic mean reward": jnp.where(
            ep_count > 0, ret_sum / jnp.maximum(ep_count, 1), jnp.nan
        ),
        "Train/episodes": ep_count,
        "Train/updates in chunk": ran,
        **{f"Train/{k}": v for k, v in means.items()},
    }


def run_episodes(env: Env, n: int, mode: str, policy: Any, carry: Any, key: jax.Array) -> jax.Array:
    """Returns ``[n]``: the first episode's return of each of ``n`` fresh envs of ``env``
    run in parallel for ``T + 1`` ticks by ``policy`` (a row-collector policy, initial carry
    ``carry``) under the row collector's ``mode`` (an env that has not ended an episode by
    then counts 0). In static mode every env ends exactly one episode in ``T + 1`` ticks;
    the loop stops early once every env has ended its first episode."""
    return _first_episodes(env, n, mode, policy, carry, key, False)[0]


def _first_episodes(
    env: Env, n: int, mode: str, policy: Any, carry: Any, key: jax.Array, achievements: bool
) -> tuple[jax.Array, jax.Array | None]:
    """:func:`run_episodes`' returns ``[n]`` and, if ``achievements``, each first episode's
    achievement set ``[n, K]`` bool: ``EnvState.unlocked`` OR-ed over the steps up to the one
    that ends it (the auto-reset env keeps the ending step's, ``envs.autoreset``); else None.
    Without achievements the scan is the one :func:`run_episodes` always ran."""
    col = RowCollector(env, n, mode)
    k_init, k_run = jax.random.split(key)
    cstate = col.init(k_init, policy_carry=carry)

    def body(c):
        i, cstate, returns, seen, *got = c
        cstate, _, stats = col.tick(cstate, i, jax.random.fold_in(k_run, i), policy)
        first = stats.done & ~seen
        out = (i + 1, cstate, jnp.where(first, stats.returns, returns), seen | stats.done)
        if achievements:  # the step just taken belongs to the first episode until it ended
            unlocked, ended = got
            fresh = cstate.env_state.unlocked & ~ended[:, None]
            out += (unlocked | fresh, ended | cstate.is_last)
        return out

    def running(c):
        # Ticks after every env's first episode ended change no output (tick i draws
        # fold_in(k_run, i), not a carried key), so stopping then returns what the full
        # T + 1 ticks would: a long-episode env (Craftax: T = 10,000) stops at its longest
        # first episode. Under the seed vmap the loop runs until every seed has stopped.
        return (c[0] <= env.spec.episode_length) & ~jnp.all(c[3])

    init = (jnp.zeros((), jnp.int32), cstate, jnp.zeros((n,), jnp.float32), jnp.zeros((n,), bool))
    if achievements:
        init += (jnp.zeros((n, len(env.spec.achievements)), bool), jnp.zeros((n,), bool))
    if mode == "static":
        # Every first episode ends on tick T + 1, so there is nothing to stop early; and
        # the scan keeps the tick unbatched under the seed vmap (a batched while predicate
        # would batch it and turn the collector's reset branch into a select).
        out, _ = jax.lax.scan(lambda c, _: (body(c), None), init, None, env.spec.episode_length + 1)
    else:
        out = jax.lax.while_loop(running, body, init)
    return out[2], (out[4] if achievements else None)


def episode_metrics(returns: jax.Array) -> Metrics:
    """``Eval/episodic mean reward`` and ``Eval/episode returns`` of ``returns [n]``."""
    return {"Eval/episodic mean reward": jnp.mean(returns), "Eval/episode returns": returns}


def eval_episodes(env: Env, n: int, mode: str, policy: Any, carry: Any, key: jax.Array) -> Metrics:
    """The metrics of one evaluation: :func:`episode_metrics` of :func:`run_episodes`' ``n``
    first episodes and, on an env with achievements (``spec.achievements``), their success
    rates and Crafter score (:func:`agents.common.achievements.achievement_metrics`). An env
    without achievements gets the same metrics and the same program as before."""
    names = env.spec.achievements
    returns, unlocked = _first_episodes(env, n, mode, policy, carry, key, bool(names))
    metrics = episode_metrics(returns)
    if names:
        metrics.update(achievement_metrics(names, unlocked))
    return metrics


def evaluate(
    state: Any, key: jax.Array, run: Callable[[jax.Array], Metrics]
) -> tuple[Any, Metrics]:
    """One evaluation: ``run(fold_in(key, state.n_evals)) -> metrics`` (so every evaluation
    draws fresh keys), then ``state.n_evals`` counts it."""
    metrics = run(jax.random.fold_in(key, state.n_evals))
    return state.replace(n_evals=state.n_evals + 1), metrics
