"""One batch of chunks in a worker, between their preparation and their results: the
stage figures of each chunk (:class:`Laps`), its state (:class:`Chunk`), and the shared
runs of a batch (:func:`run_shared`: one child of the worker's fork server for the
whole batch, ``companion/forkserver.py``; else the sandbox's own fork per chunk).
``worker.py`` prepares each chunk, calls :func:`run_shared`, stores the results.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from companion.forkserver import ChunkServer
from companion.quarantine import LaneItem
from companion.settings import CompanionSettings
from companion.writer import Write
from eventstore.names import ChunkKey
from substreams.api import Context, Substream
from substreams.sandbox import Loader, Outcome, SandboxUnavailable, run_substreams

__all__ = ["Chunk", "Laps", "run_shared"]


class Laps:
    """Wall-clock and CPU seconds (of the calling thread) of each stage of one chunk."""

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
        now, cpu = self._clock(), time.thread_time()
        self.wall[stage] = now - self._last
        self.cpu[stage] = cpu - self._last_cpu + extra_cpu_s
        self._last, self._last_cpu = now, cpu


@dataclass
class Chunk:
    """One chunk of a batch, from its preparation to its stored results."""

    key: ChunkKey
    candidates: list[Substream]
    arrived: float | None
    laps: Laps
    written: set[str] = field(default_factory=set)
    subs: list[Substream] = field(default_factory=list)
    queries: list[Substream] = field(default_factory=list)  # run natively (queries.py)
    skipped: list[Write] = field(default_factory=list)
    waits: list[LaneItem] = field(default_factory=list)
    blob: bytes = b""
    source: Loader | None = None
    outcomes: list[Outcome | None] = field(default_factory=list)
    causes: dict[int, str] = field(default_factory=dict)  # why a run has no outcome
    lost_cause: str = ""  # ... when not in causes
    children_cpu_s: float = -1.0  # shared by a batch (else this chunk's own)
    done: list[tuple[Substream, Outcome]] = field(default_factory=list)
    finished: bool = False


def run_shared(
    chunks: list[Chunk],
    server: ChunkServer | None,
    settings: CompanionSettings,
    clock: Callable[[], float],
) -> None:
    """The shared runs of ``chunks``: the fork server's (one child for the batch),
    else the sandbox's in this process, chunk by chunk. Sets each chunk's outcomes
    (``None`` with a cause: not run, not the plugins' fault) and its stage figures."""
    batch = [c for c in chunks if server is not None and server.can_run(c.subs)]
    batched = {id(c) for c in batch}
    for chunk in (c for c in chunks if id(c) not in batched):
        chunk.laps.mark()
        assert chunk.source is not None
        try:
            chunk.outcomes = list(
                run_substreams(
                    chunk.subs,
                    chunk.source,
                    Context.of(chunk.key),
                    cap=settings.cap,
                    max_parallel=settings.max_parallel,
                    isolation=settings.isolation,
                )
            )
        except SandboxUnavailable as e:  # no pipe or no process: not the plugins' fault
            chunk.outcomes = list(e.outcomes) or [None] * len(chunk.subs)
            chunk.lost_cause = str(e)
        chunk.laps.lap("sandbox")
    if not batch or server is None:
        return
    wall, cpu = clock(), time.thread_time()
    server_cpu_s = 0.0
    try:
        got, server_cpu_s = server.run(
            [(c.subs, c.blob, c.key) for c in batch],
            decode_limits=settings.decode_limits,
            cap=settings.cap,
            max_parallel=settings.max_parallel,
        )
        for chunk, (outcomes, causes) in zip(batch, got, strict=True):
            chunk.outcomes, chunk.causes = outcomes, causes
    except SandboxUnavailable as e:  # the server could not run it: not the plugins'
        for chunk in batch:
            chunk.outcomes, chunk.lost_cause = [None] * len(chunk.subs), str(e)
    wall, cpu = clock() - wall, time.thread_time() - cpu
    for chunk in batch:  # the batch's cost, shared
        chunk.laps.wall["sandbox"] = wall
        chunk.laps.cpu["sandbox"] = cpu / len(batch)
        chunk.laps.cpu["server"] = server_cpu_s / len(batch)  # its fork, wait, reap
    # The children's CPU outside their runs and loads (fork faults, setup, exit),
    # on whichever outcome of the batch each child's was put: shared too.
    done = [o for c in batch for o in c.outcomes if o is not None]
    own = sum(o.child_cpu_s - o.load_cpu_s - o.cpu_s for o in done)
    for chunk in batch:
        chunk.children_cpu_s = max(0.0, own) / len(batch)
