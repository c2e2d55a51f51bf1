"""The chunk pipeline's stages and the values they pass: a chunk from its substreams to
the writes of its results.

    triage(candidates, disabled)      -> the enabled ones; "error: disabled" writes
    (engine: fetch, check, split the queries, hand the untrusted ones to their lanes)
    Prepared                          a chunk ready for its shared run
    run_shared([Prepared], server)    -> a SharedRun each: the fork server's one child
                                         for the batch, else the sandbox's own fork
    (queries.run_native: the query plugins' outcomes, in this thread)
    settle(Prepared, SharedRun, queries' outcomes) -> Settled: every write, the runs done,
                                         the runs lost (by cause), an unreadable chunk

Each stage returns a new value; none changes the one it was given, and none calls back
into the engine (``worker.py``), which times them (:class:`Laps`, its own stopwatch per
chunk), stores the writes, tells (``reports.py``) and counts (``failures.py``).

Failure semantics: :func:`run_shared` raises nothing the sandbox or the server could
not do (``SandboxUnavailable`` becomes runs without an outcome, with a cause, not the
plugins' fault); anything else raised reaches the engine, which marks the results not
yet written ``error: internal``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from companion.disabled import DisabledSet
from companion.forkserver import ChunkServer
from companion.quarantine import LaneItem
from companion.settings import CompanionSettings
from companion.shedding import disabled_value
from companion.writer import Write
from eventstore.names import ChunkKey
from substreams.api import Context, Event, Substream
from substreams.child import Loader
from substreams.protocol import Outcome
from substreams.results import error_value, stored_value
from substreams.sandbox import SandboxUnavailable, run_substreams

__all__ = [
    "Laps",
    "Prepared",
    "Settled",
    "SharedRun",
    "error_writes",
    "run_shared",
    "settle",
    "triage",
]


class Laps:
    """Wall-clock and CPU seconds (of the calling thread) of each stage of one chunk.

    The engine's stopwatch: one per chunk, used by the chunk thread alone.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.started = self._last = clock()
        self._last_cpu = time.thread_time()
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def mark(self) -> None:
        """Start the next stage now (what the thread did since was another chunk's)."""
        self._last, self._last_cpu = self._clock(), time.thread_time()

    def lap(self, stage: str, *, extra_cpu_s: float = 0.0) -> None:
        """End ``stage`` now (``extra_cpu_s``: CPU of other threads to add, or of this
        one counted elsewhere to take off; never below zero)."""
        now, cpu = self._clock(), time.thread_time()
        self.wall[stage] = now - self._last
        self.cpu[stage] = max(0.0, cpu - self._last_cpu + extra_cpu_s)
        self._last, self._last_cpu = now, cpu

    def add(self, wall: Mapping[str, float], cpu: Mapping[str, float]) -> None:
        """Stage figures measured by a stage itself (:class:`SharedRun`)."""
        self.wall.update(wall)
        self.cpu.update(cpu)


def triage(
    candidates: Sequence[Substream], disabled: DisabledSet
) -> tuple[list[Substream], list[Write]]:
    """``candidates`` as (the enabled ones, the writes of the disabled ones): a marked
    result each, so consumers fall back at once instead of waiting."""
    enabled: list[Substream] = []
    skipped: list[Write] = []
    for sub in candidates:
        if disabled.is_disabled(sub.name, sub.version):
            skipped.append((sub, disabled_value(sub), "error"))
        else:
            enabled.append(sub)
    return enabled, skipped


def error_writes(subs: Sequence[Substream], cause: str) -> list[Write]:
    """An ``error`` result naming ``cause`` for each of ``subs``."""
    return [(s, error_value("error", s.name, s.version, cause), "error") for s in subs]


@dataclass(frozen=True)
class Prepared:
    """A chunk fetched, checked and sorted, ready for its shared run.

    Attributes:
        key: the chunk.
        blob: its stored bytes (the fork server's request; the queries' walk).
        source: its events as the sandbox takes them (a loader, or decoded events);
            None when it has no function plugin (the queries read ``blob``).
        shared: the substreams for the shared child (trusted Python plugins).
        queries: the query plugins (``queries.py``: no child, no lane).
        skipped: writes decided before any run (disabled; a full lane's ``shed``).
        waits: the lane items of substreams new here, waited for a while.
    """

    key: ChunkKey
    blob: bytes
    source: Loader | list[Event] | None
    shared: tuple[Substream, ...]
    queries: tuple[Substream, ...] = ()
    skipped: tuple[Write, ...] = ()
    waits: tuple[LaneItem, ...] = ()


@dataclass(frozen=True)
class SharedRun:
    """How a chunk's shared run ended.

    Attributes:
        outcomes: one per ``Prepared.shared`` substream; None: not run (not the
            plugin's fault), why in ``causes`` (by index) or else ``lost_cause``.
        wall, cpu: the stage figures it measured (``sandbox``; in a batch, its cost
            shared, and ``server``: the server thread's fork, wait and reap).
        children_cpu_s: the batch's children's CPU outside their runs and loads,
            shared; -1 when not in a batch (then the chunk's own, from its outcomes).
    """

    outcomes: tuple[Outcome | None, ...]
    causes: Mapping[int, str] = field(default_factory=dict)
    lost_cause: str = ""
    wall: Mapping[str, float] = field(default_factory=dict)
    cpu: Mapping[str, float] = field(default_factory=dict)
    children_cpu_s: float = -1.0


