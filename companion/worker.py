"""The engine of one companion worker process: admit chunk keys, process or shed them.

Objectives, in order: (1) never slow the storage's write path (the hook's POST is
answered at once; nothing waits on a plugin); (2) bounded memory and work whatever
arrives (load shedding, not back-pressure); (3) every admitted chunk ends with a stored
result per matching substream, ``ok`` or marked (error, timeout, killed, shed), so
consumers never wait for a result that will not come; (4) decode each chunk once.

Algorithm::

    submit(epoch, dc, keys):                    # from POST /v1/keys, never blocks
        for key in keys:                        # the inbox is the node's, shared by workers
            inbox.put(Item(key, deadline=now + max_wait_s))  or  shed(key, "queue full")
    each of `threads` threads of every worker:
        item = inbox.get()                      # whichever thread is free takes it
        if now > item.deadline: shed(item.key, "waited too long"); continue
        subs = enabled substreams matching (type, subtype)     # none: nothing to do
        blob = GET events/<key> from the local node; events = unpack_blob(blob)  # once
        outcomes = sandbox.run_substreams(subs, events)        # forked child(ren), isolation
        PUT substreams/<name>/<key> = ok value or marked failure, all at once (writers)
        count consecutive failures node-wide; disable at disable_after
    shed(key, reason): a separate thread PUTs status "shed" for every matching
        substream (bounded queue; when even that is full, nothing is written and the
        consumer falls back when it finds no result).

Failure scenarios:
1. A plugin misbehaves: contained by the sandbox; its result is marked; the others of
   the same chunk are stored normally.
2. Arrivals above capacity: the node's inbox fills; arrivals are shed at once and marked.
3. A chunk waits longer than ``max_wait_s`` (slow plugins ahead of it): shed, marked.
4. The chunk cannot be read (404, checksum mismatch, not Sereal): every matching
   substream's result is marked ``error`` naming the cause.
5. Riak refuses a result write: counted ``results_not_stored``, logged; the consumer
   falls back on a missing result. Nothing is retried beyond the client's own retries.
6. The worker process stops: the chunks its threads were processing are lost (the
   queued ones stay in the node's inbox for the other workers); the auditor, or the
   consumer's fallback, covers them.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait

from companion import defaults
from companion.disabled import DisabledSet
from companion.errors import ChunkUnreadable
from companion.inbox import Inbox, InboxItem
from companion.settings import CompanionSettings
from companion.signals import EngineSignals
from eventstore.blob import unpack_blob
from eventstore.errors import EventStoreError
from eventstore.names import ChunkKey
from eventstore.riak import NotFound, RiakClient, RiakError
from substreams.api import Context, Event, Substream
from substreams.loader import PluginSet
from substreams.results import Status, error_value
from substreams.sandbox import Outcome, run_substreams, stored_value

log = logging.getLogger(__name__)

__all__ = ["Engine", "WorkItem"]

#: One chunk waiting to be processed.
WorkItem = InboxItem
#: One result to store: the substream, the value, its status.
Write = tuple[Substream, bytes, Status]

_STOP = None


class _Laps:
    """Wall-clock and CPU seconds (of the calling thread) of each stage of one chunk."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.started = self._last = clock()
        self._last_cpu = time.thread_time()
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def lap(self, stage: str, *, extra_cpu_s: float = 0.0) -> None:
        now, cpu = self._clock(), time.thread_time()
        self.wall[stage] = now - self._last
        self.cpu[stage] = cpu - self._last_cpu + extra_cpu_s
        self._last, self._last_cpu = now, cpu


#: How often an idle chunk thread looks at whether the engine is stopping, seconds.
_IDLE_POLL_S = 0.2


