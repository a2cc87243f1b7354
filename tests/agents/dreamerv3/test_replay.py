"""DreamerV3 stream replay (``agents/dreamerv3/replay.py``) against independent NumPy models.

The models keep every row ever written per env by absolute row index (no ring): a row ``a``
is present after ``R`` rows while ``R - C <= a < R``, an item is a start whose ``L = T + 1``
rows are all present, and the online queue is simulated entry by entry as the reference's
``Replay.add`` / ``_sample`` do (2411f7d ``embodied/replay/replay.py``). The batch
annotation is a port of that file's ``_annotate_batch``, the replay context a port of 29eb964
``dreamerv3/agent.py`` ``train`` / ``loss`` (``replay_context: 1``).

Rows encode their (env, absolute row) in obs / action / reward / latents, so a gather from the
wrong slot, env or row cannot pass. Every StreamReplay method is jitted once per ring shape.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.common import TwoHot
from agents.dreamerv3.heads import bernoulli_nll, symlog_mse
from agents.dreamerv3.replay import ReplayState, Sample, StreamReplay
from agents.dreamerv3.rssm import features
from agents.dreamerv3.world_model import context_latent, observe_sequence, world_model_losses
from envs.row_collector import Row
from tests.agents.dreamerv3.conftest import B, T, random_params, tiny_nets

FIELDS = ("obs", "action", "reward", "is_first", "is_last", "is_terminal", "deter", "stoch")

# The main ring: 3 envs, 13 rows per env, T = 4 trained steps (windows of 5 rows).
MAIN = StreamReplay(
    n_envs=3, capacity=13, length=4, obs_size=3, action_size=2, deter=2, stoch=3, classes=9
)


@functools.cache
def jitted(rp: StreamReplay) -> types.SimpleNamespace:
    """The ring's methods, jitted once per shape (``draw``'s batch size is static)."""

    def counts(s):
        return rp.n_items(s), rp.items_per_env(s), *rp.queue_bounds(s)

    return types.SimpleNamespace(
        rp=rp,
        add=jax.jit(rp.add),
        gather=jax.jit(rp.gather),
        draw=jax.jit(rp.draw, static_argnums=2),
        write_back=jax.jit(rp.write_back),
        counts=jax.jit(counts),
    )


@pytest.fixture(scope="module")
def ring() -> types.SimpleNamespace:
    return jitted(MAIN)


# --------------------------------------------------------------------------- NumPy models
def annotate_port(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Port of 2411f7d ``Replay._annotate_batch`` (``is_first=True``, online key dropped)."""
    data = dict(data)
    data["is_first"] = data["is_first"].copy()
    data["is_first"][:, 0] = True
    next_is_first = np.roll(data["is_first"], shift=-1, axis=1)
    next_is_first[:, -1] = False
    data["is_last"] = data["is_last"] | next_is_first
    return data


