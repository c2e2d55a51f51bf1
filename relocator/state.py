"""The relocator's durable state: sealed batches and which cluster holds which.

One LMDB environment ``<data_dir>/state`` (synchronous commits) with sub-databases:

- ``batches``: batch id -> encoded batch (``batch.py``) until it is complete and pruned;
- ``pushed``: ``<cluster>\\0<batch id>`` -> b"" once that cluster holds the batch's
  chunks AND its metadata entries;
- ``counters``: ``next_seq`` (u64), the next batch sequence number; ``store_id``, a
  random id written once when the store is created, also kept in the file
  ``<data_dir>/state/store-id`` beside it.

The id pair tells an emptied or replaced store (LMDB opens a 0-byte ``data.mdb`` as a new
store) from a new one: a store without an id next to a ``store-id`` file, or with another
id, is refused (:class:`StateStoreLost`); numbering batches from 0 again would write chunk
keys that hold stored events and store the journal's events again.

Failure semantics: every method is one LMDB write transaction, committed and synced
before it returns; a crash leaves either the old or the new state. ``add`` allocates
the sequence number and stores the batch in the same transaction, so a number is never
used twice. LMDB serialises writers; readers never wait.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterable
from pathlib import Path

import lmdb

from relocator.batch import Batch, decode_batch, encode_batch
from relocator.errors import StateStoreLost

_U64 = struct.Struct(">Q")


_RESTORE = (
    "restore it from a backup, or move the whole data directory aside to start afresh "
    "(its journal's events would then be pushed again)"
)


class State:
    """Batches and per-cluster progress, in LMDB at ``path``.

    Raises:
        StateStoreLost: the store was emptied, replaced or cannot be opened.
    """

    def __init__(self, path: Path, *, map_size_bytes: int) -> None:
        path.mkdir(parents=True, exist_ok=True)
        try:
            self._env = lmdb.open(
                str(path), map_size=map_size_bytes, max_dbs=4, sync=True, metasync=True
            )
            self._batches = self._env.open_db(b"batches")
            self._pushed = self._env.open_db(b"pushed")
            self._counters = self._env.open_db(b"counters")
        except lmdb.Error as e:
            raise StateStoreLost(f"state store {path} cannot be opened ({e}): {_RESTORE}") from e
        self._seq_lock = threading.Lock()
        try:
            self._check_identity(path / "store-id")
        except BaseException:
            self._env.close()
            raise

    def _check_identity(self, id_file: Path) -> None:
        with self._env.begin(write=True, db=self._counters) as txn:
            stored = txn.get(b"store_id")
            used = txn.get(b"next_seq") is not None
            if stored is None and not used and id_file.exists():
                raise StateStoreLost(
                    f"state store {id_file.parent} is empty, but {id_file} says this data "
                    f"directory had one: it was emptied or replaced; {_RESTORE}"
                )
            if stored is None:  # new, or written by a version without ids
                stored = os.urandom(16).hex().encode()
                txn.put(b"store_id", stored)
        known = id_file.read_bytes().strip() if id_file.exists() else None
        if known is not None and known != bytes(stored):
            raise StateStoreLost(
                f"state store {id_file.parent} is not the one {id_file} names: it was "
                f"replaced; {_RESTORE}"
            )
        if known is None:
            tmp = id_file.with_name(id_file.name + ".tmp")
            with tmp.open("wb") as f:
                f.write(bytes(stored) + b"\n")
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(id_file)
            fd = os.open(id_file.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def reserve_seq(self) -> int:
        """Allocate the next batch sequence number (durable before it returns)."""
        with self._seq_lock, self._env.begin(write=True, db=self._counters) as txn:
            raw = txn.get(b"next_seq")
            seq = _U64.unpack(raw)[0] if raw else 0
            txn.put(b"next_seq", _U64.pack(seq + 1))
            return seq

    def add(self, batches: Iterable[Batch]) -> None:
        """Store sealed batches (one transaction)."""
        with self._env.begin(write=True, db=self._batches) as txn:
            for b in batches:
                txn.put(b.id.encode(), encode_batch(b))

    def get(self, batch_id: str) -> Batch | None:
        """A stored batch, or None."""
        with self._env.begin(db=self._batches) as txn:
            raw = txn.get(batch_id.encode())
            return decode_batch(bytes(raw)) if raw is not None else None

    def ids(self) -> list[str]:
        """Every stored batch id, in sealing order."""
        with self._env.begin(db=self._batches) as txn:
            return [bytes(k).decode() for k in txn.cursor().iternext(keys=True, values=False)]

    def mark_pushed(self, cluster: str, batch_id: str) -> None:
        """Record that ``cluster`` holds the batch's chunks and metadata entries."""
        with self._env.begin(write=True, db=self._pushed) as txn:
            txn.put(f"{cluster}\0{batch_id}".encode(), b"")

    def pushed(self, cluster: str) -> set[str]:
        """Batch ids ``cluster`` holds."""
        prefix = f"{cluster}\0".encode()
        out = set()
        with self._env.begin(db=self._pushed) as txn:
            cur = txn.cursor()
            if cur.set_range(prefix):
                for k in cur.iternext(keys=True, values=False):
                    kb = bytes(k)
                    if not kb.startswith(prefix):
                        break
                    out.add(kb[len(prefix) :].decode())
        return out

    def remove(self, batch_id: str, clusters: Iterable[str]) -> None:
        """Forget a complete batch and its progress records (one transaction)."""
        with self._env.begin(write=True) as txn:
            txn.delete(batch_id.encode(), db=self._batches)
            for c in clusters:
                txn.delete(f"{c}\0{batch_id}".encode(), db=self._pushed)

    def close(self) -> None:
        """Close the environment."""
        self._env.close()
