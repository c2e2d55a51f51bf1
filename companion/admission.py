"""Admission: chunk keys into the node's inbox, and out of it in batches.

    admit(keys):  each key -> inbox.put(item(deadline = now + max_wait_s))
                  refused (inbox full, a key too long for a record) -> to shed
    take():       the next chunk, and while every chunk thread of the node still has one
                  waiting, up to batch_chunks more (run in one child); those past their
                  deadline -> to shed ("overload: waited over ...")

Admission decides nothing else: it returns what it admitted and what it refused or
found late (:class:`Admitted`, :class:`Taken`), and the engine sheds those
(``shedding.py``). Never blocks on admit (the hook's POST is answered at once); take
waits at most ``timeout_s``.

Failure semantics: a full inbox refuses (load shedding, never back-pressure). The inbox
is the node's, shared by every worker (a pipe made by the gunicorn master): a chunk
taken here is this worker's; if it dies, the chunks of a batch beyond the first are
queued again by the master (``held.py``), the others are lost to the auditor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from companion.inbox import Inbox, InboxItem
from eventstore.names import ChunkKey

__all__ = ["Admission", "Admitted", "Taken"]

#: Why an admitted key was refused when the inbox is full.
QUEUE_FULL = "overload: queue full"


@dataclass(frozen=True)
class Admitted:
    """What :meth:`Admission.admit` did with a key group.

    Attributes:
        accepted: keys queued.
        refused: (key, reason) of each key not queued: to shed.
    """

    accepted: int
    refused: tuple[tuple[ChunkKey, str], ...]


@dataclass(frozen=True)
class Taken:
    """What :meth:`Admission.take` took from the inbox.

    Attributes:
        live: the chunks to process now, in one batch (the first one alone when
            nothing else waits).
        late: the chunks that waited past their deadline: to shed with ``late_reason``.
        late_reason: ``overload: waited over <max_wait_s>s``.
    """

    live: tuple[InboxItem, ...]
    late: tuple[InboxItem, ...]
    late_reason: str


class Admission:
    """Puts keys into the node's inbox and takes batches out of it.

    Args:
        inbox: the node's queue.
        max_wait_s: how long a chunk may wait before it is shed.
        batch_chunks: most chunks taken at once (1: no batches).
        threads: chunk threads of the node (workers x threads): more chunks are taken
            only while at least this many wait, so a short queue spreads over them.
        clock: monotonic clock (every process sharing the inbox uses the system's).
    """

    def __init__(
        self,
        inbox: Inbox,
        *,
        max_wait_s: float,
        batch_chunks: int,
        threads: int,
        clock: Callable[[], float],
    ) -> None:
        self._inbox = inbox
        self._max_wait_s = max_wait_s
        self._batch_chunks = batch_chunks
        self._threads = threads
        self._clock = clock

    def admit(self, keys: Sequence[ChunkKey], *, audit: bool = False) -> Admitted:
        """Queue each of ``keys`` with its deadline; never blocks."""
        now = self._clock()
        accepted = 0
        refused: list[tuple[ChunkKey, str]] = []
        for key in keys:
            reason = QUEUE_FULL
            try:
                admitted = self._inbox.put(InboxItem(key, now, now + self._max_wait_s, audit))
            except ValueError as e:  # a key longer than a record: never a valid chunk key
                admitted, reason = False, str(e)
            if admitted:
                accepted += 1
            else:
                refused.append((key, reason))
        return Admitted(accepted, tuple(refused))

    def take(self, timeout_s: float) -> Taken:
        """The next chunk, waiting up to ``timeout_s``, and as many more (up to
        ``batch_chunks``) as are waiting while every other thread of the node still has
        one to take (a short queue is spread over the workers: a batch is one worker's);
        the late ones apart."""
        items = []
        item = self._inbox.get(timeout_s)
        if item is not None:
            items.append(item)
            while len(items) < self._batch_chunks and self._inbox.depth() >= self._threads:
                more = self._inbox.get(0)
                if more is None:
                    break
                items.append(more)
        now = self._clock()
        late = tuple(i for i in items if now > i.deadline)
        live = tuple(i for i in items if now <= i.deadline)
        return Taken(live, late, f"overload: waited over {self._max_wait_s}s")

    def depth(self) -> int:
        """Chunks waiting now (in the node's inbox)."""
        return self._inbox.depth()
