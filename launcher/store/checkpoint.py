"""Checkpoints with orbax-checkpoint: the whole seed-batched state + JSON metadata.

One checkpoint per saved chunk, named by the agent env steps done (``timestep``), under
``RUN_DIR/checkpoints/<step>/`` (``state/`` in orbax's OCDBT format, ``meta/`` JSON
with the chunk number, tick offset and run length).
orbax writes into a temporary directory and renames it when complete, so a run killed
mid-save leaves only complete checkpoints behind; the latest ``keep`` are kept.

The metadata holds a *fingerprint* of the state (a position-weighted uint32 sum of the
bits of every leaf, computed on device), checked on restore: a checkpoint whose files
cannot be read, or read back to other bits, is moved to ``corrupt_checkpoints/`` with a
warning and the previous one is used.

The state is stored as a flat mapping ``{leaf path: array}`` (typed PRNG keys as their
raw key data, re-wrapped on restore). Zero-size leaves (MJX keeps a few) are not
stored (orbax refuses them) and are recreated as zeros; the leaf paths are recorded in
the metadata and must match the restore target's.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from launcher.errors import ConfigError

log = logging.getLogger(__name__)


def _is_key(x: Any) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def to_raw(tree: Any) -> Any:
    """Typed PRNG key leaves -> their uint32 key data (other leaves unchanged)."""
    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def from_raw(tree: Any, template: Any) -> Any:
    """Inverse of :func:`to_raw`, with the key types of ``template``."""

    def wrap(x: Any, t: Any) -> Any:
        if _is_key(t):  # the key dtype carries its implementation (also on abstract leaves)
            return jax.random.wrap_key_data(x, impl=t.dtype._impl)
        return x

    return jax.tree.map(wrap, tree, template)


def abstract_raw(abstract: Any) -> Any:
    """Shape/dtype/sharding structs of :func:`to_raw` of a state described by ``abstract``."""

    def raw(s: Any) -> Any:
        if not _is_key(s):
            return s
        data = jax.eval_shape(jax.random.key_data, s)
        return jax.ShapeDtypeStruct(data.shape, data.dtype, sharding=s.sharding)

    return jax.tree.map(raw, abstract)


def leaf_names(tree: Any) -> list[str]:
    """A unique, orbax-safe name per leaf of ``tree`` (from its path), in leaf order."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    names = [re.sub(r"[^A-Za-z0-9_]+", "_", jax.tree_util.keystr(p)).strip("_") for p, _ in flat]
    names = [f"{i:05d}_{n}" for i, n in enumerate(names)]
    return names


def flat_stored(tree: Any) -> dict[str, Any]:
    """``{name: leaf}`` of the leaves orbax stores (raw keys, non-empty)."""
    raw = to_raw(tree)
    leaves = jax.tree.leaves(raw)
    return {n: x for n, x in zip(leaf_names(raw), leaves, strict=True) if _size(x)}


def _size(x: Any) -> int:
    size = 1
    for d in x.shape:
        size *= int(d)
    return size


@jax.jit
def _fingerprint_leaves(leaves: list[jax.Array]) -> jax.Array:
    sums = []
    for x in leaves:
        width = np.dtype(x.dtype).itemsize
        if x.dtype == jnp.bool_:
            bits = x.astype(jnp.uint32)
        else:
            utype = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint32}[width]
            bits = jax.lax.bitcast_convert_type(x, utype).astype(jnp.uint32)
        flat = bits.reshape(-1)
        weight = jnp.arange(1, flat.size + 1, dtype=jnp.uint32) * jnp.uint32(2654435761)
        sums.append(jnp.sum(flat * weight, dtype=jnp.uint32) ^ jnp.uint32(flat.size))
    return jnp.stack(sums) if sums else jnp.zeros((0,), jnp.uint32)


def fingerprint(state: Any) -> str:
    """A hex digest of the bits of every leaf of ``state`` (raw keys)."""
    leaves = jax.tree.leaves(to_raw(state))
    sums = np.asarray(jax.device_get(_fingerprint_leaves(leaves)))
    return "".join(f"{int(v):08x}" for v in sums)


