"""A Python port of the DreamerV3 reference's training-loop control flow (test oracle only).

Ported (in our own code, control flow only) from danijar/dreamerv3 at commit 2411f7d:

* ``embodied/run/train.py:26-28`` (``batch_steps = B (batch_length - replay_context)``,
  ``should_train = when.Ratio(train_ratio / batch_steps)``), ``:67-72`` (the driver's
  per-transition callbacks in registration order: ``step.increment()``, ``replay.add``) and
  ``:80-91`` (``train_step``: return while ``len(replay) < batch_size or step < train_fill``,
  else ``for _ in range(should_train(step))`` draw one batch and train).
* ``embodied/core/when.py:26-42`` (``Ratio``: the first call returns 1 and sets
  ``prev = step``; later calls return ``n = int((step - prev) * ratio)`` and advance
  ``prev += n / ratio``, in float arithmetic as the reference does).
* ``embodied/core/driver.py:55-81`` (``_step``: step every env, then run every callback for
  env 0, then env 1, ..., in env order).
* ``embodied/replay/replay.py:72-73`` (``len`` = item count), ``:97-144`` (``add``: append the
  row to the worker's stream deque; once the deque holds ``length`` entries pop its left end
  and insert that item; queue the item when the worker's length before this add is a
  multiple of ``length``; then increment the length), ``:170-191`` (``_sample``: pop the
  online queue first, else a uniform item) and ``:263-272`` (``dataset``: a batch is
  ``batch`` consecutive ``_sample`` calls).
* ``embodied/replay/selectors.py:27-47`` (``Uniform``: a key list with swap-remove, drawn by
  a uniform index).

Mapping of names: the reference's ``batch_length`` is the window ``L = T + 1`` (65) with
``replay_context = 1``; here, as in our config, ``batch_length`` is ``T`` (64) and the
window is ``T + 1``, so ``batch_steps = B T``.

Not ported, on purpose:

* Chunks, ``stepid`` and the reference's capacity eviction (``replay.py:193-217``: FIFO over
  items, a queue entry fails with ``KeyError`` once its chunk is freed): rows are kept per
  worker in a list and an item is ``(worker, start row)``. By default nothing is evicted (the
  reference's default capacity, 5e6 items, is not reached by these tests). With
  ``ring_rows`` the port evicts by rows instead, as ours does (deviation D27): an item dies
  once its start row is no longer among its worker's last ``ring_rows`` rows, and ``_sample``'s
  ``except KeyError: continue`` retry then skips a dead queue entry.
* ``agent.dataset``'s ``embodied.Prefetch`` thread (``jaxagent.py:227-232``,
  ``core/prefetch.py``): the reference draws training batches on a background thread one to
  two batches ahead of ``next(dataset_train)`` and a second prefetch thread draws report
  batches from the same replay (and so the same online queue), both at thread-timing
  dependent moments. That is not deterministic, so the port draws a batch synchronously
  when ``train_step`` asks for it, the order the loop's code states.
* The uniform selector's numpy RNG (``selectors.Uniform(seed=0)``): cannot be matched by our
  JAX keys (deviation D29); a uniform draw is recorded only as a count.

Two orders (``order`` of :func:`run`):

* ``"reference"``: the reference's order, ``train_step`` runs right after each env's add, so
  the updates of one vector step interleave with its per-env adds.
* ``"tick"``: deviation D34, our order. Each transition still runs ``step.increment()``,
  ``replay.add`` and the gate / ``Ratio`` decision at that moment (so the gate sees the
  items present after that env's add, and ``Ratio`` sees the per-transition counter), but
  the batches are drawn only after every env of the vector step has added its row.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np


class Ratio:
    """``when.Ratio``: how many updates to run at ``step`` for ``ratio`` updates per step."""

    def __init__(self, ratio: float):
        assert ratio >= 0, ratio
        self.ratio = ratio
        self.prev = None

    def __call__(self, step: int) -> int:
        step = int(step)
        if self.ratio == 0:
            return 0
        if self.prev is None:  # first call: one update, and count from here on
            self.prev = step
            return 1
        n = int((step - self.prev) * self.ratio)
        self.prev += n / self.ratio
        return n


class CounterEnv:
    """Env ``index`` emits rows whose obs is ``[index, row]`` (row 0, 1, 2, ... of its stream),
    so every stored row and sampled window says where it came from."""

    def __init__(self, index: int):
        self.index = index
        self.row = 0

    def step(self, act=None) -> dict:
        tran = dict(
            obs=np.array([self.index, self.row], np.float32),
            reward=np.float32(1000 * self.index + self.row),
            is_first=self.row == 0,
            is_last=False,
            is_terminal=False,
        )
        self.row += 1
        return tran


@dataclasses.dataclass(frozen=True)
class Draw:
    """One ``_sample`` call: worker, start row of the window, and whether it was online."""

    worker: int
    start: int
    is_online: bool


class Uniform:
    """``selectors.Uniform``: keys in a list (swap-remove on delete), a uniform index per draw."""

    def __init__(self, seed: int = 0):
        self.indices = {}
        self.keys = []
        self.rng = np.random.default_rng(seed)

    def __call__(self) -> int:
        return self.keys[int(self.rng.integers(0, len(self.keys)))]

    def __setitem__(self, key: int, value) -> None:
        self.indices[key] = len(self.keys)
        self.keys.append(key)

    def __delitem__(self, key: int) -> None:
        index = self.indices.pop(key)
        last = self.keys.pop()
        if index != len(self.keys):
            self.keys[index] = last
            self.indices[last] = index


class Replay:
    """``replay.Replay`` with ``online=True``: items are every window of ``length`` rows of a
    worker's stream, in insertion order; ``ring_rows`` (optional) evicts by rows (D27)."""

    def __init__(self, length: int, seed: int = 0, ring_rows: int | None = None):
        self.length = length
        self.ring_rows = ring_rows
        self.rows = collections.defaultdict(list)  # worker -> its stored rows, in order
        self.streams = collections.defaultdict(collections.deque)  # row refs not yet items
        self.items = {}  # itemid -> (worker, start row)
        self.owned = collections.defaultdict(collections.deque)  # worker -> its live itemids
        self.itemid = 0
        self.sampler = Uniform(seed)
        self.lengths = collections.defaultdict(int)  # rows added per worker (online only)
        self.queue = collections.deque()  # online items, in push order
        self.pushed = []  # every (worker, start) ever queued, in push order

    def __len__(self) -> int:
        return len(self.items)

    def add(self, tran: dict, worker: int = 0) -> None:
        rows = self.rows[worker]
        stream = self.streams[worker]
        stream.append(len(rows))  # the reference appends (chunkid, index) of this row
        rows.append(tran)
        if len(stream) >= self.length:
            start = stream.popleft()
            self._insert(worker, start)
            if self.lengths[worker] % self.length == 0:  # length BEFORE this add
                self.queue.append((worker, start))
                self.pushed.append((worker, start))
        self.lengths[worker] += 1
        if self.ring_rows:  # D27: the row that fell out of the ring takes its item along
            owned = self.owned[worker]
            while owned and self._dead(*self.items[owned[0]]):
                itemid = owned.popleft()
                del self.items[itemid]
                del self.sampler[itemid]

    def _dead(self, worker: int, start: int) -> bool:
        return bool(self.ring_rows) and start < len(self.rows[worker]) - self.ring_rows

    def _insert(self, worker: int, start: int) -> None:
        self.items[self.itemid] = (worker, start)
        self.sampler[self.itemid] = None
        self.owned[worker].append(self.itemid)
        self.itemid += 1

    def _sample(self) -> Draw:
        while True:
            if self.queue:
                worker, start = self.queue.popleft()
                is_online = True
            else:
                worker, start = self.items[self.sampler()]
                is_online = False
            if self._dead(worker, start):  # the reference's KeyError from _getseq
                continue
            return Draw(worker, start, is_online)

    def next_batch(self, batch: int) -> list[Draw]:
        """``next(dataset)`` with ``length == self.length``: ``batch`` samples in a row."""
        return [self._sample() for _ in range(batch)]


