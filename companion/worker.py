"""The engine of one companion worker process: the stages wired, and the chunk threads'
loop. The algorithm, its objectives and the numbered failure scenarios are in
``companion/DESIGN.md``; the engine holds no stage of its own, only the order:

    submit(keys): admission.admit; the refused ones -> the shed thread   (never blocks)
    each chunk thread, until stop(): tick()
        taken = admission.take()                   the next batch of the node's inbox
        shed the late ones                         ("overload: waited over ...")
        pipeline.process_batch(taken.live)         held meanwhile (held.py: a dead
                                                   worker's batch is queued again)

The parts, each a module with one job: ``admission.py`` (the inbox, in and out),
``pipeline.py`` (a batch of chunks to stored results; its stages in ``chunkrun.py``
and ``queries.py``), ``quarantine.py`` (trust and lanes; a lane's run: ``apart.py``),
``failures.py`` (consecutive failures, disabling), ``shedding.py`` (shed chunks'
results), ``reports.py`` (signals and log lines), ``candidates.py`` (a chunk's
substreams). Stages return values and never call back into the engine.

Failure semantics: nothing ends a chunk thread's loop but :meth:`Engine.stop`; every
admitted chunk ends with a stored result per matching substream, ``ok`` or marked
(``companion/DESIGN.md``, "Failure scenarios"); a worker that dies loses the chunks its
threads run (the auditor, or the consumer's fallback, covers them).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from companion import defaults, held
from companion.admission import Admission
from companion.apart import LaneRunner
from companion.auditor import SeenDcs
from companion.candidates import Candidates
from companion.disabled import DisabledSet
from companion.failures import FailureTracker
from companion.forkserver import ChunkServer
from companion.inbox import Inbox, InboxItem
from companion.pipeline import Job, Pipeline
from companion.quarantine import Lanes, Trust
from companion.reports import Reporter
from companion.settings import CompanionSettings
from companion.shedding import Shedder
from companion.signals import EngineSignals
from companion.writer import ResultWriter
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient
from substreams.api import Substream
from substreams.loader import PluginSet
from substreams.protocol import Outcome

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
        #: Forks the chunk threads' shared children (isolation "chunk"; forkserver.py).
        self._server = ChunkServer(settings.threads) if settings.isolation == "chunk" else None
        self.admission = Admission(
            self._inbox,
            max_wait_s=settings.max_wait_s,
            batch_chunks=defaults.BATCH_CHUNKS if self._server is not None else 1,
            threads=settings.workers * settings.threads,
            clock=clock,
        )
        self.candidates = Candidates(plugins, self.disabled, riak, settings.namespaces)
        self.reporter = Reporter(self.signals)
        self._writer = ResultWriter(settings, riak, self.signals)
        #: Both None when the ``quarantine`` setting is off (every plugin runs shared).
        self.trust: Trust | None = None
        self.lanes: Lanes | None = None
        if settings.quarantine:
            self.trust = Trust(
                failing=self.disabled.has_failures, rejoin_after=defaults.QUARANTINE_REJOIN_AFTER
            )
        self.tracker = FailureTracker(
            self.disabled, self.trust, disable_after=settings.disable_after
        )
        if self.trust is not None:
            runner = LaneRunner(
                settings,
                writer=self._writer,
                disabled=self.disabled,
                trust=self.trust,
                tracker=self.tracker,
                reporter=self.reporter,
                clock=clock,
            )
            self.lanes = Lanes(run=runner.run, depth=defaults.QUARANTINE_DEPTH)
        # Shed keys are small; one full key group fits whatever the queue size.
        self._shedder = Shedder(
            capacity=max(settings.queue_max * 16, defaults.MAX_KEYS),
            candidates=self.candidates,
            disabled=self.disabled,
            writer=self._writer,
            signals=self.signals,
        )
        self.pipeline = Pipeline(
            settings,
            riak,
            candidates=self.candidates,
            disabled=self.disabled,
            server=self._server,
            trust=self.trust,
            lanes=self.lanes,
            writer=self._writer,
            reporter=self.reporter,
            tracker=self.tracker,
            clock=clock,
        )
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
        if self.lanes is not None:
            self.lanes.stop(max(0.0, deadline - time.monotonic()))
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
        return self.admission.depth()

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
        admitted = self.admission.admit(keys, audit=audit)
        for key, reason in admitted.refused:
            self.shed(key, reason, audit=audit)
        if keys and not audit:
            self.seen_dcs.note(keys[0].dc)  # a parsed key's dc: a checked token
        self.reporter.key_group(epoch, dc, len(keys), admitted.accepted, len(admitted.refused))
        return admitted.accepted, len(admitted.refused)

    def shed(self, key: ChunkKey, reason: str, *, audit: bool = False) -> None:
        """Mark ``key``'s results ``shed`` (asynchronously, bounded; when even the shed
        queue is full the chunk is left to the auditor)."""
        self._shedder.shed(key, reason, audit=audit)

    def matching(self, key: ChunkKey) -> list[Substream]:
        """The enabled substreams that read ``key``'s type and subtype."""
        return self.candidates.enabled(key)

    # -- the chunk threads -------------------------------------------------------------

    def _work(self) -> None:
        # Nothing may end this loop but stop(): process_batch() marks a chunk's results
        # whatever fails inside it; this is the last guard.
        while not self._stopping.is_set():
            try:
                self.tick()
            except Exception:
                log.exception("companion: taking chunks from the inbox failed")
                self._stopping.wait(_IDLE_POLL_S)

    def tick(self) -> None:
        """One round of a chunk thread: take a batch, shed the late, process the rest."""
        taken = self.admission.take(_IDLE_POLL_S)
        for item in taken.late:
            self.shed(item.key, taken.late_reason, audit=item.audit)
        if not taken.live:
            return
        # Beyond the first, put back by the master if this worker dies (held.py).
        note = held.hold(self.settings.state_dir / "held", taken.live[1:])
        try:
            self.process_batch([(i.key, i.arrived, i.deadline, i.audit) for i in taken.live])
        except Exception:
            log.exception("companion: keys=%s: processing failed", [i.key for i in taken.live])
        finally:
            held.release(note)

    def process(
        self,
        key: ChunkKey,
        *,
        arrived: float | None = None,
        deadline: float | None = None,
        audit: bool = False,
    ) -> list[tuple[Substream, Outcome]]:
        """Fetch, run every matching substream sandboxed, store results.

        The trusted substreams run in the shared child here; each quarantined one is
        handed to its lane (quarantine.py), which runs and stores it later. Whatever
        fails inside (the sandbox cannot fork, memory, a bug), every matching substream
        ends with a stored result: the ones not yet written (nor handed to a lane) get
        ``error`` naming the cause.

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

    def process_batch(self, jobs: Sequence[Job]) -> list[list[tuple[Substream, Outcome]]]:
        """:meth:`process` for several chunks, their shared runs in one child when the
        fork server runs them (``substreams.batch``: one fork, setup and exit for all).

        Args:
            jobs: (key, arrived, deadline, audit) of each chunk (see :meth:`process`).

        Returns:
            What :meth:`process` returns, for each chunk.
        """
        return self.pipeline.process_batch(jobs)