class StreamModel:
    """Every row of every env by absolute index, plus the reference's online queue."""

    def __init__(self, rp: StreamReplay, seed: int = 0, p_first: float = 0.2):
        self.rp, self.rng, self.p_first = rp, np.random.default_rng(seed), p_first
        self.rows: dict[str, list[np.ndarray]] = {k: [] for k in FIELDS}
        self.queue: list[tuple[int, int]] = []  # every entry ever pushed, in push order
        self.popped = 0  # entries consumed (taken or skipped as evicted)

    @property
    def R(self) -> int:
        return len(self.rows["obs"])

    def field(self, k: str) -> np.ndarray:
        """``[n, R, ...]``."""
        return np.stack(self.rows[k], 1)

    def make_row(self) -> dict[str, np.ndarray]:
        """Row ``a = R`` of every env, its (env, row) encoded in the numeric fields."""
        rp, a, r = self.rp, self.R, self.rng
        e = np.arange(rp.n_envs)
        enc = (100 * e + a).astype(np.float32)
        obs = np.stack([e, np.full_like(e, a), 100 * e + a], -1).astype(np.float32)
        obs = np.concatenate([obs, r.normal(size=(rp.n_envs, rp.obs_size - 3))], -1)
        action = np.stack([enc + 0.5, -enc], -1)
        action = np.concatenate([action, r.normal(size=(rp.n_envs, rp.action_size - 2))], -1)
        return {
            "obs": obs.astype(np.float32),
            "action": action.astype(np.float32),
            "reward": (1000 * e + a + 0.25).astype(np.float32),
            "is_first": r.random(rp.n_envs) < self.p_first,
            "is_last": r.random(rp.n_envs) < self.p_first,
            "is_terminal": r.random(rp.n_envs) < self.p_first / 2,
            "deter": np.concatenate(
                [enc[:, None], -enc[:, None], r.normal(size=(rp.n_envs, rp.deter - 2))], -1
            ).astype(np.float32),
            "stoch": r.integers(0, rp.classes, (rp.n_envs, rp.stoch)).astype(np.int32),
        }

    def add(self, row: dict[str, np.ndarray]) -> None:
        """The reference's ``add`` for every env (in env order): the item of start
        ``R - L + 1`` is inserted once the stream holds ``L`` rows, and queued when the
        stream's length before the add is a multiple of ``L``."""
        L, R = self.rp.window, self.R
        for e in range(self.rp.n_envs):
            if R + 1 >= L and R % L == 0:
                self.queue.append((e, R - L + 1))
        for k in FIELDS:
            self.rows[k].append(row[k])

    def present(self, a: int) -> bool:
        return self.R - self.rp.capacity <= a < self.R

    def items(self) -> list[tuple[int, int]]:
        """Every (env, start) whose ``L`` rows are all present."""
        L = self.rp.window
        return [
            (e, s)
            for e in range(self.rp.n_envs)
            for s in range(self.R)
            if all(self.present(a) for a in range(s, s + L))
        ]

    def window(self, e: int, s: int) -> dict[str, np.ndarray]:
        return {k: np.stack(self.rows[k][s : s + self.rp.window])[:, e] for k in FIELDS}

    def windows(self, pairs) -> dict[str, np.ndarray]:
        """The raw (unannotated) windows ``[len(pairs), L, ...]``."""
        ws = [self.window(e, s) for e, s in pairs]
        return {k: np.stack([w[k] for w in ws]) for k in FIELDS}

    def draw_online(self, batch: int) -> tuple[list[tuple[int, int]], int]:
        """The reference's ``_sample`` queue pops for one batch: evicted entries are skipped
        (``KeyError``), at most ``batch`` taken. Returns (taken entries, entries skipped)."""
        taken, skipped = [], 0
        while self.popped < len(self.queue) and len(taken) < batch:
            e, s = self.queue[self.popped]
            self.popped += 1
            if all(self.present(a) for a in range(s, s + self.rp.window)):
                taken.append((e, s))
            else:
                skipped += 1
        return taken, skipped


def to_row(row: dict[str, np.ndarray]) -> tuple[Row, jax.Array, jax.Array]:
    fields = {k: jnp.asarray(row[k]) for k in FIELDS if k not in ("deter", "stoch")}
    return Row(**fields, extras=None), jnp.asarray(row["deter"]), jnp.asarray(row["stoch"])


def tick(j, state: ReplayState, model: StreamModel, row=None) -> ReplayState:
    row = model.make_row() if row is None else row
    model.add(row)
    return j.add(state, *to_row(row))


def fill(j, model: StreamModel, ticks: int, state: ReplayState | None = None) -> ReplayState:
    state = j.rp.init() if state is None else state
    for _ in range(ticks):
        state = tick(j, state, model)
    return state


def sample_of(pairs, batch: int | None = None) -> Sample:
    """A Sample of (env, start) pairs, padded to ``batch`` with the first pair."""
    pairs = list(pairs)
    if batch is not None:
        pairs += [pairs[0]] * (batch - len(pairs))
    env, start = np.asarray(pairs, np.int32).T
    return Sample(
        env=jnp.asarray(env),
        start=jnp.asarray(start),
        is_online=jnp.zeros(len(pairs), bool),
    )


def assert_batch(got, want: dict[str, np.ndarray], n: int | None = None) -> None:
    for k in FIELDS:
        g = np.asarray(getattr(got, k))[:n]
        np.testing.assert_array_equal(g, want[k], err_msg=k)
        assert g.dtype == (np.int32 if k == "stoch" else want[k].dtype), k


