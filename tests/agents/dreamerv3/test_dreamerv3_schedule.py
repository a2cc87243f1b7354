"""Control-flow parity of the DreamerV3 update schedule and online queue with the reference loop.

``reference_loop.py`` ports the reference driver loop (2411f7d ``run/train.py``,
``core/when.py``, ``core/driver.py``, ``replay/replay.py``) and runs it on counter envs: env
``e`` emits rows ``[e, row]``, so every stored row and every online window's ``(env, start)``
is observable. Our :class:`Schedule` and :class:`StreamReplay` are driven in our tick order
(add one row per env, then the tick's ``n_updates`` draws) and compared with the port.

What is asserted, and why it is exact:

* Gate and counts. The port decides, at every transition ``s``, ``0`` while
  ``len(replay) < B`` and ``Ratio(s)`` after; :meth:`Schedule.gate` is its first ``Ratio``
  call and ``n_updates(i)`` the decisions of tick ``i``'s ``n`` transitions summed. They are
  equal exactly when ``Ratio`` runs in exact arithmetic (the port with a ``Fraction`` ratio).
  The reference's float ``Ratio`` equals it too where ``1 / r`` is an integer (train ratios
  512 and 32 with ``B T = 1024``, 32 with ``B T = 32``). Otherwise (100: ``r = 25/256``;
  12 and 5 with ``B T = 32``) its float ``prev`` can drift below the exact value, so at a
  transition where ``(s - s0) r`` is an integer it can run an update one transition late,
  possibly in the next tick (deviation D26): its cumulative count is then one behind ours,
  never more, never ahead.
* Online queue, ours against the port in tick order (D34): update by update, identical
  batch slots, envs and starts of the online pops and the same number of uniform draws; our
  uniform draws are live items; our rings hold the port's row streams slot for slot. This is
  exact in every config, also with a wrapping ring where the port evicts by rows as ours
  does (D27) and its ``KeyError`` retry skips dead queue entries.
* D34, the reference's order against the tick order (port against port). Both decide the
  same counts at the same transitions (the gate and ``Ratio`` still run per transition), so
  they run the same number of updates in each tick, and both pop the one FIFO queue in push
  order: the flattened sequences of online pops are prefixes of one another, the reference's
  never ahead. They are *not* in general identical update by update: the reference runs an
  update right after env ``e``'s add, when only envs ``0..e`` of a push tick (rows 65, 130,
  ... of every stream) have queued their window, while our updates see all ``n`` entries.
  Exactly: the two agree update by update iff no update under tick order pops an entry that,
  in the reference, is pushed after the transition at which that update ran (before the
  first such update both queues are in the same state, so the batches coincide; at it the
  reference cannot pop that entry). With the defaults (B 16, T 64, ratio 512 = 0.5 updates
  per transition) that holds for 1 env and fails for 4, 16 and 32: in tick 65 the reference
  takes two online windows in each of its 8 (16 envs) updates, we take all 16 in the
  first. Still, there every tick's last transition is an update transition, so the queues
  agree again at every tick end. With ratio 32 (one update per 32 transitions, at the last
  env of a tick for 4 and 16 envs, at env 15 with 32 envs whose batch is exactly the first
  16 entries) they agree update by update for every env count. With ratio 100 the reference
  can end a push tick with entries still queued that we already took (it catches up at its
  next update).
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.dreamerv3.replay import StreamReplay
from agents.dreamerv3.schedule import Schedule
from tests.agents.dreamerv3 import reference_loop as ref

TICKS = {64: 300, 8: 60}  # by T: enough for the pushes at rows 65, 130, 195, 260 (T 64)
DEFAULT = [(n, 16, 64, 512) for n in (1, 4, 16, 32)]
CONFIGS = [
    *DEFAULT,
    *[(n, 16, 64, r) for r in (32, 100) for n in (1, 4, 16, 32)],
    *[(n, 4, 8, r) for r in (32, 12, 5) for n in (1, 3, 8)],
]
RING = 14  # rows per env of the small configs' rings in the queue tests (L 9): they wrap
ids = lambda c: "n{}-B{}-T{}-r{}".format(*c)  # noqa: E731


@functools.cache
def port(n, B, T, ratio, order="tick", exact=True, ring_rows=None) -> ref.Trace:
    """A port run; ``exact``: ``Ratio`` in ``Fraction`` arithmetic (the reference: float)."""
    r = Fraction(ratio) if exact else float(ratio)
    return ref.run(n, B, T, r, TICKS[T], order=order, ring_rows=ring_rows)


# ---------------------------------------------------------------------------- schedule
@pytest.mark.parametrize("cfg", CONFIGS, ids=ids)
def test_gate_and_counts(cfg):
    n, B, T, ratio = cfg
    s, trace, ticks = Schedule(*cfg), port(*cfg), TICKS[T]
    tick, transition = s.gate
    assert transition == trace.gate_transition
    assert tick == (transition - 1) // n
    assert trace.counts[: transition - 1].sum() == 0 and trace.counts[transition - 1] == 1
    ours = np.asarray(s.n_updates(jnp.arange(ticks)))
    np.testing.assert_array_equal(ours, trace.per_tick())
    assert ours[:tick].sum() == 0 and ours[tick] >= 1
    cum = np.cumsum(trace.per_tick())
    np.testing.assert_array_equal(np.asarray(s.cumulative(n * (jnp.arange(ticks) + 1))), cum)
    for t in {0, tick - 1, tick, tick + 1, ticks // 2, ticks - 1}:
        assert s.updates_through(t) == cum[t], t
    # the reference order decides the same counts at the same transitions (D34 moves draws only)
    np.testing.assert_array_equal(port(*cfg, order="reference").counts, trace.counts)


def test_first_update_default():
    """16 envs: the first update follows transition 1040, the last env of tick 64."""
    assert Schedule(16, 16, 64, 512).gate == (64, 1040)
    first = port(16, 16, 64, 512, order="reference").updates[0]
    assert (first.tick, first.transition) == (64, 1040)
    assert Schedule(1, 16, 64, 512).gate == (79, 80)
    assert Schedule(32, 16, 64, 512).gate == (64, 2064)  # env 15: 16 items mid-tick


@pytest.mark.parametrize("cfg", CONFIGS, ids=ids)
def test_float_ratio(cfg):
    """The reference's float ``Ratio`` against the exact one (D26)."""
    n, B, T, ratio = cfg
    exact = np.cumsum(port(*cfg, order="reference").counts)
    floaty = np.cumsum(port(*cfg, order="reference", exact=False).counts)
    if (B * T / ratio).is_integer():  # 1 / r an integer: float prev is exact
        np.testing.assert_array_equal(floaty, exact)
    else:
        lag = exact - floaty
        assert lag.min() == 0 and lag.max() <= 1  # at most one update late, never early


