"""Idempotent TCP producers: what the relocator holds of each, and how the journal says it.

A ``TcpEmitter`` opens every connection with a hello (``wire.py``) that carries its
**producer id** (128 random bits, drawn when the emitter is made: a restarted producer
is a new producer) and the **sequence number** of the first frame it is about to send;
the frames after it are numbered by their order on the connection, rejected ones
included. A producer resends after a lost connection from its first unacknowledged
frame, in the same order, so the relocator recognises a resent frame by its number.

:class:`ProducerTable` maps a producer id to its **high** mark: every frame numbered
below it is held (journaled, or queued for the journal ahead of anything that relies
on it). ``admit`` says how many leading frames of a numbered range are already held.
Entries are forgotten after ``idle_s`` without a frame and, least recently seen first,
above ``max_producers``; a producer forgotten and then resending is stored twice, as a
producer without an id is.

The journal keeps what recovery needs to rebuild the table:

- a **range trailer**, the last frame of each record of a numbered submission::

      "RP" | 1 (u8) | producer id (16 bytes) | first seq (u64 BE) | frames (u32 BE)

- a **table record**, the first record of each segment, written when it is opened:
  every producer's high mark as the journal writer knew it (only durable ranges)::

      "RT" | 1 (u8) | entries (u32 BE) | (producer id (16 bytes) | high (u64 BE))*

so a segment deleted (its frames all in stored batches) takes no producer state with
it: the newer segments carry it. Both are length-prefixed frames like events (the
record's CRC covers them); their magic is not an event's ``RE``.

Pure logic, no I/O. Not thread-safe: each table has one owner (see ``intake/tcp.py``
and ``journal.py``).
"""

from __future__ import annotations

import collections
import struct
import time
from collections.abc import Callable, Iterable

from relocator.wire import LENGTH

#: Magic of the journal's producer frames (events start with ``RE``).
RANGE_MAGIC = b"RP"
TABLE_MAGIC = b"RT"
META_MAGICS = (RANGE_MAGIC, TABLE_MAGIC)
_RANGE = struct.Struct(">2sB16sQI")
_TABLE_HEAD = struct.Struct(">2sBI")
_ENTRY = struct.Struct(">16sQ")
_VERSION = 1

#: (producer id, first sequence number, frames) of a numbered submission.
ProducerRange = tuple[bytes, int, int]


class ProducerTable:
    """Producer id -> high mark, bounded in time and size.

    Args:
        idle_s: an entry is forgotten this long after its last frame, seconds.
        max_producers: above this many entries, the least recently seen is forgotten.
        clock: monotonic seconds (injected for tests).
        on_forget: called with ``"idle"`` or ``"cap"`` per entry forgotten.
    """

    def __init__(
        self,
        *,
        idle_s: float,
        max_producers: int,
        clock: Callable[[], float] = time.monotonic,
        on_forget: Callable[[str], None] | None = None,
    ) -> None:
        self._idle_s = idle_s
        self._max = max_producers
        self._clock = clock
        self._on_forget = on_forget
        # least recently seen first: [high, last seen]
        self._entries: collections.OrderedDict[bytes, list[float]] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def high(self, producer: bytes) -> int | None:
        """The producer's high mark, None when it is not tracked."""
        entry = self._entries.get(producer)
        return None if entry is None else int(entry[0])

    def admit(self, producer: bytes, first: int, count: int) -> int:
        """How many of the frames ``first .. first + count - 1`` are already held,
        counted from the first (a resend overlaps a prefix).

        0: none; the range is now held (the caller submits it). ``count``: all.
        Between the two: the caller drops that many leading frames and admits the rest.
        O(1) amortised.
        """
        now = self._clock()
        entry = self._touch(producer, now)
        high = int(entry[0])
        if first >= high:  # new frames (a gap: frames we never saw, or forgot)
            entry[0] = first + count
            self._sweep(now)
            return 0
        return min(high - first, count)

    def note(self, producer: bytes, high: int) -> None:
        """Raise the producer's high mark to at least ``high`` (journal writer,
        recovery)."""
        now = self._clock()
        entry = self._touch(producer, now)
        entry[0] = max(entry[0], high)
        self._sweep(now)

    def items(self) -> list[tuple[bytes, int]]:
        """(producer id, high) of every entry not expired, least recently seen first."""
        self._sweep(self._clock())
        return [(p, int(e[0])) for p, e in self._entries.items()]

    def _touch(self, producer: bytes, now: float) -> list[float]:
        entry = self._entries.get(producer)
        if entry is None:
            entry = self._entries[producer] = [0, now]
        else:
            entry[1] = now
            self._entries.move_to_end(producer)
        return entry

    def _sweep(self, now: float) -> None:
        entries = self._entries
        while len(entries) > self._max:
            entries.popitem(last=False)
            self._forgot("cap")
        limit = now - self._idle_s
        while entries:
            oldest = next(iter(entries.values()))
            if oldest[1] >= limit:
                break
            entries.popitem(last=False)
            self._forgot("idle")

    def _forgot(self, reason: str) -> None:
        if self._on_forget is not None:
            self._on_forget(reason)


def encode_range(producer: bytes, first: int, count: int) -> bytes:
    """The length-prefixed range trailer of a journal record."""
    body = _RANGE.pack(RANGE_MAGIC, _VERSION, producer, first, count)
    return LENGTH.pack(len(body)) + body


def encode_table(entries: Iterable[tuple[bytes, int]]) -> bytes:
    """The length-prefixed table frame: each (producer id, high)."""
    pairs = list(entries)
    body = b"".join(
        [_TABLE_HEAD.pack(TABLE_MAGIC, _VERSION, len(pairs))]
        + [_ENTRY.pack(p, h) for p, h in pairs]
    )
    return LENGTH.pack(len(body)) + body


def is_meta(frame: bytes) -> bool:
    """Whether a journal frame is a producer frame, not an event."""
    return frame[:2] in META_MAGICS


def decode_meta(frame: bytes) -> list[tuple[bytes, int]]:
    """(producer id, high) pairs a producer frame holds (without its length prefix).

    Raises:
        ValueError: not a producer frame of a version we know, or cut short.
    """
    magic = frame[:2]
    if magic == RANGE_MAGIC and len(frame) == _RANGE.size:
        _, version, producer, first, count = _RANGE.unpack(frame)
        if version == _VERSION:
            return [(producer, first + count)]
    elif magic == TABLE_MAGIC and len(frame) >= _TABLE_HEAD.size:
        _, version, n = _TABLE_HEAD.unpack_from(frame)
        if version == _VERSION and len(frame) == _TABLE_HEAD.size + n * _ENTRY.size:
            return [_ENTRY.unpack_from(frame, _TABLE_HEAD.size + i * _ENTRY.size) for i in range(n)]
    raise ValueError(f"not a producer frame of version {_VERSION}: {bytes(frame[:8])!r}")