# --------------------------------------------------------------------------- 1. ring
def test_ring_wraparound(ring):
    """Over 45 ticks (3+ wraps of 13 rows): the counts equal the model's, every present
    row sits at slot ``a mod C`` of its env, and gathering every item (env, start) returns
    that env's rows ``start .. start + T`` (annotated), across the wrap."""
    rp, model = ring.rp, StreamModel(MAIN, seed=1)
    full = rp.n_envs * (rp.capacity - rp.length)  # most items the ring can hold
    state, wrapped_windows = rp.init(), 0
    for _ in range(45):
        state = tick(ring, state, model)
        items = model.items()
        n_items, per_env, _, _ = ring.counts(state)
        assert int(n_items) == len(items)
        assert int(per_env) == len(items) // rp.n_envs
        assert all(sum(e == k for e, _ in items) == int(per_env) for k in range(rp.n_envs))
        for k in FIELDS:
            ring_k = np.asarray(getattr(state, k))
            for a in range(max(0, model.R - rp.capacity), model.R):
                np.testing.assert_array_equal(ring_k[:, a % rp.capacity], model.rows[k][a])
        if not items:
            continue
        got = ring.gather(state, sample_of(items, full))
        assert_batch(got, annotate_port(model.windows(items)), len(items))
        wrapped_windows += sum((s % rp.capacity) + rp.window > rp.capacity for _, s in items)
    assert model.R > 3 * rp.capacity and wrapped_windows > 0


# --------------------------------------------------------------------------- 2. annotation
def test_windows_across_episode_boundaries(ring):
    """Windows with is_first / is_last inside: the gather equals the port of
    ``_annotate_batch`` (``is_first[:, 0]`` forced, ``is_last |= next is_first`` but not in
    the last column), every other field is the raw rows."""
    model = StreamModel(MAIN, seed=2, p_first=0.35)
    state = fill(ring, model, 30)
    items = model.items()
    raw = model.windows(items)
    got = ring.gather(state, sample_of(items))
    want = annotate_port(raw)
    assert_batch(got, want)
    for k in ("obs", "action", "reward", "is_terminal", "deter", "stoch"):
        np.testing.assert_array_equal(np.asarray(getattr(got, k)), raw[k])
    # Not vacuous: the data exercises every branch of the annotation.
    assert (~raw["is_first"][:, 0]).any()  # forced is_first
    assert (raw["is_first"][:, 1:] & ~raw["is_last"][:, :-1]).any()  # is_last from next
    assert (~raw["is_last"][:, -1]).any()  # the roll's wrapped column is masked
    assert (raw["is_last"] & ~np.roll(raw["is_first"], -1, 1)).any()  # own is_last kept
    got_last = np.asarray(got.is_last)
    assert not (got_last[:, -1] & ~raw["is_last"][:, -1]).any()


# --------------------------------------------------------------------------- 3. write-back
def test_write_back_sequential_overlaps(ring):
    """Overlapping and duplicate windows: the result equals a NumPy loop over the batch in
    order (later sequences win); context rows are never written; other fields untouched."""
    rp, model = ring.rp, StreamModel(MAIN, seed=3)
    state = fill(ring, model, 23)  # wrapped: rows 10..22 present
    C, Tn = rp.capacity, rp.length
    lo, hi = model.R - C, model.R - rp.window  # valid starts 10..18
    pairs = [
        (1, lo + 1),  # slots 11, 12, 0, 1, 2: wraps the slot axis
        (1, lo + 3),  # overlaps the previous by T - 2 rows
        (0, hi),  # slots 5..9
        (1, lo + 1),  # exact duplicate of the first: must win over both earlier ones
        (1, lo + 2),
        (2, lo + 4),  # alone in env 2: its context row is untouched
        (0, hi - 1),
    ]
    sample = sample_of(pairs)
    r = np.random.default_rng(4)
    deter = r.normal(size=(len(pairs), Tn, rp.deter)).astype(np.float32)
    stoch = r.integers(0, rp.classes, (len(pairs), Tn, rp.stoch)).astype(np.int32)
    out = ring.write_back(state, sample, jnp.asarray(deter), jnp.asarray(stoch))

    def loop(order):
        d, s = np.array(state.deter), np.array(state.stoch)
        for b in order:
            e, st = pairs[b]
            for t in range(Tn):
                d[e, (st + 1 + t) % C] = deter[b, t]
                s[e, (st + 1 + t) % C] = stoch[b, t]
        return d, s

    want_d, want_s = loop(range(len(pairs)))
    np.testing.assert_array_equal(np.asarray(out.deter), want_d)
    np.testing.assert_array_equal(np.asarray(out.stoch), want_s)
    assert out.stoch.dtype == state.stoch.dtype
    first_wins_d, _ = loop(reversed(range(len(pairs))))
    assert not np.array_equal(first_wins_d, want_d)  # the order is observable
    written = {(e, (st + 1 + t) % C) for e, st in pairs for t in range(Tn)}
    for e, st in pairs:
        if (e, st % C) not in written:
            np.testing.assert_array_equal(out.deter[e, st % C], state.deter[e, st % C])
            np.testing.assert_array_equal(out.stoch[e, st % C], state.stoch[e, st % C])
    assert (2, (lo + 4) % C) not in written
    for k in ("obs", "action", "reward", "is_first", "is_last", "is_terminal", "rows", "popped"):
        np.testing.assert_array_equal(np.asarray(getattr(out, k)), np.asarray(getattr(state, k)))