class Checkpointer:
    """Save and restore ``(state, meta)`` pairs by env step, keeping the latest ``keep``."""

    def __init__(self, directory: Path, keep: int, corrupt_dir: Path, create: bool = True) -> None:
        import orbax.checkpoint as ocp

        self._ocp = ocp
        self.directory = Path(directory).absolute()
        self.corrupt_dir = Path(corrupt_dir).absolute()
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep, create=create, cleanup_tmp_directories=create
            ),
        )

    def steps(self) -> list[int]:
        """Env steps of the complete checkpoints, ascending."""
        return sorted(self.manager.all_steps())

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        """Start saving (asynchronous; :meth:`wait` or the next save completes it)."""
        ocp = self._ocp
        self.manager.wait_until_finished()
        meta = {**meta, "fingerprint": fingerprint(state), "leaves": leaf_names(to_raw(state))}
        self.manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(flat_stored(state)), meta=ocp.args.JsonSave(meta)
            ),
            force=True,
        )

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()

    def read_meta(self, step: int) -> dict[str, Any]:
        """The JSON metadata of checkpoint ``step`` (no state read)."""
        ocp = self._ocp
        out = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return dict(out.meta)

    def restore(self, step: int, abstract: Any) -> tuple[Any, dict[str, Any]]:
        """``(state, meta)`` of checkpoint ``step``; raises if unreadable or altered."""
        ocp = self._ocp
        raw = abstract_raw(abstract)
        names = leaf_names(raw)
        meta = self.read_meta(step)
        if meta.get("leaves") != names:
            raise ValueError("the checkpoint's state structure differs from this agent's")
        out = self.manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(flat_stored(raw)), meta=ocp.args.JsonRestore()
            ),
        )
        leaves = [
            out.state[n] if _size(t) else jax.device_put(jnp.zeros(t.shape, t.dtype), t.sharding)
            for n, t in zip(names, jax.tree.leaves(raw), strict=True)
        ]
        state = from_raw(jax.tree.unflatten(jax.tree.structure(raw), leaves), abstract)
        meta = dict(out.meta)
        if meta.get("fingerprint") != fingerprint(state):
            raise ValueError("the restored state's bits differ from the saved fingerprint")
        return state, meta

    def restore_latest(
        self,
        abstract_for: Callable[[dict[str, Any]], Any],
        set_aside: bool = True,
        at_most: int | None = None,
    ) -> tuple[Any, dict[str, Any]] | None:
        """The latest checkpoint that restores cleanly, or None if there is none
        (``at_most``: of those saved at env step ``at_most`` or earlier).

        ``abstract_for(meta)`` gives the restore target for a checkpoint's metadata
        (its shapes may depend on the run length it was saved with). Unreadable
        checkpoints newer than the one restored are skipped with a warning and, if
        ``set_aside``, moved to the corrupt directory (a resume must not meet them
        again). If no checkpoint restores, nothing is moved and ConfigError is raised:
        starting over in a run directory with checkpoints is left to the user.
        """
        failed: list[tuple[int, BaseException]] = []
        steps = [s for s in self.steps() if at_most is None or s <= at_most]
        for step in reversed(steps):
            try:
                meta = self.read_meta(step)
                restored = self.restore(step, abstract_for(meta))
            except Exception as err:  # noqa: BLE001 - any failure means: not usable
                # reported once, below: by _skip (fallen back) or in the ConfigError (none
                # restores); a warning here too said every fallback twice
                failed.append((step, err))
                continue
            for bad, err in failed:
                self._skip(bad, err, set_aside)
            return restored
        if failed:
            reasons = "; ".join(f"{c}: {_reason(e)}" for c, e in failed)
            raise ConfigError(
                f"no checkpoint in {self.directory} can be restored ({reasons}); move the "
                "directory away to start the run over"
            )
        return None

    def _skip(self, step: int, err: BaseException, set_aside: bool) -> None:
        where = ""
        if set_aside:
            self.corrupt_dir.mkdir(parents=True, exist_ok=True)
            target = self.corrupt_dir / f"{step}-{time.strftime('%Y%m%d-%H%M%S')}"
            shutil.move(str(self.directory / str(step)), str(target))
            self.manager.reload()
            where = f"; moved to {target}"
        log.warning(
            "checkpoint %d is unreadable (%s)%s; falling back to the previous one",
            step,
            _reason(err),
            where,
        )


def _reason(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0][:200] if text else ''}"
