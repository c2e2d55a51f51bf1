"""Marking what was not run: ``shed`` results, and the results of disabled substreams.

A shed chunk (the node's inbox full, or the chunk waited over ``max_wait_s``: the
reason starts ``overload:``) gets a ``shed`` result for every matching enabled
substream and ``error: disabled`` for the disabled ones, written by one thread of its
own from a bounded queue (one key group fits whatever ``queue_max``), so admission never
waits for a write. A quarantined substream whose lane is full gets a ``shed`` result of
its own, whose reason starts ``quarantined:`` (companion/quarantine.py); consumers and
the status page tell the two apart by that first word.

Failure semantics: when even the queue is full nothing is written (signalled with
"; not marked"): the auditor fills those results later, consumers fall back meanwhile.
A write that fails is the writer's (retried, then counted); the thread never ends but
by :meth:`Shedder.stop`.
"""

from __future__ import annotations

import contextlib
import logging
import queue

from companion.candidates import Candidates
from companion.disabled import DisabledSet
from companion.signals import EngineSignals
from companion.writer import ResultWriter, Write
from eventstore.names import ChunkKey
from substreams import results
from substreams.api import Substream
from substreams.results import error_value

log = logging.getLogger(__name__)

__all__ = ["Shedder", "disabled_value", "shed_value"]


def shed_value(sub: Substream, reason: str) -> bytes:
    """The result of a substream not run on a chunk, saying why (``overload: ...`` when
    the node could not keep up, ``quarantined: ...`` when only this substream was)."""
    return error_value("shed", sub.name, sub.version, f"shed: {reason}")


def disabled_value(sub: Substream) -> bytes:
    """The result of a substream disabled on this node: a gap that ``substream refill``
    fills once it is enabled again (:func:`substreams.results.disabled_value`)."""
    return results.disabled_value(sub.name, sub.version)


class Shedder:
    """Writes the results of shed chunks on a thread of its own (:meth:`run`).

    Args:
        capacity: shed chunks that may wait to be marked.
        candidates: a chunk's substreams (every loaded one matching it, disabled or
            not; for the auditor's chunks, those without a stored result), as the chunk
            threads see them.
        disabled: the node's disabled substreams.
        writer: stores the results.
        signals: ``chunk_shed`` is sent for each chunk.
    """

    def __init__(
        self,
        *,
        capacity: int,
        candidates: Candidates,
        disabled: DisabledSet,
        writer: ResultWriter,
        signals: EngineSignals,
    ) -> None:
        self._queue: queue.Queue[tuple[ChunkKey, str, bool] | None] = queue.Queue(capacity)
        self._candidates = candidates
        self._disabled = disabled
        self._writer = writer
        self._signals = signals

    def shed(self, key: ChunkKey, reason: str, *, audit: bool = False) -> None:
        """Mark ``key``'s results ``shed``, asynchronously; never blocks."""
        try:
            self._queue.put_nowait((key, reason, audit))
        except queue.Full:
            self._signals.chunk_shed.send(key=key, substreams=(), reason=f"{reason}; not marked")

    def run(self) -> None:
        """The marking thread's loop, until :meth:`stop`."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            key, reason, audit = item
            try:
                self._mark(key, reason, audit=audit)
            except Exception:  # never end the thread; the auditor covers this chunk
                log.exception("companion: key=%s: marking shed failed", key)

    def stop(self) -> None:
        """Ask :meth:`run` to return (after the chunks already queued)."""
        with contextlib.suppress(queue.Full):  # a daemon thread; joined with a timeout
            self._queue.put_nowait(None)

    def _mark(self, key: ChunkKey, reason: str, *, audit: bool) -> None:
        """Store ``shed`` for each matching substream (``error: disabled`` for the
        disabled ones, as when processed; only the missing ones for the auditor's)."""
        candidates = self._candidates.of(key, audit=audit)
        writes: list[Write] = []
        shed: list[str] = []
        for sub in candidates:
            if self._disabled.is_disabled(sub.name, sub.version):
                writes.append((sub, disabled_value(sub), "error"))
            else:
                writes.append((sub, shed_value(sub, reason), "shed"))
                shed.append(sub.name)
        self._writer.store_all(key, writes)
        self._signals.chunk_shed.send(key=key, substreams=shed, reason=reason)
