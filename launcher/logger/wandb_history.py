"""What W&B has written of a run's history, read back from its local transaction logs.

Every launch's W&B run directory (``wandb/offline-run-<time>-<id>/``, or ``run-<time>-<id>/``
online) holds the transaction log ``run-<id>.wandb``: W&B's records (protobuf
``wandb_internal.Record``) in a block-framed file, the file ``wandb sync`` uploads. A
resumed launch reads the history rows of its run id from every such directory, oldest
launch first, to log only what they lack (:mod:`launcher.logger.wandb_logger`); the tests read
them to compare a resumed run's history with an uninterrupted one's.

Hand-written framing: wandb 0.31 ships no Python reader for its transaction log (the
reader lives in its Go service, wandb-core, which only uploads the file), and no other
package reads it. The records themselves are decoded with wandb's own protobuf classes.
The framing is LevelDB's log format with W&B's header and checksum: a 7-byte header
(``:W&B``, magic 0xBEE1, version 0), then 32 KiB blocks of chunks, each a 7-byte header
(CRC-32 of type byte + data, little-endian length, type: full / first / middle / last)
and its data; a block's tail shorter than a chunk header is zero padding. A log cut by a
kill ends in a torn chunk: reading stops at the first chunk that does not check out.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HEADER = struct.Struct("<4sHB")  # ident, magic, version
IDENT, MAGIC, VERSION = b":W&B", 0xBEE1, 0
CHUNK = struct.Struct("<IHB")  # checksum, length, type
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class UnreadableLog(ValueError):
    """A file that is not a W&B transaction log this reader knows."""


def records(data: bytes) -> Iterator[bytes]:
    """The serialized records of a transaction log's bytes, up to the first torn chunk.

    Raises:
      UnreadableLog: the file does not start with a known W&B header (an empty file, a
        header not yet written, reads as no records).
    """
    if len(data) < HEADER.size:
        return
    ident, magic, version = HEADER.unpack_from(data)
    if (ident, magic, version) != (IDENT, MAGIC, VERSION):
        raise UnreadableLog(f"not a W&B transaction log of version {VERSION} ({data[:7]!r})")
    pos, parts = HEADER.size, []
    while True:
        room = BLOCK - pos % BLOCK
        if room < CHUNK.size:  # the block's zero padding
            pos += room
            continue
        if pos + CHUNK.size > len(data):
            return
        checksum, length, kind = CHUNK.unpack_from(data, pos)
        start, end = pos + CHUNK.size, pos + CHUNK.size + length
        if length > room - CHUNK.size or end > len(data):
            return  # torn (or padding of a block never finished)
        body = data[start:end]
        if zlib.crc32(body, zlib.crc32(bytes([kind]))) != checksum:
            return
        pos = end
        if kind == FULL and not parts:
            yield body
        elif kind == FIRST and not parts:
            parts = [body]
        elif kind == MIDDLE and parts:
            parts.append(body)
        elif kind == LAST and parts:
            yield b"".join([*parts, body])
            parts = []
        else:
            return


def history_rows(path: Path) -> list[dict[str, Any]]:
    """The history rows (``{key: value}``, ``_step`` included) of one transaction log."""
    from wandb.proto import wandb_internal_pb2 as pb

    rows = []
    for data in records(Path(path).read_bytes()):
        record = pb.Record()
        record.ParseFromString(data)
        if record.WhichOneof("record_type") != "history":
            continue
        row = {_key(item): _value(item) for item in record.history.item}
        if record.history.HasField("step"):
            row.setdefault("_step", record.history.step.num)
        rows.append(row)
    return rows


def run_logs(wandb_dir: Path, run_id: str) -> list[Path]:
    """The transaction logs of W&B run ``run_id`` under ``wandb_dir``, oldest launch
    first (directory names hold the start time, ``<mode-prefix>-YYYYmmdd_HHMMSS-<id>``)."""
    wandb_dir = Path(wandb_dir)
    if not wandb_dir.is_dir():
        return []
    dirs = [d for d in wandb_dir.glob(f"*run-*-{run_id}") if (d / f"run-{run_id}.wandb").is_file()]
    dirs.sort(key=lambda d: (d.name.rsplit("-", 2)[-2], d.name))
    return [d / f"run-{run_id}.wandb" for d in dirs]


def history(wandb_dir: Path, run_id: str) -> list[dict[str, Any]]:
    """Every history row of W&B run ``run_id`` written under ``wandb_dir``, launch by
    launch, in the order written."""
    return [row for path in run_logs(wandb_dir, run_id) for row in history_rows(path)]


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def _value(item: Any) -> Any:
    if item.value_json:
        return json.loads(item.value_json)
    kind = item.WhichOneof("value")
    if kind is None or kind == "none":
        return None
    if kind == "json":
        return json.loads(item.json)
    return getattr(item, kind)