def test_float_ratio_drifts():
    """Ratio 100 with 16 envs: the float ``Ratio`` really is one update late at some ticks."""
    per = lambda exact: port(16, 16, 64, 100, order="reference", exact=exact).per_tick()  # noqa: E731
    diff = np.nonzero(per(True) != per(False))[0]
    assert len(diff) > 0 and diff[0] >= Schedule(16, 16, 64, 100).gate[0]


# ---------------------------------------------------------------------------- ours
class Row(NamedTuple):
    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    is_first: np.ndarray
    is_last: np.ndarray
    is_terminal: np.ndarray


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _run_ours(rep: StreamReplay, batch: int, kmax: int, rows: Row, k: jax.Array):
    """Our tick order in one scan: tick ``t`` adds ``rows[t]``, then draws ``k[t]`` batches
    (``kmax`` draws per tick, those at ``i >= k[t]`` leave the state as it was)."""
    n, key = rep.n_envs, jax.random.key(0)
    latents = jnp.zeros((n, rep.deter)), jnp.zeros((n, rep.stoch), jnp.int32)

    def tick(state, xs):
        row, kt, t = xs
        state = rep.add(state, row, *latents)

        def one(state, i):
            new, where = rep.draw(state, jax.random.fold_in(key, t * kmax + i), batch)
            state = jax.tree.map(lambda x, y: jnp.where(i < kt, x, y), new, state)
            return state, (where.env, where.start, where.is_online)

        return jax.lax.scan(one, state, jnp.arange(kmax))

    return jax.lax.scan(tick, rep.init(), (rows, k, jnp.arange(k.shape[0])))


@functools.cache
def _kmax(n: int, B: int, T: int) -> int:
    """Most updates in one tick over the configs with these shapes (one compile for all)."""
    cfgs = [c for c in CONFIGS if c[:3] == (n, B, T)] or [(n, B, T, 1)]
    return max(int(Schedule(*c).n_updates(jnp.arange(TICKS[T])).max()) for c in cfgs)


