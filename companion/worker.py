"""The engine of one companion worker process: admit chunk keys, process or shed them.

Objectives, in order: (1) never slow the storage's write path (the hook's POST is
answered at once; nothing waits on a plugin); (2) bounded memory and work whatever
arrives (load shedding, not back-pressure); (3) every admitted chunk ends with a stored
result per matching substream, ``ok`` or marked (error, timeout, killed, shed), so
consumers never wait for a result that will not come; (4) decode each chunk once.

Algorithm::

    submit(epoch, dc, keys):                    # from POST /v1/keys, never blocks
        for key in keys:                        # the inbox is the node's, shared by workers
            inbox.put(Item(key, deadline=now + max_wait_s))
                or shed(key, "overload: queue full")
        note dc for the auditor
    each of `threads` threads of every worker (the loop never ends but by stop()):
        item = inbox.get()                      # whichever thread is free takes it
        if now > item.deadline: shed(item.key, "overload: waited over ..."); continue
        subs = substreams matching (type, subtype)   # an audit item: only those lacking
                                                     # a stored result
        disabled ones: result "error: disabled: on this node"
        blob = GET events/<key> from the local node; check checksum + header (chunks.py)
        source = a loader of the blob (isolation "chunk": decoded ONCE, in the shared
            child, with the union of the substreams' fields; nothing decoded or freed
            here) | the events decoded here once (isolation "substream")
        quarantine.py: the ones not trusted go to their lanes (own child each, one
            chunk at a time, stored by the lane; a full lane: result
            "shed: quarantined: ..."); new ones are waited for below, for a while
        outcomes = sandbox.run_substreams(trusted, source)   # the shared child(ren),
            forked by the worker's fork server (forkserver.py) with isolation "chunk";
            each run sees the events narrowed to its own substream's fields
            no pipe or fork (SandboxUnavailable): the runs not ended get "error: sandbox: ..."
            not decodable in the child: "unreadable" outcomes, result "error: chunk_unreadable: ..."
        query plugins (Substream.plan set): never in a child nor a lane; run here, natively,
            in one walk of the blob for all of them (queries.py), stored and counted as
            the child's runs; a chunk with only queries forks nothing
        PUT substreams/<name>/<key> = ok value or marked failure, all at once (writer.py)
        count consecutive failures node-wide; disable at disable_after
        anything else raised on the way: every result not yet written (nor handed to a
            lane) gets "error: internal: <exception>"
    shed(key, reason): shedding.py's thread PUTs status "shed" for every matching
        enabled substream and "error: disabled" for the disabled ones.

Failure scenarios:
1. A plugin misbehaves: contained by the sandbox; its result is marked; the others of
   the same chunk are stored normally. From its first failure on it runs apart
   (quarantine.py), so the shared child and the chunk thread no longer wait for it.
2. Arrivals above capacity: the node's inbox fills; arrivals are shed at once and marked.
3. A chunk waits longer than ``max_wait_s`` (slow plugins ahead of it): shed, marked;
   a quarantined run that waits as long for its lane: that result alone shed.
4. The chunk cannot be read (404, checksum mismatch, not Sereal, over the decode
   limits; in the child: not an array, corrupt inside, over the object budget): every
   matching substream's result is marked ``error`` naming the cause.
5. The sandbox cannot start a child (out of processes, descriptors or memory), the
   fork server cannot start, dies or is late, or a bug raises: ``error`` results
   naming the cause; not counted against the plugins.
6. Riak refuses a result write: retried with backoff (``writer.py``), then counted
   ``results_not_stored`` and logged; the auditor fills the result later.
7. The worker process stops: the chunks its threads were processing are lost (the
   queued ones stay in the node's inbox for the other workers); the auditor, or the
   consumer's fallback, covers them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from companion import defaults, held
from companion.auditor import SeenDcs
from companion.chunkrun import Chunk, Laps, run_shared
from companion.chunks import chunk_source, fetch_chunk
from companion.disabled import DisabledSet
from companion.errors import InputChunkUnreadable
from companion.forkserver import ChunkServer
from companion.inbox import Inbox, InboxItem
from companion.quarantine import LaneItem, Quarantine
from companion.queries import run_native, split_queries
from companion.settings import CompanionSettings
from companion.shedding import Shedder, disabled_value, shed_value
from companion.signals import EngineSignals
from companion.writer import ResultWriter, Write
from eventstore.names import ChunkKey
from eventstore.riak import NotFound, RiakClient, RiakError
from substreams.api import Context, Substream
from substreams.loader import PluginSet
from substreams.results import error_value
from substreams.sandbox import Loader, Outcome, SandboxUnavailable, run_substreams, stored_value

log = logging.getLogger(__name__)

__all__ = ["Engine", "WorkItem"]

#: One chunk waiting to be processed.
WorkItem = InboxItem


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
        self._writer = ResultWriter(settings, riak, self.signals)
        # Shed keys are small; one full key group fits whatever the queue size.
        self._shedder = Shedder(
            capacity=max(settings.queue_max * 16, defaults.MAX_KEYS),
            candidates=self._candidates,
            missing=self._missing,
            disabled=self.disabled,
            writer=self._writer,
            signals=self.signals,
        )
        #: None when the ``quarantine`` setting is off (every plugin runs shared).
        self.quarantine = (
            Quarantine(
                run=self._run_apart,
                failing=self.disabled.has_failures,
                depth=defaults.QUARANTINE_DEPTH,
                rejoin_after=defaults.QUARANTINE_REJOIN_AFTER,
            )
            if settings.quarantine
            else None
        )
        #: Forks the chunk threads' shared children (isolation "chunk"; forkserver.py).
        self._server = ChunkServer(settings.threads) if settings.isolation == "chunk" else None
        self._plugins_lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> Engine:
        """Load plugins and start the processing, shedding and reload threads."""
        self.reload()
        if self._server is not None:  # its interpreter starts while the engine does
            server = self._server
            threading.Thread(target=server.start, name="companion-forkserver", daemon=True).start()
        targets = [(f"companion-chunk-{i}", self._work) for i in range(self.settings.threads)]
        targets += [("companion-shed", self._shedder.run), ("companion-reload", self._reload_loop)]
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
        self._shedder.stop()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self.quarantine is not None:
            self.quarantine.stop(max(0.0, deadline - time.monotonic()))
        self._writer.shutdown()
        if self._server is not None:
            self._server.close()
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
            reason = "overload: queue full"
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

    def _missing(self, key: ChunkKey, subs: Sequence[Substream]) -> list[Substream]:
        """The substreams of ``subs`` without a stored result for ``key``. A result that
        cannot be read counts as present: a repair never overwrites what it could not
        see."""
        missing = []
        for sub in subs:
            location = self.settings.namespaces.substream_location(sub.name, key)
            try:
                self.riak.get(*location)
            except NotFound:
                missing.append(sub)
            except RiakError as e:
                log.warning("companion: audit key=%s substream=%s: %s", key, sub.name, e)
        return missing

    def shed(self, key: ChunkKey, reason: str, *, audit: bool = False) -> None:
        """Mark ``key``'s results ``shed`` (asynchronously, bounded; when even the shed
        queue is full the chunk is left to the auditor)."""
        self._shedder.shed(key, reason, audit=audit)

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
        # Nothing may end this loop but stop(): process_batch() marks a chunk's results
        # whatever fails inside it; this is the last guard.
        while not self._stopping.is_set():
            try:
                items = self._take()
            except Exception:
                log.exception("companion: reading the inbox failed")
                self._stopping.wait(_IDLE_POLL_S)
                continue
            live = []
            for item in items:
                try:
                    if self._clock() > item.deadline:
                        reason = f"overload: waited over {self.settings.max_wait_s}s"
                        self.shed(item.key, reason, audit=item.audit)
                    else:
                        live.append(item)
                except Exception:
                    log.exception("companion: key=%s: shedding failed", item.key)
            if not live:
                continue
            # Beyond the first, put back by the master if this worker dies (held.py).
            note = held.hold(self.settings.state_dir / "held", live[1:])
            try:
                self.process_batch(
                    [(item.key, item.arrived, item.deadline, item.audit) for item in live]
                )
            except Exception:
                log.exception("companion: keys=%s: processing failed", [i.key for i in live])
            finally:
                held.release(note)

    def _take(self) -> list[WorkItem]:
        """The next chunk, and as many more (up to ``BATCH_CHUNKS``) as are waiting while
        every other thread of the node still has one to take: run in one child. (A
        short queue is spread over the workers as before: a batch is one worker's.)"""
        item = self._inbox.get(_IDLE_POLL_S)
        if item is None:
            return []
        items = [item]
        batch = defaults.BATCH_CHUNKS if self._server is not None else 1
        others = self.settings.workers * self.settings.threads
        while len(items) < batch and self._inbox.depth() >= others:
            more = self._inbox.get(0)
            if more is None:
                break
            items.append(more)
        return items

    def process(
        self,
        key: ChunkKey,
        *,
        arrived: float | None = None,
        deadline: float | None = None,
        audit: bool = False,
    ) -> list[tuple[Substream, Outcome]]:
        """Fetch, decode once, run every matching substream sandboxed, store results.

        The trusted substreams run in the shared child(ren) here; each quarantined one
        is handed to its lane (companion/quarantine.py), which runs and stores it later.
        Whatever fails inside (the sandbox cannot fork, memory, a bug), every matching
        substream ends with a stored result: the ones not yet written (nor handed to a
        lane) get ``error`` naming the cause.

        Args:
            key: the chunk.
            arrived: when its key group arrived (clock time), for the wait stage.
            deadline: a quarantined run must start before this (clock time); default
                ``max_wait_s`` from now.
            audit: only the substreams without a stored result are run and written.

        Returns:
            Each substream run here with its outcome (empty when none matched, the
            chunk was unreadable or processing failed); not the quarantined runs.
        """
        (done,) = self.process_batch([(key, arrived, deadline, audit)])
        return done

    def process_batch(
        self, items: Sequence[tuple[ChunkKey, float | None, float | None, bool]]
    ) -> list[list[tuple[Substream, Outcome]]]:
        """:meth:`process` for several chunks, their shared runs in one child when the
        fork server runs them (``substreams.batch``: one fork, setup and exit for all).

        Args:
            items: (key, arrived, deadline, audit) of each chunk (see :meth:`process`).

        Returns:
            What :meth:`process` returns, for each chunk.
        """
        chunks: list[Chunk] = []
        batch: list[Chunk] = []
        for key, arrived, until, audit in items:
            candidates = self._candidates(key)
            if audit:
                candidates = self._missing(key, candidates)
            deadline = self._clock() + self.settings.max_wait_s if until is None else until
            chunk = Chunk(key, candidates, arrived, Laps(self._clock))
            chunks.append(chunk)
            try:
                self._prepare(chunk, (deadline, audit))
            except Exception as e:
                self._failed(chunk, e)
            batch.append(chunk)
            if chunk.waits:  # a new plugin's first runs, in its lane: one chunk at a time
                self._run_and_store(batch)
                batch = []
        self._run_and_store(batch)
        return [chunk.done for chunk in chunks]

    def _run_and_store(self, chunks: list[Chunk]) -> None:
        """The shared runs of the prepared ``chunks`` (one child), then their results."""
        running = [c for c in chunks if not c.finished]  # (all of its runs may be in lanes)
        try:
            run_shared([c for c in running if c.subs], self._server, self.settings, self._clock)
        except Exception as e:
            for chunk in running:
                self._failed(chunk, e)
        started = []
        for chunk in running:
            if not chunk.finished:
                try:
                    run_native(chunk, self.settings)
                    started.append((chunk, self._store(chunk)))
                except Exception as e:
                    self._failed(chunk, e)
        for chunk, pending in started:
            try:
                self._complete(chunk, pending)
            except Exception as e:
                self._failed(chunk, e)

    def _failed(self, chunk: Chunk, e: Exception) -> None:
        """Anything raised while processing ``chunk``: every result not yet written
        (nor handed to a lane) gets ``error: internal: ...``."""
        chunk.finished, chunk.done = True, []
        key = chunk.key
        log.error(
            "companion: epoch=%d dc=%s key=%s: processing failed",
            *(key.epoch, key.dc, key),
            exc_info=e,
        )
        cause = f"internal: {type(e).__name__}: {e}"
        self._fail(key, [s for s in chunk.candidates if s.name not in chunk.written], cause,
                   "internal")  # fmt: skip

    def _prepare(self, chunk: Chunk, lane: tuple[float, bool]) -> None:
        """Everything before the shared run: disabled ones, fetch and check, lanes.
        Sets ``chunk.finished`` when nothing is left to run."""
        key, laps = chunk.key, chunk.laps
        for sub in chunk.candidates:
            if self.disabled.is_disabled(sub.name, sub.version):
                # A marked result, so consumers fall back at once instead of waiting.
                chunk.skipped.append((sub, disabled_value(sub), "error"))
            else:
                chunk.subs.append(sub)
        if not chunk.subs:
            self._writer.store_all(key, chunk.skipped, chunk.written)
            chunk.finished = True
            return
        try:
            chunk.blob = fetch_chunk(self.riak, self.settings.namespaces, key)
            laps.lap("fetch")
            chunk.source = chunk_source(
                key, chunk.blob, self.settings.decode_limits, self.settings.isolation
            )
        except InputChunkUnreadable as e:
            self._unreadable(key, str(e))
            failed: list[Write] = [
                (s, error_value("error", s.name, s.version, str(e)), "error") for s in chunk.subs
            ]
            self._writer.store_all(key, chunk.skipped + failed, chunk.written)
            chunk.finished = True
            return
        laps.lap("decode")
        # Query plugins run natively, after the shared runs: no child, no lane.
        chunk.queries, functions = split_queries(chunk.subs)
        chunk.subs, chunk.waits, refused = self._hand_off(
            key, functions, chunk.source, lane, chunk.written
        )
        chunk.skipped += refused

    def _store(self, chunk: Chunk) -> list[Future[float]]:
        """Start writing ``chunk``'s results; signal its runs and failures."""
        chunk.laps.mark()
        key, laps = chunk.key, chunk.laps
        subs, outcomes, causes = chunk.subs, chunk.outcomes, chunk.causes
        done = [(sub, o) for sub, o in zip(subs, outcomes, strict=True) if o is not None]
        lost = [
            (i, sub) for i, (sub, o) in enumerate(zip(subs, outcomes, strict=True)) if o is None
        ]
        writes: list[Write] = [(sub, stored_value(sub, o), o.status) for sub, o in done]
        writes += [
            (s, error_value("error", s.name, s.version, causes.get(i, chunk.lost_cause)), "error")
            for i, s in lost
        ]
        pending = self._writer.start(key, chunk.skipped + writes, chunk.written)
        chunk.source, chunk.blob = None, b""  # freed while the results are on their way
        laps.lap("free")
        for cause in {causes.get(i, chunk.lost_cause) for i, _ in lost}:
            subs_lost = [s for i, s in lost if causes.get(i, chunk.lost_cause) == cause]
            self._signal_failed(key, subs_lost, cause, "sandbox")
        unreadable = [o.error or "" for _, o in done if o.kind == "unreadable"]
        if unreadable:  # the child could not decode the chunk: nobody's run
            self._unreadable(key, unreadable[0])
        for sub, outcome in done:
            self._signal_run(key, sub, outcome)
        chunk.done = done
        return pending

    def _complete(self, chunk: Chunk, pending: list[Future[float]]) -> None:
        """Wait for ``chunk``'s writes; count its runs; its stage figures."""
        key, laps, done = chunk.key, chunk.laps, chunk.done
        laps.mark()
        writers_cpu_s = self._writer.finish(pending)
        for sub, outcome in done:  # a sandbox failure is not the plugin's: not counted
            self._track(sub, outcome)
        laps.lap("store", extra_cpu_s=writers_cpu_s)
        # The first runs of plugins new to this worker, in their lanes: waited for as
        # a run here would be, but at most new_wait_s (quarantine.py).
        until = laps.started + min(defaults.QUARANTINE_NEW_WAIT_S, self.settings.max_wait_s / 2)
        for item in chunk.waits:
            item.done.wait(max(0.0, until - self._clock()))
        laps.wall["wait"] = laps.started - chunk.arrived if chunk.arrived is not None else 0.0
        laps.cpu["plugins"] = sum(o.cpu_s for _, o in done)
        # The decode in the children (isolation "chunk"), beside the check here.
        laps.cpu["decode"] += sum(o.load_cpu_s for _, o in done)
        # The children's CPU outside their runs and load: fork faults, setup, exit.
        laps.cpu["children"] = chunk.children_cpu_s
        if chunk.children_cpu_s < 0:  # not shared by a batch: this chunk's own
            children = [o for sub, o in done if sub.plan is None]  # a query has no child
            own = sum(o.child_cpu_s - o.load_cpu_s - o.cpu_s for o in children)
            laps.cpu["children"] = max(0.0, own)
        chunk.finished = True
        self.signals.chunk_processed.send(
            key=key, runs=len(done), stages=laps.wall, stages_cpu=laps.cpu
        )

    def _unreadable(self, key: ChunkKey, error: str) -> None:
        self.signals.chunk_unreadable.send(key=key, error=error)
        log.warning(
            "companion: key=%s epoch=%d dc=%s unreadable: %s", key, key.epoch, key.dc, error
        )

    def _hand_off(
        self,
        key: ChunkKey,
        subs: list[Substream],
        source: Loader,
        lane: tuple[float, bool],
        written: set[str],
    ) -> tuple[list[Substream], list[LaneItem], list[Write]]:
        """Give each substream of ``subs`` that is not trusted to its lane
        (companion/quarantine.py).

        Returns:
            The substreams to run here (trusted, or their lane could not start a
            thread), the lane items of those new here (to wait for a while), and the
            ``shed`` results of those whose lane is full.
        """
        if self.quarantine is None:
            return subs, [], []
        deadline, audit = lane
        here: list[Substream] = []
        waits: list[LaneItem] = []
        refused: list[Write] = []
        for sub in subs:
            if self.quarantine.trusted(sub):
                here.append(sub)
                continue
            item = LaneItem(sub, key, source, deadline, audit)
            new = not self.quarantine.failed(sub)
            verdict = self.quarantine.submit(item)
            if verdict is None:
                written.add(sub.name)  # the lane stores it
                if new:
                    waits.append(item)
            elif verdict == "no thread":
                here.append(sub)  # out of threads: run it with the others, as before
            else:
                reason = (
                    f"quarantined: {sub.name} runs apart, one chunk at a time, since it is "
                    "new here or failed recently; its queue of chunks is full"
                )
                refused.append((sub, shed_value(sub, reason), "shed"))
                self._signal_shed(key, sub, reason)
        return here, waits, refused

    def _run_apart(self, item: LaneItem) -> None:
        """A lane's run of one substream on one chunk: its own child (at a lower
        priority once the substream has failed); stored, signalled and counted as a run
        in the chunk thread is."""
        sub, key = item.sub, item.key
        if self.disabled.is_disabled(sub.name, sub.version, fresh=True):  # while it waited
            self._writer.store_all(key, [(sub, disabled_value(sub), "error")])
            return
        # Not before it failed: on a busy machine a new plugin's first run would wait
        # behind everything, and a good one stay in quarantine meanwhile.
        failed = self.quarantine is not None and self.quarantine.failed(sub)
        if self._clock() > item.deadline:
            reason = (
                f"quarantined: {sub.name} runs apart, one chunk at a time, since it is new "
                f"here or failed recently; this chunk waited over {self.settings.max_wait_s}s "
                "for its turn"
            )
            self._writer.store_all(key, [(sub, shed_value(sub, reason), "shed")])
            self._signal_shed(key, sub, reason)
            return
        try:
            (outcome,) = run_substreams(
                [sub],
                item.source,
                Context.of(key),
                cap=self.settings.cap,
                isolation="substream",
                nice=defaults.QUARANTINE_NICE if failed else 0,
            )
        except SandboxUnavailable as e:  # not the plugin's fault: not counted
            # Counted as the chunk's failure, as in the chunk thread: its result of
            # this substream is marked for a cause of the companion's.
            self._fail(key, [sub], str(e), "sandbox")
            return
        except Exception as e:
            log.exception("companion: key=%s substream=%s: quarantined run failed", key, sub.name)
            self._fail(key, [sub], f"internal: {type(e).__name__}: {e}", "internal")
            return
        item.source = []  # freed while the result is stored
        self._writer.store_all(key, [(sub, stored_value(sub, outcome), outcome.status)])
        if outcome.kind == "unreadable":  # the chunk's, not the plugin's: not counted
            self._unreadable(key, outcome.error or "")  # a read of its own: counted
            return
        self._signal_run(key, sub, outcome)
        self._track(sub, outcome)

    def _signal_shed(self, key: ChunkKey, sub: Substream, reason: str) -> None:
        """One substream's result of a chunk shed (not the whole chunk's)."""
        self.signals.run_finished.send(
            substream=sub.name, version=sub.version, key=key, kind="shed", status="shed",
            wall_s=0.0, cpu_s=0.0, error=f"shed: {reason}",
        )  # fmt: skip

    def _signal_run(self, key: ChunkKey, sub: Substream, outcome: Outcome) -> None:
        if outcome.kind == "unreadable":  # no run: the chunk's error (_unreadable)
            return
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
                *(key.epoch, key.dc, key, sub.name, outcome.error),
            )

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
                substream=sub.name, version=sub.version, key=key, kind=kind, status="error",
                wall_s=0.0, cpu_s=0.0, error=cause,
            )  # fmt: skip

    def _track(self, sub: Substream, outcome: Outcome) -> None:
        """Count consecutive failures node-wide (every worker shares the count), and
        tell the quarantine. An unreadable chunk counts for nothing."""
        if outcome.kind == "unreadable":
            return
        if self.quarantine is not None:
            self.quarantine.note(sub, outcome.ok)
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
