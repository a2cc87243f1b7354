"""Offline multi-task datasets: the schema of docs/design.md §7.6, pooling, checks, files.

Schema (every array NumPy; ``N`` episodes, ``L = max_i T_i + 1`` rows, obs-aligned as the
single-task ring, :mod:`agents.tdmpc2.buffer`):

* ``obs    float32 [N, L, O_max]``: row ``k`` is the observation after ``k`` steps, zero-padded
  at the end to ``O_max`` (``envs/wrappers/multitask.py:44-47`` of the reference);
* ``action float32 [N, L, A_max]``: row ``k`` is the action taken at obs ``k``; zeros on the
  invalid dims ``[A_i:]`` and on the last row ``T_i`` (no action follows the last obs);
* ``reward float32 [N, L]``: row ``k`` is the reward received on entering obs ``k``; row 0
  (the reset row) is 0;
* ``task   int32 [N]``: the episode's task id, an index into ``tasks``.

Rows past an episode's own ``T_i + 1`` are zero (a task with shorter episodes is padded in
time as well, so that every task shares one array; the sampler draws windows inside
``[0, T_i]``). ``tasks`` holds, per id, a :class:`TaskInfo` (name, the env it was collected
on, dims, episode length), everything needed to rebuild the task's eval env.

Files: a directory with one ``.npy`` per array and ``dataset.json`` (schema version, tasks,
shapes, provenance and the SHA-256 content hash). NumPy reads it without this project
(``np.load(dir / "obs.npy", mmap_mode="r")``), and :meth:`MultiTaskDataset.load` memory-maps
the arrays, so a dataset larger than host memory is read as it is used. (npz cannot be
memory-mapped; a directory of ``.npy`` files can.) This module is the dataset's file
format, hence its only I/O.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA_VERSION = 1
ARRAYS = ("obs", "action", "reward", "task")
DTYPES = {"obs": np.float32, "action": np.float32, "reward": np.float32, "task": np.int32}
META_FILE = "dataset.json"
HASH_CHUNK = 4096  # episodes hashed per read: the hash streams memory-mapped arrays


class DatasetError(ValueError):
    """A dataset that breaks the schema or does not match its recorded hash."""


@dataclasses.dataclass(frozen=True)
class TaskInfo:
    """One task of a dataset.

    Attributes:
        name: unique within a dataset (by default the env id).
        env_id / action_repeat / backend_episode_length: ``envs.make`` arguments that
            rebuild the task's env (``backend_episode_length`` in backend steps).
        obs_dim / action_dim: the task's own sizes (before padding).
        episode_length: ``T_i`` in agent steps; an episode holds ``T_i + 1`` rows.
    """

    name: str
    env_id: str
    obs_dim: int
    action_dim: int
    episode_length: int
    action_repeat: int = 1
    backend_episode_length: int | None = None

    @classmethod
    def from_spec(cls, spec: Any, name: str | None = None) -> TaskInfo:
        """The task of an env spec (``envs.EnvSpec``)."""
        return cls(
            name=name or spec.env_id,
            env_id=spec.env_id,
            obs_dim=int(spec.obs_size),
            action_dim=int(spec.action_size),
            episode_length=int(spec.episode_length),
            action_repeat=int(spec.action_repeat),
            backend_episode_length=int(spec.episode_length * spec.action_repeat),
        )


@dataclasses.dataclass(frozen=True, eq=False)
class MultiTaskDataset:
    """Episodes of several tasks in one padded layout (module docstring).

    Attributes:
        obs / action / reward / task: the arrays of the schema (NumPy or memory-mapped).
        tasks: one :class:`TaskInfo` per task id.
        source: free-form provenance (JSON-serialisable; not part of the content hash).
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    task: np.ndarray
    tasks: tuple[TaskInfo, ...]
    source: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    # ------------------------------------------------------------------ facts
    @property
    def num_episodes(self) -> int:
        return int(self.task.shape[0])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tasks)

    @property
    def obs_max(self) -> int:
        return max(t.obs_dim for t in self.tasks)

    @property
    def action_max(self) -> int:
        return max(t.action_dim for t in self.tasks)

    @property
    def rows(self) -> int:
        """``L = max_i T_i + 1``."""
        return max(t.episode_length for t in self.tasks) + 1

    def episode_lengths(self) -> np.ndarray:
        """int32 ``[N]``: each episode's ``T_i``."""
        table = np.asarray([t.episode_length for t in self.tasks], np.int32)
        return table[np.asarray(self.task)]

    def episodes_per_task(self) -> dict[str, int]:
        counts = np.bincount(np.asarray(self.task), minlength=len(self.tasks))
        return {t.name: int(c) for t, c in zip(self.tasks, counts, strict=True)}

    # ------------------------------------------------------------------ check
    def check(self) -> MultiTaskDataset:
        """Validate the schema, zero padding included; returns ``self``.

        Raises:
            DatasetError: naming the first array and episode that break it.
        """
        if not self.tasks:
            raise DatasetError("a dataset needs at least one task")
        names = self.names
        if len(set(names)) != len(names):
            raise DatasetError(f"task names must be unique, got {names}")
        N, L, O_max, A = self.num_episodes, self.rows, self.obs_max, self.action_max
        want = {"obs": (N, L, O_max), "action": (N, L, A), "reward": (N, L), "task": (N,)}
        for name in ARRAYS:
            arr = getattr(self, name)
            if arr.dtype != DTYPES[name]:
                raise DatasetError(f"{name}: dtype {arr.dtype}, expected {DTYPES[name].__name__}")
            if tuple(arr.shape) != want[name]:
                raise DatasetError(f"{name}: shape {tuple(arr.shape)}, expected {want[name]}")
        task = np.asarray(self.task)
        if N and (task.min() < 0 or task.max() >= len(self.tasks)):
            raise DatasetError(
                f"task: ids must lie in [0, {len(self.tasks)}), got {task.min()}..{task.max()}"
            )
        for start in range(0, N, HASH_CHUNK):
            self._check_chunk(start, min(N, start + HASH_CHUNK))
        return self

    def _check_chunk(self, lo: int, hi: int) -> None:
        obs, action = np.asarray(self.obs[lo:hi]), np.asarray(self.action[lo:hi])
        reward, task = np.asarray(self.reward[lo:hi]), np.asarray(self.task[lo:hi])
        for name, arr in (("obs", obs), ("action", action), ("reward", reward)):
            bad = ~np.isfinite(arr).reshape(arr.shape[0], -1).all(axis=1)
            if bad.any():
                raise DatasetError(
                    f"{name}: non-finite values in episode {lo + int(np.argmax(bad))}"
                )
        rows = np.arange(self.rows)
        for i, info in enumerate(self.tasks):
            sel = np.flatnonzero(task == i)
            if not sel.size:
                continue
            T = info.episode_length
            pads = (
                ("obs beyond the task's obs dim", obs[sel][:, :, info.obs_dim :]),
                ("action beyond the task's action dim", action[sel][:, :, info.action_dim :]),
                ("action on the last row", action[sel][:, T]),
                ("obs past the episode's last row", obs[sel][:, rows > T]),
                ("action past the episode's last row", action[sel][:, rows > T]),
                ("reward on the reset row", reward[sel][:, 0]),
                ("reward past the episode's last row", reward[sel][:, rows > T]),
            )
            for what, arr in pads:
                nonzero = np.any(arr.reshape(arr.shape[0], -1) != 0, axis=1)
                if nonzero.any():
                    ep = lo + int(sel[np.argmax(nonzero)])
                    raise DatasetError(
                        f"episode {ep} (task {info.name!r}): {what} must be zero (padding)"
                    )

    # ------------------------------------------------------------------- hash
    def content_hash(self) -> str:
        """SHA-256 of the schema version, the tasks and every array's dtype, shape and
        bytes (C order). ``source`` is provenance, not content, and is left out."""
        h = hashlib.sha256()
        head = {"schema": SCHEMA_VERSION, "tasks": [dataclasses.asdict(t) for t in self.tasks]}
        h.update(json.dumps(head, sort_keys=True).encode())
        for name in ARRAYS:
            arr = getattr(self, name)
            h.update(f"{name}:{np.dtype(arr.dtype).str}:{tuple(arr.shape)}".encode())
            for start in range(0, arr.shape[0], HASH_CHUNK):
                h.update(np.ascontiguousarray(arr[start : start + HASH_CHUNK]).tobytes())
        return h.hexdigest()

    # ------------------------------------------------------------------ files
    def save(self, path: Path | str) -> str:
        """Write the dataset directory ``path`` (created; refuses a non-empty one).
        Returns the content hash written to ``dataset.json``."""
        path = Path(path)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise FileExistsError(
                f"{path}: exists and is not an empty directory; choose a new path"
            )
        self.check()
        path.mkdir(parents=True, exist_ok=True)
        for name in ARRAYS:
            np.save(path / f"{name}.npy", np.asarray(getattr(self, name)), allow_pickle=False)
        digest = self.content_hash()
        meta = {
            "schema": SCHEMA_VERSION,
            "sha256": digest,
            "num_episodes": self.num_episodes,
            "episodes_per_task": self.episodes_per_task(),
            "shapes": {name: list(getattr(self, name).shape) for name in ARRAYS},
            "tasks": [dataclasses.asdict(t) for t in self.tasks],
            "source": dict(self.source),
        }
        (path / META_FILE).write_text(json.dumps(meta, indent=1) + "\n")
        return digest

    @classmethod
    def load(cls, path: Path | str, *, mmap: bool = True, verify: bool = True) -> MultiTaskDataset:
        """Read a dataset directory. ``mmap`` memory-maps the arrays (read-only);
        ``verify`` recomputes the content hash and checks the schema.

        Raises:
            DatasetError: a missing file, a schema version this code does not read, a
                hash mismatch (the arrays changed since they were saved) or a schema error.
        """
        path = Path(path)
        meta_file = path / META_FILE
        if not meta_file.is_file():
            raise DatasetError(
                f"{path}: no {META_FILE}; not a dataset directory "
                "(write one with python -m launcher.export)"
            )
        meta = json.loads(meta_file.read_text())
        if meta.get("schema") != SCHEMA_VERSION:
            raise DatasetError(
                f"{path}: schema version {meta.get('schema')}, this code reads {SCHEMA_VERSION}"
            )
        arrays = {}
        for name in ARRAYS:
            f = path / f"{name}.npy"
            if not f.is_file():
                raise DatasetError(f"{path}: missing {f.name}")
            arrays[name] = np.load(f, mmap_mode="r" if mmap else None, allow_pickle=False)
        tasks = tuple(TaskInfo(**t) for t in meta["tasks"])
        data = cls(**arrays, tasks=tasks, source=meta.get("source", {}))
        if verify:
            digest = data.content_hash()
            if digest != meta.get("sha256"):
                raise DatasetError(
                    f"{path}: content hash {digest[:12]}... differs from the recorded "
                    f"{str(meta.get('sha256'))[:12]}...: the files changed after they were saved"
                )
            data.check()
        return data