class Engine:
    """Admits chunk keys into a bounded queue and processes them on worker threads.

    Args:
        settings: the companion's settings.
        riak: a client of the local node.
        plugins: the plugin set (refreshed by :meth:`reload` and its thread).
        signals: lifecycle signals for metrics and statistics.
        disabled: the node's disabled substreams and failure counts.
        inbox: the node's queue, shared by the workers (made in the gunicorn master);
            default: one of this engine's own, holding ``queue_max`` chunks.
        clock: monotonic clock (injected for tests; the inbox's deadlines use it, so
            every process sharing an inbox must use the system's monotonic clock).
    """

    def __init__(
        self,
        settings: CompanionSettings,
        riak: RiakClient,
        plugins: PluginSet,
        *,
        signals: EngineSignals | None = None,
        disabled: DisabledSet | None = None,
        inbox: Inbox | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.riak = riak
        self.plugins = plugins
        self.signals = signals or EngineSignals()
        self.disabled = disabled or DisabledSet(settings.state_dir / "disabled")
        self._clock = clock
        self._owns_inbox = inbox is None
        self._inbox = inbox or Inbox(settings.queue_max)
        self._shed_queue: queue.Queue[tuple[ChunkKey, str] | None] = queue.Queue(
            settings.queue_max * 16
        )
        # Result writes of a chunk go out at once: the store commits concurrent writes
        # together (the devnode in one fsync; Riak's vnodes in parallel).
        self._writers = ThreadPoolExecutor(
            max(1, settings.threads) * defaults.RESULT_WRITERS, thread_name_prefix="companion-put"
        )
        self._plugins_lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> Engine:
        """Load plugins and start the processing, shedding and reload threads."""
        self.reload()
        targets = [(f"companion-chunk-{i}", self._work) for i in range(self.settings.threads)]
        targets += [("companion-shed", self._shed_work), ("companion-reload", self._reload_loop)]
        for name, target in targets:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the threads. Chunks still queued in an inbox of this engine's own are
        dropped (logged); a shared inbox keeps them for the other workers."""
        self._stopping.set()
        if self._owns_inbox:
            dropped = self._inbox.drain()
            if dropped:
                log.warning("companion stopping: %d queued chunks not processed", dropped)
        with contextlib.suppress(queue.Full):  # daemon threads; joined with a timeout
            self._shed_queue.put_nowait(_STOP)
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._writers.shutdown(wait=False, cancel_futures=True)
        if self._owns_inbox:
            self._inbox.close()

    def alive(self) -> bool:
        """Whether every thread of the engine is running."""
        return bool(self._threads) and all(t.is_alive() for t in self._threads)

    def reload(self) -> bool:
        """Rescan the plugin directories now; returns whether anything changed."""
        with self._plugins_lock:
            return self.plugins.refresh()

    def _reload_loop(self) -> None:
        while not self._stopping.wait(self.settings.reload_interval_s):
            try:
                self.reload()
            except Exception:
                log.exception("companion: plugin reload failed")

    # -- admission ---------------------------------------------------------------------

    def queue_depth(self) -> int:
        """Chunks waiting now (in the node's inbox, when shared)."""
        return self._inbox.depth()

    def submit(self, epoch: int, dc: str, keys: Sequence[ChunkKey]) -> tuple[int, int]:
        """Admit the keys of one key group; never blocks.

        Returns:
            (accepted, shed) counts.
        """
        now = self._clock()
        accepted = shed = 0
        for key in keys:
            reason = "queue full"
            try:
                admitted = self._inbox.put(WorkItem(key, now, now + self.settings.max_wait_s))
            except ValueError as e:  # a key longer than a record: never a valid chunk key
                admitted, reason = False, str(e)
            if admitted:
                accepted += 1
            else:
                shed += 1
                self.shed(key, reason)
        self.signals.key_group.send(epoch=epoch, dc=dc, accepted=accepted, shed=shed)
        if shed:
            log.warning(
                "companion: epoch=%d dc=%s: %d of %d keys shed (inbox full)",
                epoch,
                dc,
                shed,
                len(keys),
            )
        return accepted, shed

    def audit(self, epoch: int, dc: str, keys: Sequence[ChunkKey]) -> tuple[int, int, int]:
        """Admit the keys that lack a result of some matching enabled substream.

        Blocking (one GET per substream and key): call it off the event loop.

        Returns:
            (keys missing a result, accepted, shed).
        """
        missing = []
        for key in keys:
            for sub in self.matching(key):
                location = self.settings.namespaces.substream_location(sub.name, key)
                try:
                    self.riak.get(*location)
                except NotFound:
                    missing.append(key)
                    break
                except RiakError as e:
                    log.warning("companion: audit key=%s substream=%s: %s", key, sub.name, e)
                    break
        if not missing:
            return 0, 0, 0
        log.info("companion: audit epoch=%d dc=%s: %d keys lack results", epoch, dc, len(missing))
        accepted, shed = self.submit(epoch, dc, missing)
        return len(missing), accepted, shed

    def shed(self, key: ChunkKey, reason: str) -> None:
        """Mark ``key``'s results ``shed`` (asynchronously, bounded)."""
        try:
            self._shed_queue.put_nowait((key, reason))
        except queue.Full:
            self.signals.chunk_shed.send(key=key, substreams=(), reason=f"{reason}; not marked")

    # -- processing --------------------------------------------------------------------

    def matching(self, key: ChunkKey) -> list[Substream]:
        """The enabled substreams that read ``key``'s type and subtype."""
        return [
            s
            for s in self.plugins.substreams.values()
            if s.matches(key.type, key.subtype) and not self.disabled.is_disabled(s.name, s.version)
        ]

    def _work(self) -> None:
        while not self._stopping.is_set():
            item = self._inbox.get(_IDLE_POLL_S)
            if item is None:
                continue
            try:
                if self._clock() > item.deadline:
                    self.shed(item.key, f"waited over {self.settings.max_wait_s}s")
                    continue
                self.process(item.key, arrived=item.arrived)
            except Exception:
                log.exception("companion: key=%s: processing failed", item.key)

    def process(
        self, key: ChunkKey, *, arrived: float | None = None
    ) -> list[tuple[Substream, Outcome]]:
        """Fetch, decode once, run every matching substream sandboxed, store results.

        Args:
            key: the chunk.
            arrived: when its key group arrived (clock time), for the wait stage.

        Returns:
            Each substream run with its outcome (empty when none matched or the chunk
            was unreadable).
        """
        laps = _Laps(self._clock)
        candidates = [
            s for s in self.plugins.substreams.values() if s.matches(key.type, key.subtype)
        ]
        subs = []
        skipped: list[Write] = []
        for sub in candidates:
            if self.disabled.is_disabled(sub.name, sub.version):
                # A marked result, so consumers fall back at once instead of waiting.
                value = error_value("error", sub.name, sub.version, "disabled: on this node")
                skipped.append((sub, value, "error"))
            else:
                subs.append(sub)
        if not subs:
            self._store_all(key, skipped)
            return []
        try:
            blob = self._fetch_chunk(key)
            laps.lap("fetch")
            events = self._decode_chunk(key, blob)
        except ChunkUnreadable as e:
            self.signals.chunk_unreadable.send(key=key, error=str(e))
            log.warning(
                "companion: key=%s epoch=%d dc=%s unreadable: %s", key, key.epoch, key.dc, e
            )
            failed: list[Write] = [
                (s, error_value("error", s.name, s.version, str(e)), "error") for s in subs
            ]
            self._store_all(key, skipped + failed)
            return []
        laps.lap("decode")
        outcomes = run_substreams(
            subs,
            events,
            Context.of(key),
            cap=self.settings.cap,
            max_parallel=self.settings.max_parallel,
            isolation=self.settings.isolation,
        )
        laps.lap("sandbox")
        done = list(zip(subs, outcomes, strict=True))
        writes: list[Write] = [(sub, stored_value(sub, o), o.status) for sub, o in done]
        pending = self._start_writes(key, skipped + writes)
        del events, blob  # freed while the results are on their way
        laps.lap("free")
        for sub, outcome in done:
            self.signals.run_finished.send(
                substream=sub.name,
                version=sub.version,
                key=key,
                kind=outcome.kind,
                status=outcome.status,
                wall_s=outcome.wall_s,
                cpu_s=outcome.cpu_s,
                error=outcome.error,
            )
            if not outcome.ok:
                log.warning(
                    "companion: epoch=%d dc=%s key=%s substream=%s: %s",
                    key.epoch,
                    key.dc,
                    key,
                    sub.name,
                    outcome.error,
                )
        writers_cpu_s = self._finish_writes(pending)
        for sub, outcome in done:
            self._track(sub, outcome)
        laps.lap("store", extra_cpu_s=writers_cpu_s)
        laps.wall["wait"] = laps.started - arrived if arrived is not None else 0.0
        laps.cpu["plugins"] = sum(o.cpu_s for o in outcomes)
        self.signals.chunk_processed.send(
            key=key, runs=len(done), stages=laps.wall, stages_cpu=laps.cpu
        )
        return done

    def _fetch_chunk(self, key: ChunkKey) -> bytes:
        ns = self.settings.namespaces
        try:
            return self.riak.get(*ns.chunk_location(key)).value
        except NotFound as e:
            raise ChunkUnreadable(f"chunk_unreadable: {key} not found") from e
        except RiakError as e:
            raise ChunkUnreadable(f"chunk_unreadable: {key} could not be read: {e}") from e

    def _decode_chunk(self, key: ChunkKey, blob: bytes) -> list[Event]:
        try:
            events = unpack_blob(blob, key=key.format())
        except EventStoreError as e:
            raise ChunkUnreadable(f"chunk_unreadable: {e}") from e
        if not isinstance(events, list):
            raise ChunkUnreadable(
                f"chunk_unreadable: {key} holds a {type(events).__name__}, not an array of events"
            )
        # Elements are whatever the producers sent; plugins treat them defensively
        # (substreams.helpers), so they are passed on as they are.
        return events

    def _store_all(self, key: ChunkKey, writes: Sequence[Write]) -> float:
        """Store a chunk's results concurrently; returns when every write has ended,
        with the CPU seconds the writer threads spent."""
        return self._finish_writes(self._start_writes(key, writes))

    def _start_writes(self, key: ChunkKey, writes: Sequence[Write]) -> list[Future[float]]:
        return [self._writers.submit(self._store, key, *w) for w in writes]

    @staticmethod
    def _finish_writes(pending: list[Future[float]]) -> float:
        wait(pending)
        return sum(f.result() for f in pending)

    def _store(self, key: ChunkKey, sub: Substream, value: bytes, status: Status) -> float:
        """Store one result (failures are logged and signalled); returns its CPU seconds."""
        cpu = time.thread_time()
        location = self.settings.namespaces.substream_location(sub.name, key)
        try:
            self.riak.put(*location, value)
        except RiakError as e:
            self.signals.result_not_stored.send(substream=sub.name, key=key, error=str(e))
            log.error(
                "companion: epoch=%d key=%s substream=%s: result not stored: %s",
                key.epoch,
                key,
                sub.name,
                e,
            )
            return time.thread_time() - cpu
        self.signals.result_stored.send(substream=sub.name, key=key, status=status)
        return time.thread_time() - cpu

    def _track(self, sub: Substream, outcome: Outcome) -> None:
        """Count consecutive failures node-wide (every worker shares the count)."""
        if outcome.ok:
            self.disabled.clear_failures(sub.name)
            return
        n = self.disabled.count_failure(sub.name, sub.version)
        if n < self.settings.disable_after:
            return
        reason = f"{n} failures in a row on this node, last: {outcome.error}"
        if not self.disabled.disable(sub.name, sub.version, reason):
            return  # another worker disabled it first
        self.signals.substream_disabled.send(substream=sub.name, version=sub.version, reason=reason)
        log.error("companion: substream=%s version=%s disabled: %s", sub.name, sub.version, reason)

    def _shed_work(self) -> None:
        while True:
            item = self._shed_queue.get()
            if item is _STOP:
                return
            key, reason = item
            subs = self.matching(key)
            writes = [
                (s, error_value("shed", s.name, s.version, f"shed: {reason}"), "shed") for s in subs
            ]
            self._store_all(key, writes)  # type: ignore[arg-type]
            self.signals.chunk_shed.send(key=key, substreams=[s.name for s in subs], reason=reason)
