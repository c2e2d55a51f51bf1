"""The relocator's durable state: sealed batches and which cluster holds which.

One LMDB environment ``<data_dir>/state`` (synchronous commits) with sub-databases:

- ``batches``: batch id -> encoded batch (``batch.py``) until it is complete and pruned;
- ``pushed``: ``<cluster>\\0<batch id>`` -> b"" once that cluster holds the batch's
  chunks AND its metadata entries;
- ``counters``: ``next_seq`` (u64), the next batch sequence number.

Failure semantics: every method is one LMDB write transaction, committed and synced
before it returns; a crash leaves either the old or the new state. ``add`` allocates
the sequence number and stores the batch in the same transaction, so a number is never
used twice. LMDB serialises writers; readers never wait.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterable
from pathlib import Path

import lmdb

from relocator.batch import Batch, decode_batch, encode_batch

_U64 = struct.Struct(">Q")


class State:
    """Batches and per-cluster progress, in LMDB at ``path``."""

    def __init__(self, path: Path, *, map_size_bytes: int) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._env = lmdb.open(
            str(path), map_size=map_size_bytes, max_dbs=4, sync=True, metasync=True
        )
        self._batches = self._env.open_db(b"batches")
        self._pushed = self._env.open_db(b"pushed")
        self._counters = self._env.open_db(b"counters")
        self._seq_lock = threading.Lock()

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
