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
        note dc for the auditor
    each of `threads` threads of every worker (the loop never ends but by stop()):
        item = inbox.get()                      # whichever thread is free takes it
        if now > item.deadline: shed(item.key, "waited too long"); continue
        subs = substreams matching (type, subtype)   # an audit item: only those lacking
                                                     # a stored result
        disabled ones: result "error: disabled: on this node"
        blob = GET events/<key> from the local node; events = unpack_blob(blob)  # once
        outcomes = sandbox.run_substreams(subs, events)        # forked child(ren), isolation
            no pipe or fork (SandboxUnavailable): the runs not ended get "error: sandbox: ..."
        PUT substreams/<name>/<key> = ok value or marked failure, all at once (writer.py)
        count consecutive failures node-wide; disable at disable_after
        anything else raised on the way: every result not yet written gets
            "error: internal: <exception>"
    shed(key, reason): a separate thread PUTs status "shed" for every matching enabled
        substream and "error: disabled" for the disabled ones (bounded queue, one key
        group fits; when even that is full, nothing is written and the auditor fills
        the results later).

Failure scenarios:
1. A plugin misbehaves: contained by the sandbox; its result is marked; the others of
   the same chunk are stored normally.
2. Arrivals above capacity: the node's inbox fills; arrivals are shed at once and marked.
3. A chunk waits longer than ``max_wait_s`` (slow plugins ahead of it): shed, marked.
4. The chunk cannot be read (404, checksum mismatch, not Sereal): every matching
   substream's result is marked ``error`` naming the cause.
5. The sandbox cannot start a child (out of processes, descriptors or memory), or a
   bug raises: ``error`` results naming the cause; not counted against the plugins.
6. Riak refuses a result write: retried with backoff (``writer.py``), then counted
   ``results_not_stored`` and logged; the auditor fills the result later.