def run_shared(
    chunks: Sequence[Prepared],
    server: ChunkServer | None,
    settings: CompanionSettings,
    clock: Callable[[], float],
) -> list[SharedRun]:
    """The shared runs of ``chunks`` (each with ``shared`` substreams): the fork
    server's, one child for those it can run, else the sandbox's in this process, chunk
    by chunk. Returns a :class:`SharedRun` per chunk, in order."""
    batch = [c for c in chunks if server is not None and server.can_run(c.shared)]
    batched = {id(c) for c in batch}
    runs: dict[int, SharedRun] = {}
    for chunk in (c for c in chunks if id(c) not in batched):
        wall, cpu = clock(), time.thread_time()
        assert chunk.source is not None  # a chunk with shared runs has function plugins
        try:
            outcomes = run_substreams(
                chunk.shared,
                chunk.source,
                Context.of(chunk.key),
                cap=settings.cap,
                max_parallel=settings.max_parallel,
                isolation=settings.isolation,
            )
            got = SharedRun(tuple(outcomes))
        except SandboxUnavailable as e:  # no pipe or no process: not the plugins' fault
            lost = tuple(e.outcomes) or (None,) * len(chunk.shared)
            got = SharedRun(lost, lost_cause=str(e))
        wall_s, cpu_s = clock() - wall, time.thread_time() - cpu
        runs[id(chunk)] = SharedRun(
            got.outcomes, got.causes, got.lost_cause, {"sandbox": wall_s}, {"sandbox": cpu_s}
        )
    if batch and server is not None:
        for chunk, run in zip(batch, _run_batch(batch, server, settings, clock), strict=True):
            runs[id(chunk)] = run
    return [runs[id(c)] for c in chunks]


def _run_batch(
    batch: list[Prepared],
    server: ChunkServer,
    settings: CompanionSettings,
    clock: Callable[[], float],
) -> list[SharedRun]:
    wall, cpu = clock(), time.thread_time()
    server_cpu_s = 0.0
    try:
        got, server_cpu_s = server.run(
            [(c.shared, c.blob, c.key) for c in batch],
            decode_limits=settings.decode_limits,
            cap=settings.cap,
            max_parallel=settings.max_parallel,
        )
        ended = [(tuple(outcomes), causes, "") for outcomes, causes in got]
    except SandboxUnavailable as e:  # the server could not run it: not the plugins'
        ended = [((None,) * len(c.shared), {}, str(e)) for c in batch]
    wall, cpu = clock() - wall, time.thread_time() - cpu
    # The children's CPU outside their runs and loads (fork faults, setup, exit),
    # on whichever outcome of the batch each child's was put: shared too.
    done = [o for outcomes, _, _ in ended for o in outcomes if o is not None]
    own = sum(o.child_cpu_s - o.load_cpu_s - o.cpu_s for o in done)
    n = len(batch)
    figures = {"sandbox": cpu / n, "server": server_cpu_s / n}  # the batch's cost, shared
    return [
        SharedRun(outcomes, causes, lost, {"sandbox": wall}, figures, max(0.0, own) / n)
        for outcomes, causes, lost in ended
    ]


@dataclass(frozen=True)
class Settled:
    """What a chunk's runs ended as, ready to store and tell.

    Attributes:
        writes: every result of the chunk to write now (the skipped ones first).
        done: each substream run here with its outcome (the queries' included).
        lost: (cause, substreams) of the runs that have no outcome, by cause.
        unreadable: the child's message when it could not decode the chunk, else None.
        children_cpu_s: the children's CPU outside their runs and loads.
    """

    writes: tuple[Write, ...]
    done: tuple[tuple[Substream, Outcome], ...]
    lost: tuple[tuple[str, tuple[Substream, ...]], ...]
    unreadable: str | None
    children_cpu_s: float

    @property
    def plugins_cpu_s(self) -> float:
        """The plugins' own CPU (the children's per-run rusage, the query walks')."""
        return sum(o.cpu_s for _, o in self.done)

    @property
    def load_cpu_s(self) -> float:
        """The decode in the children (isolation ``chunk``)."""
        return sum(o.load_cpu_s for _, o in self.done)


def settle(prepared: Prepared, shared: SharedRun | None, queries: Sequence[Outcome]) -> Settled:
    """The writes and runs of ``prepared`` once its shared run (None: it had none) and
    its queries (``queries.run_native``) have ended."""
    subs = prepared.shared + prepared.queries
    ran = shared or SharedRun(())
    outcomes = (*ran.outcomes, *queries)
    done = tuple((s, o) for s, o in zip(subs, outcomes, strict=True) if o is not None)
    causes = {i: ran.causes.get(i, ran.lost_cause) for i, o in enumerate(outcomes) if o is None}
    lost_writes = [
        w for i, s in enumerate(subs) if i in causes for w in error_writes([s], causes[i])
    ]
    lost = tuple(
        (cause, tuple(subs[i] for i in causes if causes[i] == cause))
        for cause in dict.fromkeys(causes.values())
    )
    writes = (
        *prepared.skipped,
        *((s, stored_value(s, o), o.status) for s, o in done),
        *lost_writes,
    )
    unreadable = [o.error or "" for _, o in done if o.kind == "unreadable"]
    children_cpu_s = ran.children_cpu_s
    if children_cpu_s < 0:  # not shared by a batch: this chunk's own
        children = [o for sub, o in done if sub.plan is None]  # a query has no child
        children_cpu_s = max(0.0, sum(o.child_cpu_s - o.load_cpu_s - o.cpu_s for o in children))
    return Settled(
        writes=tuple(writes),
        done=done,
        lost=lost,
        unreadable=unreadable[0] if unreadable else None,
        children_cpu_s=children_cpu_s,
    )