def drive_ours(n, B, T, ratio, capacity):
    """Our tick order: the tick's rows, then its ``n_updates`` draws. Returns the final state,
    the replay, the draws ``(env, start, online) [U, B]`` and the tick of each update."""
    ticks = TICKS[T]
    rep = StreamReplay(n, capacity, T, obs_size=2, action_size=1, deter=1, stoch=1, classes=2)
    k = np.asarray(Schedule(n, B, T, ratio).n_updates(jnp.arange(ticks)))
    kmax = max(_kmax(n, B, T), int(k.max()))
    envs = [ref.CounterEnv(e) for e in range(n)]
    tr = [[env.step() for env in envs] for _ in range(ticks)]
    col = lambda key: np.array([[x[key] for x in step] for step in tr])  # noqa: E731
    rows = Row(col("obs"), np.zeros((ticks, n, 1), np.float32), col("reward"), col("is_first"),
               col("is_last"), col("is_terminal"))  # fmt: skip
    state, out = jax.device_get(_run_ours(rep, B, kmax, rows, jnp.asarray(k)))
    done = np.arange(kmax)[None] < k[:, None]  # [ticks, kmax]: the draws that happened
    env, start, online = (x[done] for x in out)
    return state, rep, (env, start, online), np.nonzero(done)[0]


def check_against_port(cfg, capacity, ring_rows=None):
    n, B, T, ratio = cfg
    L = T + 1
    trace = port(*cfg, ring_rows=ring_rows)
    state, rep, (env, start, online), at = drive_ours(*cfg, capacity)
    assert len(at) == len(trace.updates)
    for u, upd in enumerate(trace.updates):
        assert at[u] == upd.tick, u
        ours = [(int(i), int(env[u, i]), int(start[u, i])) for i in np.nonzero(online[u])[0]]
        assert ours == upd.online, (u, upd.tick)
        assert B - online[u].sum() == upd.n_uniform, u
    # our uniform draws are live items at their draw: start in [oldest, rows - L]
    rows = at[:, None] + 1
    oldest = np.maximum(rows - capacity, 0)
    uni = ~online
    assert ((env >= 0) & (env < n))[uni].all()
    assert ((start >= oldest) & (start <= rows - L))[uni].all()
    # the row streams: slot a % C of env e holds row a of the port's stream e
    total = TICKS[T]
    kept = np.arange(max(total - capacity, 0), total)
    obs, reward = np.asarray(state.obs), np.asarray(state.reward)
    first = np.asarray(state.is_first)
    for e in range(n):
        stream = trace.replay.rows[e]
        assert len(stream) == total == int(state.rows)
        want = np.stack([stream[a]["obs"] for a in kept])
        np.testing.assert_array_equal(obs[e, kept % capacity], want)
        np.testing.assert_array_equal(want, np.stack([np.full(len(kept), e), kept], 1))
        np.testing.assert_array_equal(
            reward[e, kept % capacity], [stream[a]["reward"] for a in kept]
        )
        np.testing.assert_array_equal(first[e, kept % capacity], kept == 0)
    assert int(rep.n_items(state)) == len(trace.replay)
    return trace, online


@pytest.mark.parametrize("cfg", CONFIGS, ids=ids)
def test_online_queue(cfg):
    """Ours against the port in tick order: exact, update by update. T 64: a ring that never
    wraps (``rows_for`` of the default 5e6 capacity). T 8: a 14-row ring that wraps, against
    the port evicting by rows (D27)."""
    n, B, T, _ = cfg
    if T == 64:
        capacity = StreamReplay.rows_for(n, 5_000_000, n * TICKS[T], B, T)
        assert capacity >= TICKS[T]  # nothing wraps
        trace, online = check_against_port(cfg, capacity)
        assert online.sum() == len(trace.replay.pushed) - len(trace.replay.queue)
    else:
        check_against_port(cfg, RING, ring_rows=RING)


@pytest.mark.parametrize("n, ratio", [(1, 4), (3, 0.5), (8, 1)])
def test_online_queue_wrapping_ring(n, ratio):
    """The 14-row ring (L 9) and one update per 8 ticks (1 and 8 envs) or per 21 1/3 ticks
    (3 envs): a queue entry lives 6 ticks, so some are overwritten before their turn. Ours
    equals the port evicting by rows (D27), and some entries really were skipped: pushed,
    never popped, while later ones were."""
    cfg = (n, 4, 8, ratio)
    trace, online = check_against_port(cfg, RING, ring_rows=RING)
    popped = [(w, s) for u in trace.updates for _, w, s in u.online]
    pushed = trace.replay.pushed
    assert popped == [p for p in pushed if p in popped]  # push order
    skipped = [p for p in pushed[: pushed.index(popped[-1])] if p not in popped]
    assert skipped and online.sum() == len(popped)


# ---------------------------------------------------------------------------- D34
def _pushed_at(trace: ref.Trace, T: int) -> dict:
    """Transition after which each queue entry ``(env, start)`` is pushed: row
    ``start + T`` of env ``env`` is the tick ``start + T``'s transition ``env + 1``."""
    return {(w, s): trace.n_envs * (s + T) + w + 1 for w, s in trace.replay.pushed}


def online_per_tick(trace: ref.Trace) -> np.ndarray:
    """Online windows popped in each tick ``[ticks]``."""
    ticks = len(trace.counts) // trace.n_envs
    return np.bincount([u.tick for u in trace.updates for _ in u.online], minlength=ticks)