# --------------------------------------------------------------------------- 4. context
def reference_context_port(data: dict[str, np.ndarray], classes: int, K: int = 1):
    """Port of 29eb964 ``agent.py`` ``train`` (``replay_context: K``) and the replay-rollout
    inputs of ``loss``: returns ``(carry, prevacts [B, T, A], trained rows)``."""
    data = dict(data)
    context = {k: data.pop(k)[:, :K] for k in ("deter", "stoch")}
    context["stoch"] = np.eye(classes, dtype=np.float32)[context["stoch"]]
    prevlat = {k: v[:, -1] for k, v in context.items()}  # dyn.outs_to_carry
    prevact = data["action"][:, K - 1]
    data = {k: v[:, K:] for k, v in data.items()}
    prevacts = np.concatenate([prevact[:, None], data["action"][:, :-1]], 1)
    data["cont"] = 1.0 - data["is_terminal"].astype(np.float32)  # preprocess
    return prevlat, prevacts, data


def test_replay_context_matches_reference():
    """A gathered batch fed to our world model: the initial latent is the reference's
    context (row 0 latents, stoch one-hot), the rollout's previous actions are
    ``action[:, 0:T]`` (29eb964 fix) and its inputs / losses use rows ``1..T``.

    Continuous actions only (real-valued, so no two rows' actions coincide; the context
    logic does not depend on the action space, and each variant costs ~10 s of compile)."""
    nets = tiny_nets(discrete=False)
    c = nets.cfg
    rp = StreamReplay(
        n_envs=2,
        capacity=T + 8,
        length=T,
        obs_size=nets.obs_size,
        action_size=nets.action_size,
        deter=c.deter_size,
        stoch=c.stoch,
        classes=c.classes_size,
    )
    j, model = jitted(rp), StreamModel(rp, seed=5, p_first=0.3)
    state = rp.init()
    for _ in range(T + 12):
        row = model.make_row()
        # random actions: the (env, row) code would saturate the RSSM's action / max(1, |a|)
        row["action"] = (1.5 * model.rng.normal(size=row["action"].shape)).astype(np.float32)
        row["deter"] = model.rng.uniform(-1, 1, row["deter"].shape).astype(np.float32)
        state = tick(j, state, model, row)
    _, where = j.draw(state, jax.random.key(6), B)
    batch = j.gather(state, where)
    pairs = list(zip(np.asarray(where.env).tolist(), np.asarray(where.start).tolist(), strict=True))
    data = annotate_port(model.windows(pairs))
    prevlat, prevacts, rows = reference_context_port(data, c.classes_size)
    assert (~rows["is_first"][:, 0]).any() and rows["is_first"].any()  # context carried

    np.testing.assert_array_equal(np.asarray(batch.action[:, :-1]), prevacts)
    params, _ = random_params(nets)
    gumbel = np.random.default_rng(7).gumbel(size=(T, B, c.stoch, c.classes_size))
    gumbel = gumbel.astype(np.float32)

    @jax.jit
    def ours(params, batch, gumbel):
        last, post = observe_sequence(nets, params, batch, gumbel)
        losses, _ = world_model_losses(nets, params, batch, post)
        return context_latent(nets, batch), last, post, losses

    @jax.jit
    def port(params, prevlat, prevacts, rows, gumbel):
        """The reference's rollout from its carry over its inputs, with our modules."""
        embed = nets.encoder.apply({"params": params["enc"]}, rows["obs"])

        def step(lat, x):
            lat, logits = nets.rssm.apply({"params": params["dyn"]}, lat, *x, method="observe")
            return lat, (lat["deter"], lat["stoch"], logits)

        tm = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
        xs = (tm(prevacts), tm(embed), tm(rows["is_first"]), gumbel)
        last, outs = jax.lax.scan(step, prevlat, xs)
        deter, stoch, logits = map(tm, outs)
        feat = features(deter, stoch)
        recon = nets.decoder.apply({"params": params["dec"]}, feat)
        rew = nets.reward.apply({"params": params["rew"]}, feat)
        con = nets.cont.apply({"params": params["con"]}, feat)
        losses = {
            "vector": symlog_mse(recon, rows["obs"]),
            "reward": TwoHot.dreamerv3(c.bins).loss(rew, rows["reward"]),
            "cont": bernoulli_nll(con, rows["cont"] * (1.0 - 1.0 / c.return_horizon)),
        }
        return last, (deter, stoch, logits), losses

    ctx, last, post, losses = ours(params, batch, gumbel)
    for k in ("deter", "stoch"):
        np.testing.assert_array_equal(np.asarray(ctx[k]), prevlat[k], err_msg=k)
    rows_in = {k: rows[k] for k in ("obs", "reward", "is_first", "cont")}
    p_last, (p_deter, p_stoch, p_logits), p_losses = port(
        params, prevlat, prevacts, rows_in, gumbel
    )
    tol = dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(post.deter), np.asarray(p_deter), **tol)
    np.testing.assert_allclose(np.asarray(post.stoch), np.asarray(p_stoch), **tol)
    np.testing.assert_allclose(np.asarray(post.logits), np.asarray(p_logits), **tol)
    for k in ("deter", "stoch"):
        np.testing.assert_allclose(np.asarray(last[k]), np.asarray(p_last[k]), **tol)
    for k, v in p_losses.items():
        np.testing.assert_allclose(np.asarray(losses[k]), np.asarray(v), **tol, err_msg=k)


