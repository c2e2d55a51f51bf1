"""The chunk pipeline: a batch of chunks from their keys to their results stored, told
and counted, one stage after the other (the stages and their values: ``chunkrun.py``).

    for each chunk: candidates.of(key)       matching (an audit item: missing only)
    for each chunk: triage -> split the queries -> fetch
        + check (not when all are queries: their walk checks) -> quarantine.hand_off
                                             -> a Prepared (or settled already)
        a new plugin's first lane runs end the batch here: one chunk at a time
    chunkrun.run_shared(batch)               one child of the fork server
    per chunk: queries.run_native; chunkrun.settle -> writer.start; free the blob;
        reporter tells each run
    per chunk: writer.finish; tracker.track each run (disable at disable_after);
        wait a while for its new plugins' lane runs; reporter.processed

Each stage returns a value and never calls back; this module decides what follows,
and keeps its own record of each chunk (:class:`_Ticket`: its stopwatch and the names
of the results already written, or the lanes'), which no stage sees.

Failure semantics: whatever raises for a chunk (a bug, MemoryError), every result of
it not yet written nor handed to a lane gets ``error: internal: <exception>``; a
failure of the batch's shared run marks each of its chunks so. Nothing raises to the
caller but a failure to list a chunk's candidates (the store unreadable for an audit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from companion import defaults
from companion.candidates import Candidates
from companion.chunkrun import Laps, Prepared, Settled, error_writes, run_shared, settle, triage
from companion.chunks import chunk_source, fetch_chunk
from companion.disabled import DisabledSet
from companion.errors import InputChunkUnreadable
from companion.failures import FailureTracker
from companion.forkserver import ChunkServer
from companion.quarantine import HandOff, LaneItem, Lanes, Trust, hand_off
from companion.queries import run_native, split_queries
from companion.reports import Reporter
from companion.settings import CompanionSettings
from companion.shedding import shed_value
from companion.writer import ResultWriter, Write
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient
from substreams.api import Event, Substream
from substreams.child import Loader
from substreams.protocol import Outcome

__all__ = ["Job", "Pipeline"]

#: (key, arrived, deadline, audit) of a chunk to process (see ``Engine.process``).
Job = tuple[ChunkKey, float | None, float | None, bool]


@dataclass(frozen=True)
class _Ticket:
    """The pipeline's own record of one chunk in a batch; never handed to a stage."""

    key: ChunkKey
    arrived: float | None
    deadline: float  # a lane's run must start before this
    audit: bool
    candidates: tuple[Substream, ...]
    laps: Laps
    written: set[str] = field(default_factory=set)  # results stored or the lanes'