# ------------------------------------------------------------------------------ building
def from_episodes(
    obs: np.ndarray,
    action: np.ndarray,
    reward: np.ndarray,
    info: TaskInfo,
    source: Mapping[str, Any] | None = None,
) -> MultiTaskDataset:
    """A one-task dataset from episodes in the ring's layout: obs ``[N, T+1, O]``,
    action ``[N, T+1, A]``, reward ``[N, T+1]`` (unpadded; checked)."""
    obs, action, reward = (np.asarray(x, np.float32) for x in (obs, action, reward))
    n = obs.shape[0]
    data = MultiTaskDataset(obs, action, reward, np.zeros(n, np.int32), (info,), dict(source or {}))
    return data.check()


def pool_tasks(
    datasets: Iterable[MultiTaskDataset], source: Mapping[str, Any] | None = None
) -> MultiTaskDataset:
    """Concatenate datasets (in order) into one, re-padded to the pooled ``O_max``, ``A_max``
    and ``L``. Tasks are merged by name, in first-seen order (episodes of the same task from
    several seeds or runs pool under one id); the same name must describe the same task."""
    datasets = list(datasets)
    if not datasets:
        raise DatasetError("pool_tasks needs at least one dataset")
    tasks: list[TaskInfo] = []
    for d in datasets:
        for t in d.tasks:
            known = next((k for k in tasks if k.name == t.name), None)
            if known is None:
                tasks.append(t)
            elif known != t:
                raise DatasetError(f"task {t.name!r} appears with different facts: {known} vs {t}")
    ids = {t.name: i for i, t in enumerate(tasks)}
    L = max(t.episode_length for t in tasks) + 1
    O_max, A = max(t.obs_dim for t in tasks), max(t.action_dim for t in tasks)

    def pad(x: np.ndarray, last: int | None) -> np.ndarray:
        widths = [(0, 0), (0, L - x.shape[1])] + ([(0, last - x.shape[2])] if last else [])
        return np.pad(np.asarray(x), widths)

    remap = [np.asarray([ids[t.name] for t in d.tasks], np.int32) for d in datasets]
    pooled = MultiTaskDataset(
        obs=np.concatenate([pad(d.obs, O_max) for d in datasets]),
        action=np.concatenate([pad(d.action, A) for d in datasets]),
        reward=np.concatenate([pad(d.reward, None) for d in datasets]),
        task=np.concatenate([m[np.asarray(d.task)] for m, d in zip(remap, datasets, strict=True)]),
        tasks=tuple(tasks),
        source=dict(source or {"pooled": [dict(d.source) for d in datasets]}),
    )
    return pooled.check()


def select_tasks(data: MultiTaskDataset, names: Sequence[str]) -> MultiTaskDataset:
    """The episodes of tasks ``names`` (ids renumbered in that order), re-padded."""
    missing = [n for n in names if n not in data.names]
    if missing:
        raise DatasetError(f"tasks {missing} are not in the dataset (it holds {list(data.names)})")
    parts = []
    for name in names:
        i = data.names.index(name)
        sel = np.flatnonzero(np.asarray(data.task) == i)
        info = data.tasks[i]
        T = info.episode_length
        parts.append(
            MultiTaskDataset(
                np.asarray(data.obs[sel][:, : T + 1, : info.obs_dim]),
                np.asarray(data.action[sel][:, : T + 1, : info.action_dim]),
                np.asarray(data.reward[sel][:, : T + 1]),
                np.zeros(sel.size, np.int32),
                (info,),
            )
        )
    return pool_tasks(parts, source=data.source)