# --------------------------------------------------------------------------- 5. uint8
@pytest.mark.parametrize("classes", [256, 257])
def test_stoch_storage_dtype(classes):
    """classes <= 256: stoch stored as uint8, every class value 0..classes-1 gathered back as
    the int32 written (add and write_back); 257 classes: stored as int32."""
    rp = StreamReplay(
        n_envs=2, capacity=20, length=3, obs_size=3, action_size=2, deter=2, stoch=8,
        classes=classes,
    )  # fmt: skip
    j, model = jitted(rp), StreamModel(rp, seed=8)
    per_tick = rp.n_envs * rp.stoch
    state = rp.init()
    for a in range(math.ceil(classes / per_tick)):
        row = model.make_row()
        row["stoch"] = ((a * per_tick + np.arange(per_tick)) % classes).reshape(rp.n_envs, -1)
        row["stoch"] = row["stoch"].astype(np.int32)
        state = tick(j, state, model, row)
    assert state.stoch.dtype == (jnp.uint8 if classes <= 256 else jnp.int32)
    assert rp.nbytes() == sum(x.nbytes for x in jax.tree.leaves(state))
    stored = model.field("stoch")
    assert set(stored.ravel().tolist()) == set(range(classes))
    items = model.items()
    got = j.gather(state, sample_of(items))
    assert got.stoch.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(got.stoch), model.windows(items)["stoch"])
    # write_back of the top classes round-trips too (disjoint windows: no overlap order)
    pairs = [(e, s) for e in range(rp.n_envs) for s in range(0, 13, rp.window)]
    top = (classes - 1 - np.arange(len(pairs) * rp.length * rp.stoch)) % classes
    top = top.reshape(len(pairs), rp.length, rp.stoch).astype(np.int32)
    assert classes - 1 in top
    zeros = jnp.zeros((len(pairs), rp.length, rp.deter), jnp.float32)
    out = j.write_back(state, sample_of(pairs), zeros, jnp.asarray(top))
    assert out.stoch.dtype == state.stoch.dtype
    got = j.gather(out, sample_of(pairs))
    np.testing.assert_array_equal(np.asarray(got.stoch)[:, 1:], top)
    np.testing.assert_array_equal(np.asarray(got.stoch)[:, 0], model.windows(pairs)["stoch"][:, 0])


