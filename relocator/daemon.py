"""The relocator daemon: wires the stages and runs the coordinator loop.

Stages (each one or two methods): intake (``intake/``) -> ``JournalWriter`` (durable,
then acked) -> ``Aggregator`` (groups by epoch, dc) -> ``Sealer`` (chunks with fixed
keys) -> ``State`` (durable batch) -> one ``ClusterPusher`` per cluster (chunks, then
metadata) -> ``_collect`` (complete batches: spool file deleted, journal segments freed).
Whole blobs from the spool directory come in through ``SpoolFeed`` (``spool_feed.py``),
sealed on the same pool and stored the same way.

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

One process per data directory: ``eventstore.dirlock`` locks it for the process's life.
With ZooKeeper configured, a ZooKeeper error never ends the process: intake, the journal
and sealing go on, ownership decisions wait for the next tick, and a batch is pushed
only while the writer id is registered in the current session (and, for a spool file's
batch, while its unit is owned or its file is gone): see ``_may_push``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from eventstore.dirlock import lock_directory
from eventstore.settings import parse_listen
from relocator.aggregator import Aggregator
from relocator.batch import Batch
from relocator.errors import CoordinationUnavailable, ExtraMissing, ListenFailed
from relocator.intake.spool import Spool
from relocator.intake.tcp import TcpIntake
from relocator.intake.udp import UdpIntake
from relocator.journal import Journal, JournalWriter, segment_of, table_prologue
from relocator.metadata import MetadataWriter
from relocator.metrics import Metrics
from relocator.producers import ProducerTable, decode_meta
from relocator.pusher import ClusterPusher
from relocator.sealer import Sealer
from relocator.settings import RelocatorSettings
from relocator.spool_feed import SpoolFeed
from relocator.state import State
from relocator.wire import Received

if TYPE_CHECKING:
    from relocator.zk import ZkCoordinator

log = logging.getLogger(__name__)

_Intake = TypeVar("_Intake", UdpIntake, TcpIntake)


def make_coordinator(settings: RelocatorSettings) -> ZkCoordinator | None:
    """The ZooKeeper coordinator when ``[zookeeper]`` is configured, else None; kazoo (the
    optional ``zookeeper`` extra) is imported only then.

    Raises:
        ExtraMissing: ZooKeeper is configured but kazoo is not installed.
    """
    if settings.zookeeper is None:
        return None
    try:
        from relocator.zk import ZkCoordinator  # noqa: PLC0415 (optional dependency)
    except ImportError as e:
        raise ExtraMissing(
            f"ZooKeeper is configured (hosts {settings.zookeeper.hosts}) but kazoo is not "
            "installed: pip install 'riak-events[zookeeper]'"
        ) from e
    return ZkCoordinator(
        settings.zookeeper, writer_id=settings.writer_id, units=settings.spool_units
    )


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
        """Lock the data directory and open the journal and the state store.

        Raises:
            eventstore.dirlock.DirectoryLocked: another process uses ``data_dir``.
            ExtraMissing: ZooKeeper configured without kazoo installed.
        """
        self.settings = s = settings
        self.metrics = metrics or Metrics()
        self._clock = clock
        # First: a second process must not even open the journal or the state store.
        self._dirlock = lock_directory(s.data_dir)
        try:
            self._open(s, clock)
        except BaseException:
            self._dirlock.release()
            raise

    def _open(self, s: RelocatorSettings, clock: Callable[[], float]) -> None:
        self.zk = make_coordinator(s)
        self.state = State(s.data_dir / "state", map_size_bytes=s.state_map_size_bytes)
        # Producers with ids: intake's table decides what is new (ranges queued for the
        # journal); the journal writer's holds only durable ranges and is what each new
        # segment starts with. Both are rebuilt from the journal by recover().
        forgotten = self.metrics.producers_forgotten
        self.producers = ProducerTable(
            idle_s=s.producer_idle_s,
            max_producers=s.max_producers,
            on_forget=lambda reason: forgotten.labels(reason).inc(),
        )
        self._durable_producers = ProducerTable(
            idle_s=s.producer_idle_s, max_producers=s.max_producers
        )
        self.journal = Journal(
            s.data_dir / "journal",
            segment_max_bytes=s.segment_max_bytes,
            fsync=s.fsync,
            metrics=self.metrics,
            prologue=table_prologue(self._durable_producers),
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
            producers=self._durable_producers,
        )
        self.sealer = Sealer(
            writer_id=s.writer_id,
            reserve_seq=self.state.reserve_seq,
            chunk_max_bytes=s.chunk_max_bytes,
            compress=s.compression,
            metrics=self.metrics,
            max_event_bytes=s.max_event_bytes,
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
                may_push=self._may_push if self.zk else None,
            )
            for c in s.clusters
        ]
        # Sealing jobs (a group's kind, a spool file): C code that releases the GIL in
        # part (zstd), so two threads use both cores.
        self._seal_pool = ThreadPoolExecutor(2, thread_name_prefix="seal")
        self.spool = (
            SpoolFeed(
                Spool(Path(s.spool_dir), units=s.spool_units, max_bytes=s.max_spool_bytes),
                sealer=self.sealer,
                reserve_seq=self.state.reserve_seq,
                pool=self._seal_pool,
                metrics=self.metrics,
                writer_id=s.writer_id,
                zk=self.zk,
            )
            if s.spool_dir
            else None
        )
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

    def _may_push(self, batch_id: str) -> bool:
        """Whether a pusher may start pushing this batch now (ZooKeeper configured).

        Chunk keys carry the writer id, which is ours only while ``writers/<id>`` is a
        znode of our live session: nothing is pushed while suspended, lost or not
        registered. A spool file's batch is pushed by its unit's owner only, so two
        relocators never push one file at once (``SpoolFeed.may_push``).
        """
        zk = self.zk
        if zk is None:
            return True
        if not zk.active():
            return False
        ix = self._index.get(batch_id)
        if ix is None or not ix.spool or self.spool is None:
            return True
        return self.spool.may_push(ix.spool)

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
        for pos, payload in self.journal.replay(self._recover_producers):
            if pos in covered:
                continue
            positions.append(pos)
            frames.append(payload)
            seg = segment_of(pos)
            self._outstanding[seg] = self._outstanding.get(seg, 0) + 1
            replayed += 1
        self.aggregator.add_raw(positions, frames)
        # A stored batch names journal positions: no new frame may ever get one of them
        # (``covered`` above would skip it), so numbering goes on above every segment a
        # stored batch names, even when those segment files are gone.
        named = [max(ix.segments) for ix in self._index.values() if ix.segments]
        if named:
            self.journal.number_after(max(named))
        self.metrics.producers.set(len(self.producers))
        log.info(
            "recover: %d stored batches, %d journal records to aggregate again, "
            "%d producers' high marks",
            len(self._index),
            replayed,
            len(self.producers),
        )

    def _recover_producers(self, frame: bytes) -> None:
        """A producer frame of the journal (range trailer, table record): raise the high
        marks it names in both tables (they count as seen now)."""
        try:
            pairs = decode_meta(frame)
        except ValueError as e:  # a later version's frame: its producers are not known
            log.error("recover: journal producer frame skipped: %s", e)
            return
        for producer, high in pairs:
            self.producers.note(producer, high)
            self._durable_producers.note(producer, high)

    def start(self) -> None:
        """Recover, then start ZooKeeper, pushers, the journal writer and intake.

        Raises:
            ListenFailed: a UDP or TCP listen address cannot be opened (everything
                started is stopped again first).
        """
        try:
            self.recover()
            if self.zk:
                self.zk.start()
        except BaseException:
            self._close()
            raise
        for pusher in self.pushers:
            backlog = [b for b, ix in self._index.items() if pusher.name not in ix.clusters]
            pusher.start(backlog)
        self.writer.start()
        try:
            self._start_intake()
        except ListenFailed:
            self.shutdown(drain_s=0.0)  # nothing was received: stop what was started
            raise

    def _start_intake(self) -> None:
        """Open the UDP and TCP listeners; a port in use is :class:`ListenFailed`."""
        s = self.settings
        if s.udp_listen:
            self.udp = self._listen("udp_listen", s.udp_listen, UdpIntake)
        if s.tcp_listen:
            tcp = functools.partial(TcpIntake, producers=self.producers)
            self.tcp = self._listen("tcp_listen", s.tcp_listen, tcp)

    def _listen(self, setting: str, address: str, intake: Callable[..., _Intake]) -> _Intake:
        """Bind one listener to ``address`` (the value of ``setting``) and start it."""
        host, port = parse_listen(address, source=setting)
        try:
            listener = intake(
                host,
                port,
                writer=self.writer,
                metrics=self.metrics,
                max_event_bytes=self.settings.max_event_bytes,
            )
        except OSError as e:
            raise ListenFailed(setting, address, e) from e
        listener.start()
        return listener

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
            # after _store: the events are counted as batches before they stop being
            # counted as open (status never shows them nowhere)
            self.aggregator.sealed(due)
        if self.zk is not None:
            self._coordinate(self.zk)
        if self.spool is not None:
            self._store((b, {}) for b in self.spool.seal_waiting(self._taken()))
        self._collect()
        self.metrics.producers.set(len(self.producers))

    def _coordinate(self, zk: ZkCoordinator) -> None:
        """Register again if the session was lost, rebalance units, delete progress
        entries left over; a ZooKeeper error only waits for the next tick."""
        try:
            owned = zk.rebalance()
            if self.spool is not None:
                self.spool.forget_progress()
        except CoordinationUnavailable as e:
            self._zk_error("rebalance", e)
            owned = zk.owned()
        self.metrics.owned_units.set(len(owned))
        self.metrics.zookeeper_connected.set(1 if zk.active() else 0)

    def _zk_error(self, op: str, error: CoordinationUnavailable) -> None:
        self.metrics.zookeeper_errors.labels(op).inc()
        log.warning("zk: %s failed, retried next tick: %s", op, error)

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
        self._close()
        self.stopped.set()

    def _close(self) -> None:
        if self.zk:
            self.zk.stop()
        self.journal.close()
        self.state.close()
        self._dirlock.release()

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

    def _taken(self) -> set[str]:
        """Spool files inside a stored batch (not sealed again)."""
        return {ix.spool for ix in self._index.values() if ix.spool}

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
                self.spool.finished(ix.spool)
                ix.spool = ""
            if not ix.segments & existing:
                self.state.remove(batch_id, everyone)
                del self._index[batch_id]

    def readiness(self) -> tuple[bool, dict[str, object]]:
        """What ``/readyz`` answers: ready when at least one configured cluster answers
        ``/ping``, the journal writer has not failed, and (with ZooKeeper) the writer id
        is registered in a connected session. Liveness is ``/healthz``.

        Returns:
            (ready, details): details name every cluster's answer and each reason.
        """
        clusters = {p.name: p.reachable() for p in self.pushers}
        reasons: list[str] = []
        if not any(clusters.values()):
            reasons.append("no configured Riak cluster answers /ping")
        if self.writer.failed is not None:
            reasons.append(f"journal failed: {self.writer.failed}")
        zk = self.zk.describe() if self.zk else None
        if self.zk is not None and not self.zk.active():
            why = self.zk.blocked or f"ZooKeeper {self.zk.state.lower()}"
            reasons.append(f"not registered in ZooKeeper: {why}")
        return not reasons, {
            "ready": not reasons,
            "reasons": reasons,
            "clusters": {k: "ok" if v else "unreachable" for k, v in clusters.items()},
            "zookeeper": zk,
        }

    def status(self) -> dict[str, object]:
        """What ``/status`` shows: backlogs, events pushed per cluster since start, open
        events, owned units."""
        # Read open events before batches: events stop being open only after their
        # batch is indexed, and a batch leaves the index only once every cluster holds
        # it, so "0 open, 0 batches" read in this order means every event is pushed.
        open_events = self.aggregator.open_positions()
        return {
            "writer_id": self.settings.writer_id,
            "batches": len(self._index),
            "open_events": open_events,
            "backlog": {p.name: p.backlog() for p in self.pushers},
            "events_pushed": {p.name: p.events_pushed for p in self.pushers},
            "owned_units": sorted(self.zk.owned()) if self.zk else None,
            "zk_id": self.zk.id if self.zk else None,
            "zookeeper": self.zk.describe() if self.zk else None,
            "udp_port": self.udp.port if self.udp else None,
            "tcp_port": self.tcp.port if self.tcp else None,
        }