7. The worker process stops: the chunks its threads were processing are lost (the
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

from companion import defaults
from companion.auditor import SeenDcs
from companion.disabled import DisabledSet
from companion.errors import InputChunkUnreadable
from companion.inbox import Inbox, InboxItem
from companion.settings import CompanionSettings
from companion.signals import EngineSignals
from companion.writer import ResultWriter, Write
from eventstore.blob import unpack_blob
from eventstore.errors import BlobTooLarge, EventStoreError
from eventstore.names import ChunkKey
from eventstore.riak import NotFound, RiakClient, RiakError
from substreams.api import Context, Event, Substream
from substreams.loader import PluginSet
from substreams.results import error_value
from substreams.sandbox import Outcome, SandboxUnavailable, run_substreams, stored_value

log = logging.getLogger(__name__)

__all__ = ["Engine", "WorkItem"]

#: One chunk waiting to be processed.
WorkItem = InboxItem

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
        seen_dcs: where the dcs of received key groups are noted for the auditor.
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
        seen_dcs: SeenDcs | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.riak = riak
        self.plugins = plugins
        self.signals = signals or EngineSignals()
        self.disabled = disabled or DisabledSet(settings.state_dir / "disabled")
        self.seen_dcs = seen_dcs or SeenDcs(settings.state_dir / "dcs")
        self._clock = clock
        self._owns_inbox = inbox is None
        self._inbox = inbox or Inbox(settings.queue_max)
        # Shed keys are small; one full key group fits whatever the queue size.
        self._shed_queue: queue.Queue[tuple[ChunkKey, str, bool] | None] = queue.Queue(
            max(settings.queue_max * 16, defaults.MAX_KEYS)
        )
        self._writer = ResultWriter(settings, riak, self.signals)
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
        self._writer.shutdown()
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

    def submit(
        self, epoch: int, dc: str, keys: Sequence[ChunkKey], *, audit: bool = False
    ) -> tuple[int, int]:
        """Admit the keys of one key group; never blocks.

        Args:
            epoch, dc: the key group's (every key is of them: checked by the caller).
            keys: the chunk keys.
            audit: sent by the auditor: only the missing results of each chunk are
                written (a stored result is never overwritten).

        Returns:
            (accepted, shed) counts.
        """
        now = self._clock()
        accepted = shed = 0
        for key in keys:
            reason = "queue full"
            try:
                item = WorkItem(key, now, now + self.settings.max_wait_s, audit)
                admitted = self._inbox.put(item)
            except ValueError as e:  # a key longer than a record: never a valid chunk key
                admitted, reason = False, str(e)
            if admitted:
                accepted += 1
            else:
                shed += 1
                self.shed(key, reason, audit=audit)
        if keys and not audit:
            self.seen_dcs.note(keys[0].dc)  # a parsed key's dc: a checked token
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

        Blocking (one GET per substream and key at most): call it off the event loop.

        Returns:
            (keys missing a result, accepted, shed).
        """
        missing = [key for key in keys if self._missing(key, self.matching(key), first=True)]
        if not missing:
            return 0, 0, 0
        log.info("companion: audit epoch=%d dc=%s: %d keys lack results", epoch, dc, len(missing))
        accepted, shed = self.submit(epoch, dc, missing, audit=True)
        return len(missing), accepted, shed

    def _missing(
        self, key: ChunkKey, subs: Sequence[Substream], *, first: bool = False
    ) -> list[Substream]:
        """The substreams of ``subs`` without a stored result for ``key`` (the first
        one only when ``first``). A result that cannot be read counts as present: the
        auditor never overwrites what it could not see."""
        missing = []
        for sub in subs:
            location = self.settings.namespaces.substream_location(sub.name, key)
            try:
                self.riak.get(*location)
            except NotFound:
                missing.append(sub)
                if first:
                    break
            except RiakError as e:
                log.warning("companion: audit key=%s substream=%s: %s", key, sub.name, e)
        return missing

    def shed(self, key: ChunkKey, reason: str, *, audit: bool = False) -> None:
        """Mark ``key``'s results ``shed`` (asynchronously, bounded; when even the shed
        queue is full the chunk is left to the auditor)."""
        try:
            self._shed_queue.put_nowait((key, reason, audit))
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

    def _candidates(self, key: ChunkKey) -> list[Substream]:
        """Every loaded substream that reads ``key``'s type and subtype, disabled or not."""
        return [s for s in self.plugins.substreams.values() if s.matches(key.type, key.subtype)]

    def _work(self) -> None:
        # Nothing may end this loop but stop(): process() marks a chunk's results
        # whatever fails inside it; this is the last guard.
        while not self._stopping.is_set():
            try:
                item = self._inbox.get(_IDLE_POLL_S)
            except Exception:
                log.exception("companion: reading the inbox failed")
                self._stopping.wait(_IDLE_POLL_S)
                continue
            if item is None:
                continue
            try:
                if self._clock() > item.deadline:
                    reason = f"waited over {self.settings.max_wait_s}s"
                    self.shed(item.key, reason, audit=item.audit)
                    continue
                self.process(item.key, arrived=item.arrived, audit=item.audit)
            except Exception:
                log.exception("companion: key=%s: processing failed", item.key)

    def process(
        self, key: ChunkKey, *, arrived: float | None = None, audit: bool = False
    ) -> list[tuple[Substream, Outcome]]:
        """Fetch, decode once, run every matching substream sandboxed, store results.

        Whatever fails inside (the sandbox cannot fork, memory, a bug), every matching
        substream ends with a stored result: the ones not yet written get ``error``
        naming the cause.

        Args:
            key: the chunk.
            arrived: when its key group arrived (clock time), for the wait stage.
            audit: only the substreams without a stored result are run and written.

        Returns:
            Each substream run with its outcome (empty when none matched, the chunk
            was unreadable or processing failed).
        """
        candidates = self._candidates(key)
        if audit:
            candidates = self._missing(key, candidates)
        written: set[str] = set()
        try:
            return self._process(key, candidates, written, arrived)
        except Exception as e:
            cause = f"internal: {type(e).__name__}: {e}"
            log.exception(
                "companion: epoch=%d dc=%s key=%s: processing failed", key.epoch, key.dc, key
            )
            self._fail(key, [s for s in candidates if s.name not in written], cause, "internal")
            return []

    def _process(
        self,
        key: ChunkKey,
        candidates: list[Substream],
        written: set[str],
        arrived: float | None,
    ) -> list[tuple[Substream, Outcome]]:
        laps = _Laps(self._clock)
        subs = []
        skipped: list[Write] = []
        for sub in candidates:
            if self.disabled.is_disabled(sub.name, sub.version):
                # A marked result, so consumers fall back at once instead of waiting.
                skipped.append((sub, _disabled_value(sub), "error"))
            else:
                subs.append(sub)
        if not subs:
            self._writer.store_all(key, skipped, written)
            return []
        try:
            blob = self._fetch_chunk(key)
            laps.lap("fetch")
            events = self._decode_chunk(key, blob)
        except InputChunkUnreadable as e:
            self.signals.chunk_unreadable.send(key=key, error=str(e))
            log.warning(
                "companion: key=%s epoch=%d dc=%s unreadable: %s", key, key.epoch, key.dc, e
            )
            failed: list[Write] = [
                (s, error_value("error", s.name, s.version, str(e)), "error") for s in subs
            ]
            self._writer.store_all(key, skipped + failed, written)
            return []
        laps.lap("decode")
        lost_cause = ""
        try:
            outcomes: list[Outcome | None] = list(
                run_substreams(
                    subs,
                    events,
                    Context.of(key),
                    cap=self.settings.cap,
                    max_parallel=self.settings.max_parallel,
                    isolation=self.settings.isolation,
                )
            )
        except SandboxUnavailable as e:  # no pipe or no process: not the plugins' fault
            outcomes = list(e.outcomes) or [None] * len(subs)
            lost_cause = str(e)
        laps.lap("sandbox")
        done = [(sub, o) for sub, o in zip(subs, outcomes, strict=True) if o is not None]
        lost = [sub for sub, o in zip(subs, outcomes, strict=True) if o is None]
        writes: list[Write] = [(sub, stored_value(sub, o), o.status) for sub, o in done]
        writes += [(s, error_value("error", s.name, s.version, lost_cause), "error") for s in lost]
        pending = self._writer.start(key, skipped + writes, written)
        del events, blob  # freed while the results are on their way
        laps.lap("free")
        if lost:
            self._signal_failed(key, lost, lost_cause, "sandbox")
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
        writers_cpu_s = self._writer.finish(pending)
        for sub, outcome in done:  # a sandbox failure is not the plugin's: not counted
            self._track(sub, outcome)
        laps.lap("store", extra_cpu_s=writers_cpu_s)
        laps.wall["wait"] = laps.started - arrived if arrived is not None else 0.0
        laps.cpu["plugins"] = sum(o.cpu_s for _, o in done)
        self.signals.chunk_processed.send(
            key=key, runs=len(done), stages=laps.wall, stages_cpu=laps.cpu
        )
        return done

    def _fail(self, key: ChunkKey, subs: Sequence[Substream], cause: str, kind: str) -> None:
        """Store an ``error`` result naming ``cause`` for each of ``subs``."""
        self._signal_failed(key, subs, cause, kind)
        writes: list[Write] = [
            (s, error_value("error", s.name, s.version, cause), "error") for s in subs
        ]
        self._writer.store_all(key, writes)

    def _signal_failed(
        self, key: ChunkKey, subs: Sequence[Substream], cause: str, kind: str
    ) -> None:
        log.error(
            "companion: epoch=%d dc=%s key=%s: %d results marked error: %s",
            key.epoch,
            key.dc,
            key,
            len(subs),
            cause,
        )
        self.signals.chunk_failed.send(key=key, substreams=[s.name for s in subs], error=cause)
        for sub in subs:
            self.signals.run_finished.send(
                substream=sub.name,
                version=sub.version,
                key=key,
                kind=kind,
                status="error",
                wall_s=0.0,
                cpu_s=0.0,
                error=cause,
            )

    def _fetch_chunk(self, key: ChunkKey) -> bytes:
        ns = self.settings.namespaces
        try:
            return self.riak.get(*ns.chunk_location(key)).value
        except NotFound as e:
            raise InputChunkUnreadable(f"chunk_unreadable: {key} not found") from e
        except RiakError as e:
            raise InputChunkUnreadable(f"chunk_unreadable: {key} could not be read: {e}") from e

    def _decode_chunk(self, key: ChunkKey, blob: bytes) -> list[Event]:
        try:
            events = unpack_blob(blob, key=key.format(), limits=self.settings.decode_limits)
        except BlobTooLarge as e:
            # Refused before decompressing (companion/DESIGN.md, "Bounded decoding"):
            # an error result whose text starts with "too_large:" for every substream.
            raise InputChunkUnreadable(f"too_large: {e}") from e
        except EventStoreError as e:
            raise InputChunkUnreadable(f"chunk_unreadable: {e}") from e
        if not isinstance(events, list):
            raise InputChunkUnreadable(
                f"chunk_unreadable: {key} holds a {type(events).__name__}, not an array of events"
            )
        # Elements are whatever the producers sent; plugins treat them defensively
        # (substreams.helpers), so they are passed on as they are.
        return events

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
            key, reason, audit = item
            try:
                self._mark_shed(key, reason, audit=audit)
            except Exception:  # never end the thread; the auditor covers this chunk
                log.exception("companion: key=%s: marking shed failed", key)

    def _mark_shed(self, key: ChunkKey, reason: str, *, audit: bool) -> None:
        """Store ``shed`` for each matching substream (``error: disabled`` for the
        disabled ones, as when processed; only the missing ones for the auditor's)."""
        candidates = self._candidates(key)
        if audit:
            candidates = self._missing(key, candidates)
        writes: list[Write] = []
        shed: list[str] = []
        for sub in candidates:
            if self.disabled.is_disabled(sub.name, sub.version):
                writes.append((sub, _disabled_value(sub), "error"))
            else:
                writes.append(
                    (sub, error_value("shed", sub.name, sub.version, f"shed: {reason}"), "shed")
                )
                shed.append(sub.name)
        self._writer.store_all(key, writes)
        self.signals.chunk_shed.send(key=key, substreams=shed, reason=reason)


def _disabled_value(sub: Substream) -> bytes:
    """The result of a substream disabled on this node: ``error``, so consumers fall back."""
    return error_value("error", sub.name, sub.version, "disabled: on this node")
