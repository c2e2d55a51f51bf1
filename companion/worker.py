"""The engine of one companion worker process: admit chunk keys, process or shed them.

Objectives, in order: (1) never slow the storage's write path (the hook's POST is
answered at once; nothing waits on a plugin); (2) bounded memory and work whatever
arrives (load shedding, not back-pressure); (3) every admitted chunk ends with a stored
result per matching substream, ``ok`` or marked (error, timeout, killed, shed), so
consumers never wait for a result that will not come; (4) decode each chunk once.

Algorithm::

    submit(epoch, dc, keys):                    # from POST /v1/keys, never blocks
        for key in keys:
            queue.put_nowait(Item(key, deadline=now + max_wait_s))  or  shed(key, "queue full")
    each of `threads` threads:
        item = queue.get()
        if now > item.deadline: shed(item.key, "waited too long"); continue
        subs = enabled substreams matching (type, subtype)     # none: nothing to do
        blob = GET events/<key> from the local node; events = unpack_blob(blob)  # once
        outcomes = sandbox.run_substreams(subs, events)        # forked child(ren), isolation
        for each: PUT substreams/<name>/<key> = ok value or marked failure
                  count consecutive failures; disable at disable_after
    shed(key, reason): a separate thread PUTs status "shed" for every matching
        substream (bounded queue; when even that is full, nothing is written and the
        consumer falls back when it finds no result).

Failure scenarios:
1. A plugin misbehaves: contained by the sandbox; its result is marked; the others of
   the same chunk are stored normally.
2. Arrivals above capacity: the queue fills; arrivals are shed at once and marked.
3. A chunk waits longer than ``max_wait_s`` (slow plugins ahead of it): shed, marked.
4. The chunk cannot be read (404, checksum mismatch, not Sereal): every matching
   substream's result is marked ``error`` naming the cause.
5. Riak refuses a result write: counted ``results_not_stored``, logged; the consumer
   falls back on a missing result. Nothing is retried beyond the client's own retries.
6. The worker process stops: queued chunks are lost (at most ``queue_max``); the
   auditor, or the consumer's fallback, covers them.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from companion.disabled import DisabledSet
from companion.errors import ChunkUnreadable
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


@dataclass(frozen=True)
class WorkItem:
    """One chunk waiting to be processed."""

    key: ChunkKey
    arrived: float
    deadline: float


_STOP = None


class Engine:
    """Admits chunk keys into a bounded queue and processes them on worker threads.

    Args:
        settings: the companion's settings.
        riak: a client of the local node.
        plugins: the plugin set (refreshed by :meth:`reload` and its thread).
        signals: lifecycle signals for metrics and statistics.
        disabled: the node's disabled substreams.
        clock: monotonic clock (injected for tests).
    """

    def __init__(
        self,
        settings: CompanionSettings,
        riak: RiakClient,
        plugins: PluginSet,
        *,
        signals: EngineSignals | None = None,
        disabled: DisabledSet | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.riak = riak
        self.plugins = plugins
        self.signals = signals or EngineSignals()
        self.disabled = disabled or DisabledSet(settings.state_dir / "disabled")
        self._clock = clock
        self._queue: queue.Queue[WorkItem | None] = queue.Queue(settings.queue_max)
        self._shed_queue: queue.Queue[tuple[ChunkKey, str] | None] = queue.Queue(
            settings.queue_max * 16
        )
        self._plugins_lock = threading.Lock()
        self._failures_in_a_row: dict[str, int] = {}
        self._failures_lock = threading.Lock()
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
        """Stop the threads; chunks still queued are dropped (logged)."""
        self._stopping.set()
        dropped = 0
        while True:
            try:
                if self._queue.get_nowait() is not None:
                    dropped += 1
            except queue.Empty:
                break
        if dropped:
            log.warning("companion stopping: %d queued chunks not processed", dropped)
        for q in [self._queue] * self.settings.threads + [self._shed_queue]:
            with contextlib.suppress(queue.Full):  # daemon threads; joined with a timeout
                q.put_nowait(_STOP)
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

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
        """Chunks waiting now."""
        return self._queue.qsize()

    def submit(self, epoch: int, dc: str, keys: Sequence[ChunkKey]) -> tuple[int, int]:
        """Admit the keys of one key group; never blocks.

        Returns:
            (accepted, shed) counts.
        """
        now = self._clock()
        accepted = shed = 0
        for key in keys:
            item = WorkItem(key, now, now + self.settings.max_wait_s)
            try:
                self._queue.put_nowait(item)
                accepted += 1
            except queue.Full:
                shed += 1
                self.shed(key, "queue full")
        self.signals.key_group.send(epoch=epoch, dc=dc, accepted=accepted, shed=shed)
        if shed:
            log.warning(
                "companion: epoch=%d dc=%s: %d of %d keys shed (queue full)",
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
        while True:
            item = self._queue.get()
            if item is _STOP or self._stopping.is_set():
                return
            try:
                if self._clock() > item.deadline:
                    self.shed(item.key, f"waited over {self.settings.max_wait_s}s")
                    continue
                self.process(item.key)
            except Exception:
                log.exception("companion: key=%s: processing failed", item.key)

    def process(self, key: ChunkKey) -> list[tuple[Substream, Outcome]]:
        """Fetch, decode once, run every matching substream sandboxed, store results.

        Returns:
            Each substream run with its outcome (empty when none matched or the chunk
            was unreadable).
        """
        candidates = [
            s for s in self.plugins.substreams.values() if s.matches(key.type, key.subtype)
        ]
        subs = []
        for sub in candidates:
            if self.disabled.is_disabled(sub.name, sub.version):
                # A marked result, so consumers fall back at once instead of waiting.
                value = error_value("error", sub.name, sub.version, "disabled: on this node")
                self._store(sub, key, value, "error")
            else:
                subs.append(sub)
        if not subs:
            return []
        try:
            events = self._read_chunk(key)
        except ChunkUnreadable as e:
            self.signals.chunk_unreadable.send(key=key, error=str(e))
            log.warning(
                "companion: key=%s epoch=%d dc=%s unreadable: %s", key, key.epoch, key.dc, e
            )
            for sub in subs:
                self._store(sub, key, error_value("error", sub.name, sub.version, str(e)), "error")
            return []
        outcomes = run_substreams(
            subs,
            events,
            Context.of(key),
            cap=self.settings.cap,
            max_parallel=self.settings.max_parallel,
            isolation=self.settings.isolation,
        )
        done = []
        for sub, outcome in zip(subs, outcomes, strict=True):
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
            self._store(sub, key, stored_value(sub, outcome), outcome.status)
            self._track(sub, outcome)
            done.append((sub, outcome))
        self.signals.chunk_processed.send(key=key, runs=len(done))
        return done

    def _read_chunk(self, key: ChunkKey) -> list[Event]:
        ns = self.settings.namespaces
        try:
            obj = self.riak.get(*ns.chunk_location(key))
        except NotFound as e:
            raise ChunkUnreadable(f"chunk_unreadable: {key} not found") from e
        except RiakError as e:
            raise ChunkUnreadable(f"chunk_unreadable: {key} could not be read: {e}") from e
        try:
            events = unpack_blob(obj.value, key=key.format())
        except EventStoreError as e:
            raise ChunkUnreadable(f"chunk_unreadable: {e}") from e
        if not isinstance(events, list):
            raise ChunkUnreadable(
                f"chunk_unreadable: {key} holds a {type(events).__name__}, not an array of events"
            )
        # Elements are whatever the producers sent; plugins treat them defensively
        # (substreams.helpers), so they are passed on as they are.
        return events

    def _store(self, sub: Substream, key: ChunkKey, value: bytes, status: Status) -> None:
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
            return
        self.signals.result_stored.send(substream=sub.name, key=key, status=status)

    def _track(self, sub: Substream, outcome: Outcome) -> None:
        with self._failures_lock:
            if outcome.ok:
                self._failures_in_a_row.pop(sub.name, None)
                return
            n = self._failures_in_a_row.get(sub.name, 0) + 1
            self._failures_in_a_row[sub.name] = n
        if n >= self.settings.disable_after:
            reason = f"{n} failures in a row, last: {outcome.error}"
            self.disabled.disable(sub.name, sub.version, reason)
            with self._failures_lock:
                self._failures_in_a_row.pop(sub.name, None)
            self.signals.substream_disabled.send(
                substream=sub.name, version=sub.version, reason=reason
            )
            log.error(
                "companion: substream=%s version=%s disabled: %s", sub.name, sub.version, reason
            )

    def _shed_work(self) -> None:
        while True:
            item = self._shed_queue.get()
            if item is _STOP:
                return
            key, reason = item
            subs = self.matching(key)
            for sub in subs:
                value = error_value("shed", sub.name, sub.version, f"shed: {reason}")
                self._store(sub, key, value, "shed")
            self.signals.chunk_shed.send(key=key, substreams=[s.name for s in subs], reason=reason)
