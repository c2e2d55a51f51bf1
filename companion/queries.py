"""A chunk's query plugins, run natively in the worker: beside its Python plugins'
child, never in it (issue 23 item 3).

    queries, functions = split_queries(subs)     # _prepare: only functions go on
    ...                                          # the shared runs (chunkrun.run_shared)
    run_native(chunk, settings)                  # then one walk for all the queries

A query plugin (``Substream.plan`` set) is data: paths, literals and a closed set of
operators. It cannot run code, crash, loop or allocate beyond its rows, so it needs no
child, no sandbox and no quarantine lane: :func:`substreams.query.run.run_queries`
evaluates every query of a chunk in one walk of its fetched blob, in the chunk thread,
and gives each the :class:`~substreams.sandbox.Outcome` its child run would give (so
``stored_value`` is byte for byte the child's record). Those outcomes are appended to
the chunk's own (``chunk.subs``, ``chunk.outcomes``), so the worker stores, signals
and counts them exactly as the runs of the child: one writer, one ``run_finished``
per run, consecutive failures node-wide (a ``too_large`` counts as any plugin's).
A chunk whose plugins are all queries forks nothing.

Failure semantics: a chunk that does not verify or decode within the decode limits
gives every query an ``unreadable`` outcome with the decoder's message (stored
``error: chunk_unreadable: ...`` or ``too_large: ...``, as the child's road stores it;
not counted against the plugins). Anything else raised (a bug, MemoryError) reaches
the worker, which marks every result of the chunk not yet written ``error: internal``.
"""

from __future__ import annotations

from collections.abc import Sequence

from companion.chunkrun import Chunk
from companion.settings import CompanionSettings
from substreams.api import Substream
from substreams.forkserver_process import UndecodableChunk
from substreams.query.run import is_query, run_queries
from substreams.sandbox import Limits, Outcome

__all__ = ["run_native", "split_queries"]


def split_queries(subs: Sequence[Substream]) -> tuple[list[Substream], list[Substream]]:
    """``subs`` as (query plugins, function plugins), each in its order."""
    return [s for s in subs if is_query(s)], [s for s in subs if not is_query(s)]


def run_native(chunk: Chunk, settings: CompanionSettings) -> None:
    """Run ``chunk.queries`` on ``chunk.blob`` here, in one walk, and append them and
    their outcomes to ``chunk.subs`` and ``chunk.outcomes`` (after the shared runs, whose
    outcomes and causes keep their indexes). Stage ``queries``: the walk's wall time;
    its CPU beyond the plugins' own (``Outcome.cpu_s``, counted as ``plugins``)."""
    if not chunk.queries:
        return
    jobs = [(s, Limits.of(s, settings.cap)) for s in chunk.queries]
    chunk.laps.mark()
    try:
        outcomes = run_queries(jobs, chunk.blob, chunk.key.format(), settings.decode_limits)
    except UndecodableChunk as e:  # the chunk's fault, not the plugins': as the child's
        outcomes = [Outcome(s.name, "unreadable", error=str(e)) for s in chunk.queries]
    # The walk's CPU is the plugins' own (summed as "plugins" by the worker): not twice.
    chunk.laps.lap("queries", extra_cpu_s=-sum(o.cpu_s for o in outcomes))
    chunk.laps.cpu["queries"] = max(0.0, chunk.laps.cpu["queries"])
    chunk.subs = chunk.subs + chunk.queries
    chunk.outcomes = list(chunk.outcomes) + list(outcomes)
    chunk.queries = []
