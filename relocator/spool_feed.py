"""The spool path: whole per-epoch blobs from the spool directory into stored batches.

An external aggregator drops one blob per (epoch, dc, type, subtype) into the spool
directory (``intake/spool.py``). Each coordinator round, :meth:`SpoolFeed.seal_waiting`
takes up to :data:`FILES_PER_TICK` waiting files, commits each file's numbering (writer
id, seq) and seals it into a batch; the coordinator stores and pushes the batches like
any other. Once every cluster holds a file's batch, :meth:`SpoolFeed.finished` deletes
the file (the directory fsynced) and, with ZooKeeper, queues its progress entry for
deletion (:meth:`SpoolFeed.forget_progress`, at the next ZooKeeper round).

Failure semantics:

- The numbering is committed before the file is sealed: in the state store without
  ZooKeeper, in ``progress/<unit>/<file>`` with it. A takeover after the owner died
  reuses the committed numbering, so it writes the same keys and bytes (no second copy).
- A ZooKeeper error while committing ends the round (counted as
  ``relocator_zookeeper_errors_total{op="progress"}``); the files not yet taken wait for
  the next round. A unit lost meanwhile ends the round too.
- A file that does not parse as a Sereal array, or is larger than ``max_spool_bytes``
  (never read whole), is moved to ``.rejected/`` and counted
  (``relocator_spool_files_total{outcome="rejected"}``); it is never deleted, and the
  round goes on with the next file.
- A file is deleted only once every cluster holds its batch (the coordinator calls
  :meth:`finished`); a crash before that pushes the stored batch again at restart, and
  the file, already inside a stored batch, is not sealed again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING

from relocator.batch import Batch
from relocator.errors import BadSpoolFile, CoordinationUnavailable, OwnershipLost
from relocator.intake.spool import Spool, SpoolFile
from relocator.metrics import Metrics
from relocator.sealer import Sealer

if TYPE_CHECKING:
    from relocator.zk import ZkCoordinator

log = logging.getLogger(__name__)

#: Spool files sealed per coordinator round (keeps the loop's other work timely).
FILES_PER_TICK = 16


class SpoolFeed:
    """Takes waiting spool files, numbers and seals them; finishes them once pushed."""

    def __init__(
        self,
        spool: Spool,
        *,
        sealer: Sealer,
        reserve_seq: Callable[[], int],
        pool: Executor,
        metrics: Metrics,
        writer_id: int,
        zk: ZkCoordinator | None = None,
    ) -> None:
        """Args:
        reserve_seq: allocates a batch sequence number, durably (``State.reserve_seq``).
        pool: where the sealing runs (decompress, walk, maybe re-encode: C code that
            releases the GIL in part); the caller owns it.
        zk: the ZooKeeper coordinator; None takes every file, numbered locally.
        """
        self.spool = spool
        self._sealer = sealer
        self._reserve_seq = reserve_seq
        self._pool = pool
        self._metrics = metrics
        self._writer_id = writer_id
        self._zk = zk
        self._forget: list[tuple[int, str]] = []  # progress entries left to delete

    def seal_waiting(self, taken: set[str]) -> list[Batch]:
        """Seal up to :data:`FILES_PER_TICK` waiting files (owned ones, with ZooKeeper).

        Numbering is committed here, in name order; the sealing runs on the pool. A file
        that cannot be sealed is rejected and counted.

        Args:
            taken: names of files already inside a stored batch (not sealed again).

        Returns:
            The sealed batches, not yet stored: the caller stores them in one
            transaction.
        """
        zk = self._zk
        waiting = self.spool.waiting(
            lambda f: f.name in taken or (zk is not None and not zk.owns(f.unit))
        )[:FILES_PER_TICK]
        jobs: list[tuple[SpoolFile, Future[Batch]]] = []
        for f in waiting:
            try:
                numbering = self._numbering(f)
            except OwnershipLost:
                break
            except CoordinationUnavailable as e:
                self._metrics.zookeeper_errors.labels("progress").inc()
                log.warning("zk: progress failed, retried next tick: %s", e)
                break
            try:
                data = self.spool.read(f) if numbering is not None else None
            except BadSpoolFile as e:  # over max_spool_bytes: never read whole
                self._reject(f, e)
                continue
            if numbering is None or data is None:
                continue
            writer, seq = numbering
            future = self._pool.submit(
                self._sealer.seal_spool,
                f.name,
                data,
                epoch=f.epoch,
                dc=f.dc,
                type_=f.type,
                subtype=f.subtype,
                seq=seq,
                writer_id=writer,
            )
            jobs.append((f, future))
        sealed: list[Batch] = []
        for f, future in jobs:
            try:
                batch = future.result()
            except BadSpoolFile as e:
                self._reject(f, e)
                continue
            self._metrics.spool_files.labels("sealed").inc()
            self._metrics.received.labels("spool").inc(sum(batch.events))
            sealed.append(batch)
        return sealed

    def _reject(self, f: SpoolFile, error: BadSpoolFile) -> None:
        log.error("spool: %s rejected to .rejected/: %s", f.name, error)
        self._metrics.spool_files.labels("rejected").inc()
        self.spool.reject(f.name, str(error))

    def _numbering(self, f: SpoolFile) -> tuple[int, int] | None:
        """(writer, seq) of a spool file's batch: committed in ZooKeeper first when
        configured (reused after a takeover).

        Raises:
            OwnershipLost: the file's unit is no longer ours.
            CoordinationUnavailable: a ZooKeeper call failed.
        """
        if self._zk is None:
            return self._writer_id, self._reserve_seq()
        committed = self._zk.progress_get(f.unit, f.name)
        if committed is not None:  # a takeover: same numbering, same keys and bytes
            writer, seq = committed
            log.info(
                "spool: %s resumes with committed numbering writer=%d seq=%d epoch=%d dc=%s",
                f.name,
                writer,
                seq,
                f.epoch,
                f.dc,
            )
        else:
            writer, seq = self._zk.progress_commit(
                f.unit, f.name, self._writer_id, self._reserve_seq()
            )
        if not self._zk.owns(f.unit):
            raise OwnershipLost(f"spool unit {f.unit}")
        return writer, seq

    def may_push(self, name: str) -> bool:
        """Whether a batch of this file may be pushed now (ZooKeeper connected and the
        writer id registered): by its unit's owner only, so two relocators never push
        one file at once; once the file is gone (its owner finished it: same keys and
        bytes), a copy left here may be pushed too."""
        if self._zk is None:
            return True
        return self._zk.owns(self.spool.unit(name)) or not (self.spool.directory / name).exists()

    def finished(self, name: str) -> None:
        """Every cluster holds the file's batch: delete the file (durably) and queue its
        ZooKeeper progress entry for deletion."""
        self.spool.delete(name)
        if self._zk is not None:
            # deleted at the next forget_progress (retried while ZooKeeper fails)
            self._forget.append((self.spool.unit(name), name))
        self._metrics.spool_files.labels("pushed").inc()

    def forget_progress(self) -> None:
        """Delete the progress entries of finished files, oldest first, while the
        session is active.

        Raises:
            CoordinationUnavailable: a ZooKeeper call failed (the rest wait).
        """
        zk = self._zk
        while zk is not None and self._forget and zk.active():
            unit, name = self._forget[0]
            zk.progress_delete(unit, name)
            self._forget.pop(0)
