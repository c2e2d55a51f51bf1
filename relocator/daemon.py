"""The relocator daemon: wires the stages and runs the coordinator loop.

Stages (each one or two methods): intake (``intake/``) -> ``JournalWriter`` (durable,
then acked) -> ``Aggregator`` (groups by epoch, dc) -> ``Sealer`` (chunks with fixed
keys) -> ``State`` (durable batch) -> one ``ClusterPusher`` per cluster (chunks, then
metadata) -> ``_collect`` (complete batches: spool file deleted, journal segments freed).

What is committed when (relocator/DESIGN.md has the full argument):

1. a frame is acknowledged (TCP) after it is in the journal and fdatasync'ed;
2. a group becomes a batch in the state store (LMDB, synced) before any of its chunks is
   pushed; only then are its journal records counted as covered;
3. a cluster is recorded as holding a batch after its chunks AND its metadata entries are
   stored there;
4. a batch every cluster holds is complete: its spool file is deleted, then the batch is
   pruned once none of its journal segments remains; a segment is deleted once all its
   records are in stored batches.

After kill -9 at any point, ``recover`` rebuilds everything from the journal and the
state store: uncovered journal records are aggregated again, stored batches are pushed
again to each cluster that does not hold them (identical keys and bytes).
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from eventstore.settings import parse_listen
from relocator.aggregator import Aggregator
from relocator.batch import Batch
from relocator.errors import BadSpoolFile, OwnershipLost
from relocator.intake.spool import Spool, SpoolFile
from relocator.intake.tcp import TcpIntake
from relocator.intake.udp import UdpIntake
from relocator.journal import Journal, JournalWriter, segment_of
from relocator.metadata import MetadataWriter
from relocator.metrics import Metrics
from relocator.pusher import ClusterPusher
from relocator.sealer import Sealer
from relocator.settings import RelocatorSettings
from relocator.state import State
from relocator.wire import Received
from relocator.zk import ZkCoordinator

log = logging.getLogger(__name__)

#: Spool files sealed per coordinator round (keeps the loop's other work timely).
_SPOOL_FILES_PER_TICK = 16


class _Index:
    """What the coordinator remembers of each stored batch (not its bytes)."""

    def __init__(self, batch: Batch) -> None:
        self.spool = batch.spool
        self.segments = batch.segments
        self.epoch = batch.epoch
        self.dc = batch.dc
        self.clusters: set[str] = set()


class Relocator:
    """One relocator process's stages, wired from ``settings``."""

    def __init__(
        self,
        settings: RelocatorSettings,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = s = settings
        self.metrics = metrics or Metrics()
        self._clock = clock
        self.state = State(s.data_dir / "state", map_size_bytes=s.state_map_size_bytes)
        self.journal = Journal(
            s.data_dir / "journal",
            segment_max_bytes=s.segment_max_bytes,
            fsync=s.fsync,
            metrics=self.metrics,
        )
        self.aggregator = Aggregator(
            grace_s=s.grace_s, max_hold_s=s.max_hold_s, metrics=self.metrics, clock=clock
        )
        self.writer = JournalWriter(
            self.journal,
            self._journaled,
            batch_max=s.journal_batch_max,
            queue_max=s.journal_queue_max,
            roll_s=s.segment_max_s,
        )
        self.zk = (
            ZkCoordinator(s.zookeeper, writer_id=s.writer_id, units=s.spool_units)
            if s.zookeeper
            else None
        )
        self.sealer = Sealer(
            writer_id=s.writer_id,
            reserve_seq=self.state.reserve_seq,
            chunk_max_bytes=s.chunk_max_bytes,
            compress=s.compression,
            metrics=self.metrics,
        )
        metadata = MetadataWriter(
            bucket_type=s.namespaces.epochs_bucket_type,
            bucket=s.namespaces.epochs_bucket,
            max_rounds=s.metadata_max_rounds,
            lock=self.zk.lock if self.zk else None,
            on_repair=lambda c: self.metrics.repairs.labels(c).inc(),
        )
        self.pushers = [
            ClusterPusher(
                c,
                state=self.state,
                namespaces=s.namespaces,
                metadata=metadata,
                metrics=self.metrics,
                parallel=s.push_parallel_batches,
                backoff_s=s.push_backoff_s,
                backoff_max_s=s.push_backoff_max_s,
                on_pushed=self._pushed,
            )
            for c in s.clusters
        ]
        self.spool = (
            Spool(Path(s.spool_dir), units=s.spool_units, max_bytes=s.max_spool_bytes)
            if s.spool_dir
            else None
        )
        # Sealing jobs (a group's kind, a spool file): C code that releases the GIL in
        # part (zstd), so two threads use both cores.
        self._seal_pool = ThreadPoolExecutor(2, thread_name_prefix="seal")
        self.udp: UdpIntake | None = None
        self.tcp: TcpIntake | None = None
        self._index: dict[str, _Index] = {}
        self._outstanding: dict[int, int] = {}  # journal segment -> records not in a batch
        self._pushed_events: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.stopped = threading.Event()

    # -- stages' callbacks ------------------------------------------------------------

    def _journaled(self, blocks: list[tuple[int, Received]]) -> None:
        # Back-pressure: while sealing is behind, hold the journal writer (this batch is
        # durable, its acks wait), so intake waits instead of memory growing.
        while (
            self.aggregator.open_positions() > self.settings.max_open_events
            and not self._stop.is_set()
        ):
            time.sleep(0.01)
        with self._lock:  # a block is one record: all its frames are in one segment
            for base, received in blocks:
                seg = segment_of(base)
                self._outstanding[seg] = self._outstanding.get(seg, 0) + received.events
        self.aggregator.add_received(blocks)

    def _pushed(self, cluster: str, batch_id: str) -> None:
        with self._lock:
            self._pushed_events.append((cluster, batch_id))

    # -- lifecycle -----------------------------------------------------------------------

    def recover(self) -> None:
        """Rebuild from disk: stored batches, then journal records not inside one."""
        covered: set[int] = set()
        existing = set(self.journal.segments())
        for batch_id in self.state.ids():
            batch = self.state.get(batch_id)
            assert batch is not None
            self._index[batch_id] = _Index(batch)
            if batch.segments & existing:
                covered.update(batch.positions)
        for pusher in self.pushers:
            done = self.state.pushed(pusher.name)
            for batch_id in done & self._index.keys():
                self._index[batch_id].clusters.add(pusher.name)
        replayed = 0
        positions: list[int] = []
        frames: list[bytes] = []
        for pos, payload in self.journal.replay():
            if pos in covered:
                continue
            positions.append(pos)
            frames.append(payload)
            seg = segment_of(pos)
            self._outstanding[seg] = self._outstanding.get(seg, 0) + 1
            replayed += 1
        self.aggregator.add_raw(positions, frames)
        log.info(
            "recover: %d stored batches, %d journal records to aggregate again",
            len(self._index),
            replayed,
        )

    def start(self) -> None:
        """Recover, then start ZooKeeper, pushers, the journal writer and intake."""
        s = self.settings
        self.recover()
        if self.zk:
            self.zk.start()
        for pusher in self.pushers:
            backlog = [b for b, ix in self._index.items() if pusher.name not in ix.clusters]
            pusher.start(backlog)
        self.writer.start()
        if s.udp_listen:
            host, port = parse_listen(s.udp_listen, source="udp_listen")
            self.udp = UdpIntake(
                host,
                port,
                writer=self.writer,
                metrics=self.metrics,
                max_event_bytes=s.max_event_bytes,
            )
            self.udp.start()
        if s.tcp_listen:
            host, port = parse_listen(s.tcp_listen, source="tcp_listen")
            self.tcp = TcpIntake(
                host,
                port,
                writer=self.writer,
                metrics=self.metrics,
                max_event_bytes=s.max_event_bytes,
            )
            self.tcp.start()

    def run(self) -> None:
        """The coordinator loop, until :meth:`request_stop`; then a clean shutdown."""
        try:
            while not self._stop.is_set() and self.writer.failed is None:
                self.tick()
                self._stop.wait(self.settings.tick_s)
        finally:
            self.shutdown()

    def tick(self, now: float | None = None) -> None:
        """One round: seal due groups, take spool files, collect complete batches."""
        due = self.aggregator.due(now)
        if due:
            batches = self.sealer.seal_all(due, self._seal_pool)
            self._store(zip(batches, (g.segments for g in due), strict=True))
        if self.spool is not None:
            self._scan_spool()
        if self.zk is not None:
            self.metrics.owned_units.set(len(self.zk.rebalance()))
        self._collect()

    def request_stop(self) -> None:
        """Ask :meth:`run` to return (signal-safe)."""
        self._stop.set()

    def shutdown(self, drain_s: float = 5.0) -> None:
        """Stop intake, journal what was received, seal everything, push for up to
        ``drain_s`` seconds, and stop. Anything not pushed stays on disk for next start."""
        if self.udp:
            self.udp.stop()
        if self.tcp:
            self.tcp.stop()
        self.writer.stop()
        self.tick(now=float("inf"))
        for pusher in self.pushers:
            pusher.stop(drain_s=drain_s)
        self._collect()
        self._seal_pool.shutdown(wait=True)
        if self.zk:
            self.zk.stop()
        self.journal.close()
        self.state.close()
        self.stopped.set()

    # -- coordinator steps ---------------------------------------------------------------

    def _store(self, batches: Iterable[tuple[Batch, dict[int, int]]]) -> None:
        """Store sealed batches (each with its events per journal segment) durably and
        offer them to the pushers."""
        done = list(batches)
        if not done:
            return
        sealed = [b for b, _ in done]
        self.state.add(sealed)
        with self._lock:
            for b, segments in done:
                self._index[b.id] = _Index(b)
                for seg, n in segments.items():
                    self._outstanding[seg] -= n
        for b in sealed:
            log.debug(
                "sealed epoch=%d dc=%s batch=%s chunks=%d late=%d",
                b.epoch,
                b.dc,
                b.id,
                len(b.keys),
                b.late,
            )
        for pusher in self.pushers:
            pusher.offer([b.id for b in sealed])

    def _scan_spool(self) -> None:
        """Seal waiting spool files: numbering committed here, in order; the splitting
        (decompress, walk, maybe re-encode: C code that releases the GIL in part) runs
        on a small thread pool; all batches of a round are stored in one transaction."""
        assert self.spool is not None
        taken = {ix.spool for ix in self._index.values() if ix.spool}
        zk = self.zk
        waiting = self.spool.waiting(
            lambda f: f.name in taken or (zk is not None and not zk.owns(f.unit))
        )[:_SPOOL_FILES_PER_TICK]
        jobs: list[tuple[SpoolFile, Future[Batch]]] = []
        for f in waiting:
            try:
                numbering = self._spool_numbering(f)
            except OwnershipLost:
                break
            data = self.spool.read(f) if numbering is not None else None
            if numbering is None or data is None:
                continue
            writer, seq = numbering
            jobs.append(
                (
                    f,
                    self._seal_pool.submit(
                        self.sealer.seal_spool,
                        f.name,
                        data,
                        epoch=f.epoch,
                        dc=f.dc,
                        type_=f.type,
                        subtype=f.subtype,
                        seq=seq,
                        writer_id=writer,
                    ),
                )
            )
        sealed: list[Batch] = []
        for f, future in jobs:
            try:
                batch = future.result()
            except BadSpoolFile as e:
                self.metrics.spool_files.labels("rejected").inc()
                self.spool.reject(f.name, str(e))
                continue
            self.metrics.spool_files.labels("sealed").inc()
            self.metrics.received.labels("spool").inc(sum(batch.events))
            sealed.append(batch)
        self._store((b, {}) for b in sealed)

    def _spool_numbering(self, f: SpoolFile) -> tuple[int, int] | None:
        """(writer, seq) of a spool file's batch: committed in ZooKeeper first when
        configured (reused after a takeover); None if the unit is no longer ours."""
        if self.zk is None:
            return self.settings.writer_id, self.state.reserve_seq()
        committed = self.zk.progress_get(f.unit, f.name)
        if committed is not None:  # a takeover: same numbering, same keys and bytes
            writer, seq = committed["writer"], committed["seq"]
            log.info(
                "spool: %s resumes with committed numbering writer=%d seq=%d epoch=%d dc=%s",
                f.name,
                writer,
                seq,
                f.epoch,
                f.dc,
            )
        else:
            writer, seq = self.settings.writer_id, self.state.reserve_seq()
            self.zk.progress_set(f.unit, f.name, writer, seq)
        if not self.zk.owns(f.unit):
            raise OwnershipLost(f"spool unit {f.unit}")
        return writer, seq

    def _collect(self) -> None:
        with self._lock:
            events, self._pushed_events = self._pushed_events, []
        for cluster, batch_id in events:
            if batch_id in self._index:
                self._index[batch_id].clusters.add(cluster)
        everyone = {p.name for p in self.pushers}
        # List first, then read the active segment: a segment older than the active one
        # has had every record counted (the writer counts before it rolls).
        segments = self.journal.segments()
        active = self.journal.active_segment
        with self._lock:
            free = [seg for seg in segments if seg < active and not self._outstanding.get(seg)]
            for seg in free:
                self._outstanding.pop(seg, None)
        for seg in free:
            self.journal.delete(seg)
        existing = set(self.journal.segments())
        for batch_id, ix in list(self._index.items()):
            if ix.clusters < everyone:
                continue
            if ix.spool and self.spool is not None:
                self.spool.delete(ix.spool)
                if self.zk is not None:
                    unit = _unit_of(ix.spool, self.settings.spool_units)
                    self.zk.progress_delete(unit, ix.spool)
                self.metrics.spool_files.labels("pushed").inc()
                ix.spool = ""
            if not ix.segments & existing:
                self.state.remove(batch_id, everyone)
                del self._index[batch_id]

    def status(self) -> dict[str, object]:
        """What ``/status`` shows: backlogs, events pushed per cluster since start, open
        events, owned units."""
        return {
            "writer_id": self.settings.writer_id,
            "batches": len(self._index),
            "open_events": self.aggregator.open_positions(),
            "backlog": {p.name: p.backlog() for p in self.pushers},
            "events_pushed": {p.name: p.events_pushed for p in self.pushers},
            "owned_units": sorted(self.zk.owned()) if self.zk else None,
            "zk_id": self.zk.id if self.zk else None,
            "udp_port": self.udp.port if self.udp else None,
            "tcp_port": self.tcp.port if self.tcp else None,
        }


def _unit_of(name: str, units: int) -> int:
    return zlib.crc32(name.encode()) % units