class Driver:
    """``core.Driver`` with ``parallel=False``: one vector step = every env steps, then every
    callback runs for env 0, env 1, ... in order."""

    def __init__(self, envs: list[CounterEnv]):
        self.envs = envs
        self.callbacks = []

    def on_step(self, callback) -> None:
        self.callbacks.append(callback)

    def step(self) -> None:
        trans = [env.step() for env in self.envs]
        for worker, tran in enumerate(trans):
            for fn in self.callbacks:
                fn(tran, worker)


@dataclasses.dataclass
class Update:
    """One training update: the tick (vector step) it ran in, the transition counter when its
    ``train_step`` decided to run it, and its batch."""

    tick: int
    transition: int
    batch: list[Draw]

    @property
    def online(self) -> list[tuple[int, int, int]]:
        """``(batch slot, worker, start)`` of the online pops."""
        return [(i, d.worker, d.start) for i, d in enumerate(self.batch) if d.is_online]

    @property
    def n_uniform(self) -> int:
        return sum(not d.is_online for d in self.batch)


@dataclasses.dataclass
class Trace:
    """What a run of :func:`run` did."""

    n_envs: int
    gate_transition: int | None  # transition of the first ``Ratio`` call (the first update)
    counts: np.ndarray  # [ticks * n_envs]: counts[s - 1] updates decided at transition s
    updates: list[Update]
    replay: Replay

    def per_tick(self) -> np.ndarray:
        """Updates per tick: the transitions ``n i + 1 .. n (i + 1)`` summed."""
        return self.counts.reshape(-1, self.n_envs).sum(1)


def run(
    n_envs: int,
    batch_size: int,
    batch_length: int,
    train_ratio: float,
    ticks: int,
    order: str = "reference",
    train_fill: int = 0,
    seed: int = 0,
    ring_rows: int | None = None,
) -> Trace:
    """Run ``ticks`` vector steps of counter envs through the ported loop (see module doc)."""
    assert order in ("reference", "tick"), order
    length = batch_length + 1  # the reference's batch_length (window incl. context row)
    batch_steps = batch_size * (length - 1)  # B (batch_length - replay_context)
    should_train = Ratio(train_ratio / batch_steps)
    replay = Replay(length, seed, ring_rows)
    step = [0]  # the logger's step counter
    counts = []
    updates = []
    pending = []  # "tick" order: transitions whose updates wait for the vector step's end
    gate = [None]
    tick = [0]

    def train(transition: int) -> None:
        updates.append(Update(tick[0], transition, replay.next_batch(batch_size)))

    def increment(tran, worker):
        step[0] += 1

    def train_step(tran, worker):
        if len(replay) < batch_size or step[0] < train_fill:
            counts.append(0)
            return
        if gate[0] is None:
            gate[0] = step[0]
        n = should_train(step[0])
        counts.append(n)
        for _ in range(n):
            if order == "reference":
                train(step[0])
            else:
                pending.append(step[0])

    driver = Driver([CounterEnv(i) for i in range(n_envs)])
    driver.on_step(increment)
    driver.on_step(replay.add)
    driver.on_step(train_step)
    for tick[0] in range(ticks):
        driver.step()
        for transition in pending:
            train(transition)
        pending.clear()
    return Trace(n_envs, gate[0], np.array(counts, np.int64), updates, replay)