# --------------------------------------------------------------------------- 6. online queue
def test_online_queue(ring):
    """Queue entries come first (at most B per draw), entry ``q`` = env ``q mod n``, start
    ``1 + L (q div n)``, as the simulated reference queue pops them; ``popped`` advances;
    entries overwritten while nobody drew are skipped; the rest are uniform items."""
    rp, model, batch = ring.rp, StreamModel(MAIN, seed=9), 4
    draw_ticks = set(range(4, 16)) | set(range(36, 48))  # none for 20 ticks > C rows
    state, skipped, takes = rp.init(), 0, []
    key = jax.random.key(10)
    for i in range(48):
        state = tick(ring, state, model)
        n_items, _, first, pushed = ring.counts(state)
        assert int(pushed) == len(model.queue)
        for q, (e, s) in enumerate(model.queue):  # the queue's closed form
            assert (e, s) == (q % rp.n_envs, 1 + rp.window * (q // rp.n_envs))
        if i not in draw_ticks or int(n_items) == 0:
            continue
        state, where = ring.draw(state, jax.random.fold_in(key, i), batch)
        taken, sk = model.draw_online(batch)
        skipped += sk
        takes.append(len(taken))
        env, start = np.asarray(where.env), np.asarray(where.start)
        online = np.asarray(where.is_online)
        np.testing.assert_array_equal(online, np.arange(batch) < len(taken))
        assert list(zip(env[online].tolist(), start[online].tolist(), strict=True)) == taken
        assert int(state.popped) == model.popped
        assert int(ring.counts(state)[2]) == model.popped
        items = set(model.items())
        assert all((e, s) in items for e, s in zip(env.tolist(), start.tolist(), strict=True))
    assert skipped > 0 and batch in takes and any(0 < k < batch for k in takes)
    assert 0 in takes  # drained queue: all uniform draws

    # Uniform draws cover exactly the items (queue drained).
    state = state.replace(popped=ring.counts(state)[3])
    _, where = ring.draw(state, jax.random.key(11), 512)
    assert not np.asarray(where.is_online).any()
    drawn = collections.Counter(
        zip(np.asarray(where.env).tolist(), np.asarray(where.start).tolist(), strict=True)
    )
    assert set(drawn) == set(model.items())


# --------------------------------------------------------------------------- 7. grow
@pytest.mark.parametrize("rows", [9, 13])
def test_grow_matches_larger_ring(ring, rows):
    """A 13-row ring that has not wrapped, grown to 20 rows, is bit-identical to a 20-row ring
    fed the same rows: state, draws and gathers with the same keys, also after more adds
    (that wrap the 20-row ring); growing into a smaller ring raises ValueError."""
    big = jitted(dataclasses.replace(MAIN, capacity=20))
    small_model, big_model = StreamModel(MAIN, seed=12), StreamModel(big.rp, seed=12)
    small_state = fill(ring, small_model, rows)
    big_state = fill(big, big_model, rows)
    grown = big.rp.grow(small_state)
    for _ in range(2):
        for k, (g, w) in enumerate(
            zip(jax.tree.leaves(grown), jax.tree.leaves(big_state), strict=True)
        ):
            assert g.dtype == w.dtype and g.shape == w.shape, k
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        for i in range(3):
            key = jax.random.key(100 + i)
            grown, w_g = big.draw(grown, key, B)
            big_state, w_b = big.draw(big_state, key, B)
            for g, w in zip(jax.tree.leaves(w_g), jax.tree.leaves(w_b), strict=True):
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
            jax.tree.map(
                np.testing.assert_array_equal, big.gather(grown, w_g), big.gather(big_state, w_b)
            )
        for _ in range(12):  # rows + 12 > 20: the big ring wraps
            row = big_model.make_row()
            grown = tick(big, grown, big_model, row)
            big_state = big.add(big_state, *to_row(row))
    with pytest.raises(ValueError, match="rows per env"):
        ring.rp.grow(big_state)
    jax.tree.map(np.testing.assert_array_equal, ring.rp.grow(small_state), small_state)


# --------------------------------------------------------------------------- 8. rows_for
@pytest.mark.parametrize(
    "n, capacity, run_rows, batch, T_",
    [
        (4, 1000, 10**6, 16, 64),  # capacity-limited
        (3, 1000, 10**6, 16, 64),  # capacity-limited, not divisible
        (4, 10**6, 1001, 16, 64),  # run-limited, not divisible
        (3, 100, 10**6, 16, 64),  # floor: T + ceil(B / n)
        (3, 10**6, 50, 7, 5),  # run below the floor
        (16, 5_000_000, 1_000_003, 16, 64),
        (1, 17, 33, 1, 16),  # the floor exactly
    ],
)
def test_rows_for(n, capacity, run_rows, batch, T_):
    """``min(ceil(capacity / n), ceil(run_rows / n))``, never below ``T + ceil(B / n)`` rows
    (the first batch's items fit)."""
    ceil = lambda a, b: -(-a // b)  # noqa: E731
    got = StreamReplay.rows_for(n, capacity, run_rows, batch, T_)
    assert got == max(min(ceil(capacity, n), ceil(run_rows, n)), T_ + ceil(batch, n))
    assert n * (got - T_) >= batch  # a full ring holds a batch of items
    assert got >= min(ceil(capacity, n), ceil(run_rows, n))
