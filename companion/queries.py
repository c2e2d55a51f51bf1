"""A chunk's query plugins, run natively in the worker: beside its Python plugins'
child, never in it (issue 23 item 3).

    queries, functions = split_queries(subs)     # before the lanes: only functions go
    ...                                          # on (chunkrun.run_shared)
    outcomes = run_native(queries, blob, key, settings)   # then one walk for all

A query plugin (``Substream.plan`` set) is data: paths, literals and a closed set of
operators. It cannot run code, crash, loop or allocate beyond its rows, so it needs no
child, no sandbox and no quarantine lane: :func:`substreams.query.run.run_queries`
evaluates every query of a chunk in one walk of its fetched blob, in the chunk thread,
and gives each the :class:`~substreams.protocol.Outcome` its child run would give (so
``stored_value`` is byte for byte the child's record). Those outcomes follow the shared
run's (``chunkrun.settle``), so the worker stores, signals and counts them exactly as
the runs of the child: one writer, one ``run_finished``
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

from companion.settings import CompanionSettings
from eventstore.names import ChunkKey
from substreams.api import Substream
from substreams.protocol import Limits, Outcome
from substreams.query.run import is_query, run_queries
from substreams.run import UndecodableChunk

__all__ = ["run_native", "split_queries"]


def split_queries(subs: Sequence[Substream]) -> tuple[list[Substream], list[Substream]]:
    """``subs`` as (query plugins, function plugins), each in its order."""
    return [s for s in subs if is_query(s)], [s for s in subs if not is_query(s)]


def run_native(
    queries: Sequence[Substream], blob: bytes, key: ChunkKey, settings: CompanionSettings
) -> list[Outcome]:
    """Run ``queries`` on the chunk's ``blob`` here, in one walk: an outcome each, in
    order (their ``cpu_s`` is the walk's CPU, shared evenly). The caller times it as
    the stage ``queries``, less the plugins' own CPU (counted as ``plugins``)."""
    jobs = [(s, Limits.of(s, settings.cap)) for s in queries]
    try:
        return run_queries(jobs, blob, key.format(), settings.decode_limits)
    except UndecodableChunk as e:  # the chunk's fault, not the plugins': as the child's
        return [Outcome(s.name, "unreadable", error=str(e)) for s in queries]