class Pipeline:
    """Processes batches of chunks (module docstring) on the calling thread.

    Args:
        settings: the companion's settings.
        riak: a client of the local node (the chunks' reads).
        candidates: a chunk's substreams.
        disabled: the node's disabled markers.
        server: the worker's fork server (isolation ``chunk``), else None.
        trust, lanes: the quarantine; None when the ``quarantine`` setting is off.
        writer: stores the results.
        reporter: tells each run and chunk.
        tracker: counts each run's end.
        clock: the monotonic clock.
    """

    def __init__(
        self,
        settings: CompanionSettings,
        riak: RiakClient,
        *,
        candidates: Candidates,
        disabled: DisabledSet,
        server: ChunkServer | None,
        trust: Trust | None,
        lanes: Lanes | None,
        writer: ResultWriter,
        reporter: Reporter,
        tracker: FailureTracker,
        clock: Callable[[], float],
    ) -> None:
        self._settings = settings
        self._riak = riak
        self._candidates = candidates
        self._disabled = disabled
        self._server = server
        self._trust = trust
        self._lanes = lanes
        self._writer = writer
        self._reporter = reporter
        self._tracker = tracker
        self._clock = clock

    def process_batch(self, jobs: Sequence[Job]) -> list[list[tuple[Substream, Outcome]]]:
        """Process each of ``jobs`` (``Engine.process``): their shared runs in one child
        when the fork server runs them (``substreams.batch``: one fork, setup and exit
        for all). A chunk that hands a new plugin's first run to its lane ends the batch
        there. Returns each chunk's runs done here with their outcomes."""
        tickets: list[_Ticket] = []
        batch: list[tuple[_Ticket, Prepared]] = []
        done: dict[int, tuple[tuple[Substream, Outcome], ...]] = {}
        for key, arrived, until, audit in jobs:
            candidates = tuple(self._candidates.of(key, audit=audit))
            deadline = self._clock() + self._settings.max_wait_s if until is None else until
            ticket = _Ticket(key, arrived, deadline, audit, candidates, Laps(self._clock))
            tickets.append(ticket)
            if self._add(batch, ticket):  # a new plugin's first runs: one chunk at a time
                done.update(self._run(batch))
        done.update(self._run(batch))
        return [list(done.get(id(t), ())) for t in tickets]

    def _add(self, batch: list[tuple[_Ticket, Prepared]], ticket: _Ticket) -> bool:
        """Prepare ``ticket``'s chunk into ``batch`` (unless settled already); returns
        whether it waits for lane runs (then the batch runs now)."""
        try:
            prepared = self._prepare(ticket)
        except Exception as e:
            self._failed(ticket, e)
            return False
        if prepared is None:
            return False
        batch.append((ticket, prepared))
        return bool(prepared.waits)

    def _prepare(self, t: _Ticket) -> Prepared | None:
        """Everything before the shared run; None when nothing is left to run (stored)."""
        enabled, skipped = triage(t.candidates, self._disabled)
        if not enabled:
            self._writer.store_all(t.key, skipped, t.written)
            return None
        # Query plugins run natively, after the shared runs: no child, no lane.
        queries, functions = split_queries(enabled)
        source: Loader | list[Event] | None = None
        try:
            blob = fetch_chunk(self._riak, self._settings.namespaces, t.key)
            t.laps.lap("fetch")
            if functions:  # queries alone: their walk verifies and checks the chunk
                source = chunk_source(
                    t.key, blob, self._settings.decode_limits, self._settings.isolation
                )
        except InputChunkUnreadable as e:
            self._reporter.unreadable(t.key, str(e))
            self._writer.store_all(t.key, skipped + error_writes(enabled, str(e)), t.written)
            return None
        t.laps.lap("decode")
        if source is None:
            lanes = HandOff(())
        elif self._trust is None or self._lanes is None:
            lanes = HandOff(tuple(functions))
        else:
            lanes = hand_off(
                self._trust,
                self._lanes,
                t.key,
                functions,
                source,
                deadline=t.deadline,
                audit=t.audit,
            )
        t.written.update(lanes.handed)  # the lanes store those
        refused: list[Write] = []
        for sub, reason in lanes.refused:
            refused.append((sub, shed_value(sub, reason), "shed"))
            self._reporter.shed(t.key, sub, reason)
        return Prepared(
            t.key, blob, source, lanes.here, tuple(queries), (*skipped, *refused), lanes.waits
        )

    def _run(
        self, batch: list[tuple[_Ticket, Prepared]]
    ) -> dict[int, tuple[tuple[Substream, Outcome], ...]]:
        """The shared runs of the prepared ``batch`` (one child), then its results.
        Empties ``batch``: each chunk's blob or events are freed once its writes start."""
        shared = [p for _, p in batch if p.shared]
        try:
            runs = dict(
                zip(
                    map(id, shared),
                    run_shared(shared, self._server, self._settings, self._clock),
                    strict=True,
                )
            )
        except Exception as e:
            for ticket, _ in batch:
                self._failed(ticket, e)
            batch.clear()
            return {}
        del shared
        started: list[tuple[_Ticket, Settled, list[Future[float]], tuple[LaneItem, ...]]] = []
        while batch:
            t, p = batch.pop(0)
            try:
                run = runs.pop(id(p), None)
                if run is not None:
                    t.laps.add(run.wall, run.cpu)
                queries = self._queries(t, p)
                t.laps.mark()
                settled = settle(p, run, queries)
                pending = self._writer.start(t.key, settled.writes, t.written)
                waits = p.waits
                del p  # the blob (or decoded events): freed while the results are on their way
                t.laps.lap("free")
                self._tell(t.key, settled)
                started.append((t, settled, pending, waits))
            except Exception as e:
                self._failed(t, e)
        done = {}
        for t, settled, pending, waits in started:
            try:
                self._complete(t, settled, pending, waits)
                done[id(t)] = settled.done
            except Exception as e:
                self._failed(t, e)
        return done

    def _queries(self, t: _Ticket, p: Prepared) -> list[Outcome]:
        """The query plugins' outcomes (queries.py); stage ``queries``: the walk's time,
        its CPU beyond the plugins' own (counted as ``plugins``)."""
        if not p.queries:
            return []
        t.laps.mark()
        outcomes = run_native(p.queries, p.blob, t.key, self._settings)
        t.laps.lap("queries", extra_cpu_s=-sum(o.cpu_s for o in outcomes))
        return outcomes

    def _tell(self, key: ChunkKey, settled: Settled) -> None:
        for cause, subs in settled.lost:
            self._reporter.failed(key, subs, cause, "sandbox")
        if settled.unreadable is not None:  # the child could not decode it: nobody's run
            self._reporter.unreadable(key, settled.unreadable)
        for sub, outcome in settled.done:
            self._reporter.ran(key, sub, outcome)

    def _complete(
        self,
        t: _Ticket,
        settled: Settled,
        pending: list[Future[float]],
        waits: Sequence[LaneItem],
    ) -> None:
        """Wait for the chunk's writes; count its runs; its stage figures."""
        laps = t.laps
        laps.mark()
        writers_cpu_s = self._writer.finish(pending)
        for sub, outcome in settled.done:  # a sandbox failure is not the plugin's: not run
            reason = self._tracker.track(sub, outcome)
            if reason is not None:
                self._reporter.disabled(sub, reason)
        laps.lap("store", extra_cpu_s=writers_cpu_s)
        # The first runs of plugins new to this worker, in their lanes: waited for as
        # a run here would be, but at most new_wait_s (quarantine.py).
        until = laps.started + min(defaults.QUARANTINE_NEW_WAIT_S, self._settings.max_wait_s / 2)
        for item in waits:
            item.done.wait(max(0.0, until - self._clock()))
        laps.wall["wait"] = laps.started - t.arrived if t.arrived is not None else 0.0
        laps.cpu["plugins"] = settled.plugins_cpu_s
        laps.cpu["decode"] += settled.load_cpu_s  # the decode in the children, beside the check
        laps.cpu["children"] = settled.children_cpu_s  # their fork faults, setup, exit
        self._reporter.processed(t.key, len(settled.done), laps.wall, laps.cpu)

    def _failed(self, t: _Ticket, e: Exception) -> None:
        """Anything raised while processing a chunk: every result not yet written (nor
        handed to a lane) gets ``error: internal: ...``."""
        self._reporter.internal(t.key, e)
        cause = f"internal: {type(e).__name__}: {e}"
        subs = [s for s in t.candidates if s.name not in t.written]
        self._reporter.failed(t.key, subs, cause, "internal")
        self._writer.store_all(t.key, error_writes(subs, cause))
