"""The devnode's embedded store: LMDB, one writer thread with group commit.

Objectives, in order: (1) an acknowledged write survives a crash or power loss;
(2) a crash never leaves a half-written object; (3) reads never wait for writes;
(4) many concurrent writers share one fsync.

Algorithm:
- Reads open a read-only LMDB transaction (MVCC, no lock with the writer), copy the
  record out once and close it. They run on the caller's thread.
- Writes are queued to the writer thread as operations. The writer takes every queued
  operation (up to ``write_batch_max``), applies them all in ONE write transaction and
  commits it: one fdatasync for the batch. Only after the commit returns does it resolve
  each operation's future, so a client's PUT is answered only once its bytes are durable.
- Every live object with an expiry and every tombstone has an entry in the purge index,
  keyed by the time it falls due. Overwrites move the entry in the same transaction.
  ``purge`` walks the index from its start and deletes what fell due.

Failure scenarios:
1. Crash or power loss mid-commit: LMDB's copy-on-write B-tree and meta-page flip mean
   the store reopens at the last committed transaction; queued, unanswered writes are
   lost and their clients saw no answer (they retry).
2. One operation of a batch fails (e.g. a record too large for the map): the batch is
   aborted and each operation is re-applied in its own transaction, so only the failing
   one fails.
3. Map full: the transaction aborts, the write answers 500, nothing already stored is
   touched. Raise ``map_size_bytes``.
4. Second devnode process on the same data dir: refused before the store is opened
   (the caller holds ``eventstore.dirlock``'s lock on the data directory). LMDB's own
   lock file would keep the store consistent, but hook queues and counters are per
   process.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import lmdb

from devnode import records
from devnode.errors import StoreFailure
from devnode.records import StoredObject

log = logging.getLogger(__name__)

T = TypeVar("T")
Operation = Callable[["lmdb.Transaction"], Any]

_STOP = object()


class ObjectStore:
    """Objects, the purge index and persisted props in one LMDB environment."""

    def __init__(self, path: Path, *, map_size_bytes: int, write_batch_max: int) -> None:
        """Open (creating if needed) the store in directory ``path``; start the writer.

        Raises:
            StoreFailure: the environment cannot be opened.
        """
        path.mkdir(parents=True, exist_ok=True)
        try:
            self._env = lmdb.open(
                str(path),
                map_size=map_size_bytes,
                max_dbs=4,
                sync=True,
                metasync=True,
                # Dirty pages go straight into the map and are msync'ed at commit: about
                # twice the synced write rate of write()+fdatasync for 400 KB values here.
                writemap=True,
                max_readers=256,
            )
        except lmdb.Error as e:
            raise StoreFailure(f"cannot open LMDB store in {path}: {e}") from e
        self._objects = self._env.open_db(b"objects")
        self._purge = self._env.open_db(b"purge")
        self._props = self._env.open_db(b"props")
        self._batch_max = max(1, write_batch_max)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write_loop, name="devnode-writer", daemon=True)
        self._writer.start()
        self.commits = 0
        self.committed_ops = 0

    # -- reads -----------------------------------------------------------------------

    def read(self, loc_key: bytes) -> StoredObject | None:
        """The record at ``loc_key`` (tombstones included), or ``None``."""
        with self._env.begin(db=self._objects, buffers=True) as txn:
            raw = txn.get(loc_key)
            return None if raw is None else records.decode(raw)

    def entries(self) -> int:
        """How many records (objects and tombstones) the store holds."""
        with self._env.begin() as txn:
            return int(txn.stat(self._objects)["entries"])

    def used_bytes(self) -> int:
        """Bytes of the map in use (pages up to the last one written), for /metrics."""
        info = self._env.info()
        return (int(info["last_pgno"]) + 1) * int(self._env.stat()["psize"])

    def healthy(self) -> bool:
        """Whether the writer thread runs and a read transaction opens (/readyz)."""
        if not self._writer.is_alive():
            return False
        try:
            with self._env.begin():
                return True
        except lmdb.Error:
            return False

    def load_props(self) -> dict[bytes, bytes]:
        """Every persisted props document, by its props key."""
        with self._env.begin(db=self._props) as txn:
            return {bytes(k): bytes(v) for k, v in txn.cursor()}

    # -- writes (all through the writer thread) --------------------------------------

    def write(self, loc_key: bytes, obj: StoredObject) -> Future[None]:
        """Store ``obj`` (object or tombstone) at ``loc_key``; the future resolves once
        the transaction holding it is committed and synced."""

        def op(txn: lmdb.Transaction) -> None:
            old = txn.get(loc_key, db=self._objects)
            if old is not None:
                _, old_purge, _ = records.decode_times(old)
                if old_purge:
                    txn.delete(records.purge_key(old_purge, loc_key), db=self._purge)
            txn.put(loc_key, records.encode(obj), db=self._objects)
            if obj.purge_at_ms:
                txn.put(records.purge_key(obj.purge_at_ms, loc_key), b"", db=self._purge)

        return self._submit(op)

    def purge_one(self, loc_key: bytes, write_time_ms: int) -> Future[bool]:
        """Remove the record at ``loc_key`` if it is still the one written at
        ``write_time_ms`` (a lazy purge after a read found it expired)."""

        def op(txn: lmdb.Transaction) -> bool:
            raw = txn.get(loc_key, db=self._objects)
            if raw is None:
                return False
            written, purge_at, _ = records.decode_times(raw)
            if written != write_time_ms:
                return False
            if purge_at:
                txn.delete(records.purge_key(purge_at, loc_key), db=self._purge)
            txn.delete(loc_key, db=self._objects)
            return True

        return self._submit(op)

    def purge_due(self, now_ms: int, limit: int) -> Future[int]:
        """Remove up to ``limit`` records whose purge time is at or before ``now_ms``;
        the future gives how many index entries were processed."""

        def op(txn: lmdb.Transaction) -> int:
            done = 0
            cursor = txn.cursor(db=self._purge)
            due: list[bytes] = []
            for raw_key in cursor.iternext(keys=True, values=False):
                index_key = bytes(raw_key)
                purge_at, _ = records.split_purge_key(index_key)
                if purge_at > now_ms or len(due) >= limit:
                    break
                due.append(index_key)
            del cursor
            for index_key in due:
                purge_at, loc_key = records.split_purge_key(index_key)
                txn.delete(index_key, db=self._purge)
                raw = txn.get(loc_key, db=self._objects)
                if raw is not None and records.decode_times(raw)[1] == purge_at:
                    txn.delete(loc_key, db=self._objects)
                done += 1
            return done

        return self._submit(op)

    def save_props(self, props_key: bytes, document: bytes) -> Future[None]:
        """Persist one props document (bucket or bucket type)."""

        def op(txn: lmdb.Transaction) -> None:
            txn.put(props_key, document, db=self._props)

        return self._submit(op)

    def close(self) -> None:
        """Finish queued writes, stop the writer and close the environment."""
        self._queue.put(_STOP)
        self._writer.join()
        self._env.close()

    # -- the writer ------------------------------------------------------------------

    def _submit(self, op: Operation) -> Future[Any]:
        future: Future[Any] = Future()
        self._queue.put((op, future))
        return future

    def _write_loop(self) -> None:
        stopping = False
        while not stopping:
            item = self._queue.get()
            if item is _STOP:
                break
            batch = [item]
            while len(batch) < self._batch_max:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                batch.append(item)
            self._commit(batch)

    def _commit(self, batch: list[tuple[Operation, Future[Any]]]) -> None:
        try:
            with self._env.begin(write=True) as txn:
                results = [op(txn) for op, _ in batch]
        except Exception as e:  # delivered to the futures, never swallowed
            if len(batch) > 1:
                log.warning(
                    "store: batch of %d writes aborted (%s); retrying one by one", len(batch), e
                )
                for single in batch:
                    self._commit([single])
                return
            log.error("store: write failed: %s", e)
            failure = (
                e if not isinstance(e, lmdb.Error) else StoreFailure(f"store write failed: {e}")
            )
            batch[0][1].set_exception(failure)
            return
        self.commits += 1
        self.committed_ops += len(batch)
        for (_, future), result in zip(batch, results, strict=True):
            future.set_result(result)