@pytest.mark.parametrize("cfg", CONFIGS, ids=ids)
def test_reference_order(cfg):
    """The reference's interleaved order against our tick order (module doc, D34)."""
    n, B, T, _ = cfg
    a, b = port(*cfg, order="reference"), port(*cfg, order="tick")
    assert a.replay.pushed == b.replay.pushed
    assert [u.tick for u in a.updates] == [u.tick for u in b.updates]
    assert [u.transition for u in a.updates] == [u.transition for u in b.updates]
    flat = lambda tr: [(w, s) for u in tr.updates for _, w, s in u.online]  # noqa: E731
    fa, fb = flat(a), flat(b)
    assert fa == a.replay.pushed[: len(fa)] and fb == b.replay.pushed[: len(fb)]
    assert len(fa) <= len(fb)
    ca = np.cumsum([len(u.online) for u in a.updates])
    cb = np.cumsum([len(u.online) for u in b.updates])
    assert (ca <= cb).all()  # the reference is never ahead
    # each online slot is the batch's first slots in both orders
    for u in (*a.updates, *b.updates):
        assert [i for i, _, _ in u.online] == list(range(len(u.online)))
    # the exact condition for update-by-update identity
    pushed_at = _pushed_at(b, T)
    late = [any(pushed_at[w, s] > u.transition for _, w, s in u.online) for u in b.updates]
    same = [x.online == y.online for x, y in zip(a.updates, b.updates, strict=True)]
    assert all(same) == (not any(late))
    if any(late):
        first = late.index(True)
        assert all(same[:first]) and not same[first]
    # at tick ends: the reference has taken no more than we have
    assert (np.cumsum(online_per_tick(a)) <= np.cumsum(online_per_tick(b))).all()


def test_reference_order_default():
    """Defaults: identical update by update only for 1 env; identical at tick ends for all."""
    for n, B, T, r in DEFAULT:
        a, b = port(n, B, T, r, order="reference"), port(n, B, T, r, order="tick")
        same = all(x.online == y.online for x, y in zip(a.updates, b.updates, strict=True))
        assert same == (n == 1), n
        np.testing.assert_array_equal(online_per_tick(a), online_per_tick(b))
    # 16 envs, tick 65: the reference's 8 updates take 2 online windows each, ours 16, 0, ...
    a, b = port(16, 16, 64, 512, order="reference"), port(16, 16, 64, 512, order="tick")
    in65 = lambda tr: [len(u.online) for u in tr.updates if u.tick == 65]  # noqa: E731
    assert in65(a) == [2] * 8 and in65(b) == [16] + [0] * 7
    # why the tick ends agree for n > 1 (n = 1 has nothing to interleave): after the gate
    # every tick's last transition runs an update
    for n, B, T, r in DEFAULT[1:]:
        tick = Schedule(n, B, T, r).gate[0]
        assert (port(n, B, T, r).counts.reshape(-1, n)[tick + 1 :, -1] >= 1).all(), n
    # ratio 100, 16 envs: the reference ends some push ticks with entries we already took
    a, b = port(16, 16, 64, 100, order="reference"), port(16, 16, 64, 100, order="tick")
    assert (np.cumsum(online_per_tick(a)) < np.cumsum(online_per_tick(b)))[65]
    # ratio 32: identical update by update for every env count
    for n in (1, 4, 16, 32):
        a, b = port(n, 16, 64, 32, order="reference"), port(n, 16, 64, 32, order="tick")
        assert [x.online for x in a.updates] == [y.online for y in b.updates], n


@pytest.mark.parametrize("ratio", [65537 / 128, 1000 / 3, -1.0])
def test_a_ratio_the_int32_closed_form_cannot_hold_is_refused(ratio):
    """``65537/128 / 1024`` would overflow int32 after ~40K transitions (it returned a
    negative count before the guard); ``1000/3`` is a float with 52 binary digits."""
    with pytest.raises(ValueError, match="train_ratio"):
        Schedule(16, 16, 64, ratio)


@pytest.mark.parametrize("n", [1, 2, 3, 16])
def test_the_configs_first_update_rule_is_the_gate(n):
    """``DreamerV3Config.min_rows_per_env`` (the launcher's "never updates" and replay
    capacity rules) is the rows per env at the end of the gate's tick."""
    from agents.dreamerv3.config import DreamerV3Config

    for batch, length in [(1, 1), (2, 4), (5, 3), (16, 64), (33, 2)]:
        cfg = DreamerV3Config(n_envs=n, batch_size=batch, batch_length=length)
        assert cfg.min_rows_per_env == Schedule(n, batch, length, 4.0).gate[0] + 1
