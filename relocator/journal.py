"""The write-ahead journal: every accepted frame, durable before it is acknowledged.

An append-only log of **segments** ``<data_dir>/journal/<n:012d>.blk``. A record is
the frames received together, as they came on the wire::

    length (u32 BE) | crc32 of block (u32 BE) | block = (frame length (u32 BE) | frame)+

A frame's **position** is ``segment << 40 | offset of its length prefix``, increasing in
write order. ``JournalWriter`` (a thread) takes blocks from intake, appends as many as
are queued (<= ``batch_max`` frames) with one ``write`` and one ``fdatasync`` (group
commit), and only then hands the frames to the aggregator and calls the intake's
callback (the TCP ack). One CRC per block, not per frame: ``zlib.crc32`` of a block of
many frames runs without the GIL, per-frame CRCs and headers were a fifth of the
relocator's GIL time.

Failure semantics: a crash can leave a torn record only at the end of the newest
segment. Anything else that fails its length, CRC or framing check is corruption (a bad
disk, a stray write), and acknowledged records may follow it. ``Journal.replay`` then
**resynchronises**: it scans forward for the next offset where a whole record validates
(its first frame's magic ``RE\x01`` twelve bytes in is the anchor ``bytes.find`` looks
for; the frame lengths must chain exactly to the record's end and the CRC must match)
and goes on from there, so one bad record costs that record's frames only. Skipped
bytes are logged with the segment and offsets and counted
(``relocator_journal_skipped_bytes_total{reason="corrupt"}``). Only bad bytes with no
valid record after them at the end of the newest segment are a torn tail: truncated
(none of its frames was acknowledged) and counted as ``reason="torn_tail"``. Segments are
deleted by ``Journal.delete`` once every frame in them is inside a durable batch
(``state.py``).

Idempotent producers (``producers.py``): a record of a numbered TCP submission ends
with a **range trailer** frame (producer id, first seq, frames), and every segment
starts with a **table record** holding each producer's high mark as the writer knew it
when it opened the segment (only what was durable: the writer's own table, updated
after each fdatasync). ``replay`` hands these frames to its ``meta`` callback, never to
the aggregator, so recovery rebuilds every producer's high mark from the segments that
remain. Positions of event frames are unchanged (the trailer comes after them).

Measured against LMDB on this machine (bench/relocator_bench.py --mode journal): see
relocator/DESIGN.md. The log wins because one group commit is one sequential write and
one fdatasync; LMDB's commit writes data pages and then the meta page (two syncs).
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from relocator.errors import JournalFormatError
from relocator.metrics import Metrics
from relocator.producers import ProducerRange, ProducerTable, encode_range, encode_table, is_meta
from relocator.wire import LENGTH, Received

log = logging.getLogger(__name__)

_REC = struct.Struct(">II")
#: Segments of block records; ``.seg`` held one frame per record (refused, see above).
_SUFFIX = ".blk"
_OLD_SUFFIX = ".seg"
SEGMENT_SHIFT = 40
_OFFSET_MASK = (1 << SEGMENT_SHIFT) - 1


def segment_of(position: int) -> int:
    """The segment number of a record position."""
    return position >> SEGMENT_SHIFT


class Journal:
    """The segment files under ``directory``. Appends from one thread only."""

    def __init__(
        self,
        directory: Path,
        *,
        segment_max_bytes: int,
        fsync: bool = True,
        metrics: Metrics | None = None,
        prologue: Callable[[], bytes] | None = None,
    ) -> None:
        """Args:
        prologue: returns the length-prefixed frames written (and synced) as the first
            record of each segment this journal opens; nothing when it returns b"".
        """
        self.directory = directory
        self._metrics = metrics
        self._prologue = prologue
        directory.mkdir(parents=True, exist_ok=True)
        self._segment_max_bytes = segment_max_bytes
        self._fsync = fsync
        self._file: int | None = None
        self._segment = 0
        self._offset = 0
        self._events_from = 0  # offset after the segment's prologue
        self._opened_at = 0.0
        #: Bad stretches skipped by ``replay`` (torn tails not included).
        self.corrupt_records = 0
        #: Bytes ``replay`` did not read as records, by reason ("corrupt", "torn_tail").
        self.skipped_bytes: dict[str, int] = {}
        older = sorted(directory.glob(f"*{_OLD_SUFFIX}"))
        if older:
            # Records of one frame each: replaying them as blocks would find no frames
            # and truncate acknowledged events away.
            raise JournalFormatError(
                f"{directory} holds segments of the older one-frame-per-record journal "
                f"({', '.join(p.name for p in older[:3])}{', ...' if len(older) > 3 else ''}):"
                " let the relocator version that wrote them push them out (stop it with"
                " SIGTERM once its backlog is empty), then start this version"
            )

    def segments(self) -> list[int]:
        """Existing segment numbers, oldest first."""
        return sorted(int(p.stem) for p in self.directory.glob(f"*{_SUFFIX}") if p.stem.isdigit())

    def _path(self, segment: int) -> Path:
        return self.directory / f"{segment:012d}{_SUFFIX}"

    def replay(self, meta: Callable[[bytes], None] | None = None) -> Iterator[tuple[int, bytes]]:
        """Every event frame of every intact record of every segment, in order:
        (position, frame). Producer frames (range trailers, table records) go to
        ``meta`` instead (dropped without it).

        Corrupt bytes are skipped up to the next valid record (see the module
        docstring); a torn tail of the newest segment is truncated. Call once, before
        appending.
        """
        existing = self.segments()
        for seg in existing:
            path = self._path(seg)
            data = path.read_bytes()
            for item in scan_records(data):
                if isinstance(item, Gap):
                    at_end = item.end == len(data)
                    self._skipped(path, item, at_end=at_end, torn=at_end and seg == existing[-1])
                    continue
                base = (seg << SEGMENT_SHIFT) | item.start
                frames = item.frames
                # a producer frame is a record's last (trailer) or only one (table)
                if is_meta(frames[-1][1]):
                    if meta is not None:
                        meta(frames[-1][1])
                    frames = frames[:-1]
                for offset, frame in frames:
                    yield base + offset, frame
        self._segment = (existing[-1] + 1) if existing else 0

    def _skipped(self, path: Path, gap: Gap, *, at_end: bool, torn: bool) -> None:
        """Count, log and (for a torn tail) truncate the bytes of a gap."""
        size = gap.end - gap.start
        reason = "torn_tail" if torn else "corrupt"
        self.skipped_bytes[reason] = self.skipped_bytes.get(reason, 0) + size
        if self._metrics is not None:
            self._metrics.journal_skipped.labels(reason).inc(size)
        if torn:
            log.warning(
                "journal: truncating torn tail of segment %s at offset %d (%d bytes)",
                path.name,
                gap.start,
                size,
            )
            with path.open("r+b") as f:
                f.truncate(gap.start)
                os.fsync(f.fileno())
            return
        self.corrupt_records += 1
        log.error(
            "journal: corrupt bytes in segment %s at offsets %d-%d (%d bytes) skipped, %s",
            path.name,
            gap.start,
            gap.end,
            size,
            "nothing valid after them" if at_end else "replay resumed at the next valid record",
        )

    def _open_next(self) -> None:
        if self._file is not None:
            os.close(self._file)
            self._segment += 1
        path = self._path(self._segment)
        self._file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._offset = os.fstat(self._file).st_size
        self._opened_at = time.monotonic()
        _fsync_dir(self.directory)
        block = self._prologue() if self._prologue is not None else b""
        if block:  # synced now: an older segment may be deleted before the next append
            self._write([_REC.pack(len(block), zlib.crc32(block)), block])
            self._offset += _REC.size + len(block)
        self._events_from = self._offset

    def number_after(self, segment: int) -> None:
        """Number the segments this journal opens above ``segment`` (call after
        ``replay``): positions are never reused while a stored batch may name them,
        even when every segment file was deleted (replay alone would start at 0)."""
        if self._file is None:
            self._segment = max(self._segment, segment + 1)

    @property
    def active_segment(self) -> int:
        """The segment appends go to (it is never deleted)."""
        return self._segment

    def roll_due(self, max_age_s: float) -> bool:
        """Whether the active segment is older than ``max_age_s`` and holds events."""
        return self._offset > self._events_from and time.monotonic() - self._opened_at >= max_age_s

    def roll(self) -> None:
        """Start a new segment for the following appends."""
        self._open_next()

    def append(self, payloads: list[bytes]) -> list[int]:
        """Append frames as one record, make them durable, return their positions.

        Raises:
            OSError: the write or fdatasync failed (nothing may be acknowledged).
        """
        lengths = list(map(LENGTH.pack, map(len, payloads)))
        block = b"".join(b for pair in zip(lengths, payloads, strict=True) for b in pair)
        (base,) = self.append_blocks([block])
        offsets = itertools.accumulate((LENGTH.size + len(p) for p in payloads), initial=0)
        return [base + o for o, _ in zip(offsets, payloads, strict=False)]

    def append_blocks(self, blocks: list[bytes], trailers: list[bytes] | None = None) -> list[int]:
        """Append each block of length-prefixed frames as one record, make them durable.

        ``trailers[i]`` (length-prefixed frames too, or b"") ends the record of
        ``blocks[i]``: it is inside the record's CRC, after its frames.

        Returns:
            Each block's base position: a frame's position is its block's base plus the
            offset of its length prefix in the block.

        Raises:
            OSError: the write or fdatasync failed (nothing may be acknowledged).
        """
        if self._file is None or self._offset >= self._segment_max_bytes:
            self._open_next()
        assert self._file is not None
        parts: list[bytes] = []
        bases: list[int] = []
        offset = self._offset
        for i, block in enumerate(blocks):
            trailer = trailers[i] if trailers is not None else b""
            crc = zlib.crc32(block)  # releases the GIL on large blocks
            if trailer:
                crc = zlib.crc32(trailer, crc)
            size = len(block) + len(trailer)
            parts.append(_REC.pack(size, crc))
            parts.append(block)
            if trailer:
                parts.append(trailer)
            bases.append((self._segment << SEGMENT_SHIFT) | (offset + _REC.size))
            offset += _REC.size + size
        self._write(parts)
        self._offset = offset
        return bases

    def _write(self, parts: list[bytes]) -> None:
        """Write ``parts`` at the end of the active segment and fdatasync."""
        assert self._file is not None
        view = memoryview(b"".join(parts))
        while view:
            written = os.write(self._file, view)
            view = view[written:]
        if self._fsync:
            os.fdatasync(self._file)

    def delete(self, segment: int) -> None:
        """Remove a segment whose records are all inside durable batches."""
        if segment == self._segment and self._file is not None:
            raise ValueError(f"segment {segment} is the active one")
        try:
            self._path(segment).unlink()
        except FileNotFoundError:
            return
        log.debug("journal: deleted segment %d", segment)

    def close(self) -> None:
        """Close the active segment."""
        if self._file is not None:
            os.close(self._file)
            self._file = None


@dataclass(frozen=True)
class Record:
    """A valid record of a segment: its block's offset and the block's frames as
    (offset in the block, frame)."""

    start: int
    frames: list[tuple[int, bytes]]


@dataclass(frozen=True)
class Gap:
    """Bytes of a segment that are not valid records: ``data[start:end]``; ``end`` is
    the next valid record's offset, or the segment's length when none follows."""

    start: int
    end: int


#: Every frame starts with wire.MAGIC + VERSION; a record's first frame starts this far
#: into the record (record header, frame length). The anchor of resynchronisation.
_FRAME_MAGIC = b"RE\x01"
_ANCHOR = _REC.size + LENGTH.size


def scan_records(data: bytes) -> Iterator[Record | Gap]:
    """The records of one segment's bytes, in order, with the bad stretches between.

    A record is valid when its block lies within ``data``, its CRC matches and its
    frames' length prefixes chain exactly to its end. After an invalid one the scan
    resynchronises on the next offset that holds a valid record whose first frame
    starts with the frame magic (every frame intake journals does), so a corrupt
    record costs only its own bytes. A gap that runs to the end of ``data`` is either
    a torn tail or corruption with nothing valid after it (the caller knows which
    segment is the newest).

    Pure: no I/O. Cost: one CRC per record; after a bad record, one ``bytes.find`` per
    occurrence of the magic plus a length walk (and a CRC only when the walk fits).
    """
    view = memoryview(data)
    pos = 0
    end = len(data)
    while pos < end:
        record = _record_at(view, pos, resync=False)
        if record is not None:
            yield record[0]
            pos = record[1]
            continue
        # Resynchronise: the next anchor whose record validates.
        found = -1
        hit = data.find(_FRAME_MAGIC, pos + 1 + _ANCHOR)
        while hit >= 0:
            candidate = _record_at(view, hit - _ANCHOR, resync=True)
            if candidate is not None:
                found = hit - _ANCHOR
                break
            hit = data.find(_FRAME_MAGIC, hit + 1)
        yield Gap(pos, end if found < 0 else found)
        if found < 0:
            return
        pos = found


def _record_at(view: memoryview, pos: int, *, resync: bool) -> tuple[Record, int] | None:
    """The valid record at ``pos`` and the offset after it, or None.

    ``resync``: check the framing before the CRC (a candidate offset is rarely a
    record, and the walk over its length prefixes is cheaper than a CRC of its block).
    """
    if pos + _REC.size > len(view):
        return None
    n, crc = _REC.unpack_from(view, pos)
    start = pos + _REC.size
    stop = start + n
    if n == 0 or stop > len(view):
        return None
    if resync and not _chained(view, start, stop):
        return None
    block = view[start:stop]
    if zlib.crc32(block) != crc:
        return None
    frames = _frames_of(block)
    if frames is None:  # a good CRC over bytes that are not frames
        return None
    return Record(start, frames), stop


def _chained(view: memoryview, start: int, stop: int) -> bool:
    """Whether length-prefixed frames fill ``view[start:stop]`` exactly."""
    pos = start
    while pos < stop:
        if pos + LENGTH.size > stop:
            return False
        (n,) = LENGTH.unpack_from(view, pos)
        pos += LENGTH.size + n
    return pos == stop


def _frames_of(block: bytes | memoryview) -> list[tuple[int, bytes]] | None:
    """(offset, frame) of each length-prefixed frame of a block; None if it does not
    split exactly into frames."""
    out: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(block):
        if pos + LENGTH.size > len(block):
            return None
        (n,) = LENGTH.unpack_from(block, pos)
        frame = block[pos + LENGTH.size : pos + LENGTH.size + n]
        if len(frame) != n:
            return None
        out.append((pos, bytes(frame)))
        pos += LENGTH.size + n
    return out


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class _Submission:
    received: Received
    done: Callable[[int], None] | None
    producer: ProducerRange | None = None


#: The aggregator's entry: (base position, frames) of each block made durable.
Sink = Callable[[list[tuple[int, Received]]], None]


class JournalWriter:
    """The one thread that appends to the journal (group commit) and then hands frames
    to ``sink`` (the aggregator) and calls each submitter's ``done(n)``.

    ``producers``: the writer's own table of producer high marks, raised after each
    fdatasync from the submissions' ranges (so it holds only durable ranges); the
    journal's prologue should write it (:func:`table_prologue`)."""

    def __init__(
        self,
        journal: Journal,
        sink: Sink,
        *,
        batch_max: int,
        queue_max: int,
        roll_s: float,
        producers: ProducerTable | None = None,
    ) -> None:
        self._journal = journal
        self._producers = producers
        self._sink = sink
        self._batch_max = batch_max
        self._roll_s = roll_s
        self._queue: queue.Queue[_Submission | None] = queue.Queue(maxsize=queue_max)
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self.failed: BaseException | None = None
        self.roll_requested = threading.Event()

    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    def submit(
        self,
        received: Received,
        done: Callable[[int], None] | None,
        *,
        block: bool,
        producer: ProducerRange | None = None,
    ) -> bool:
        """Queue received frames; ``done(received.events)`` runs once they are durable
        (at once for an empty one, in queue order: after everything queued before it).
        ``producer``: the numbered range the frames are (journaled as the record's
        trailer).

        Returns:
            False when the queue is full and ``block`` is false (the caller drops).
        """
        try:
            self._queue.put(_Submission(received, done, producer), block=block, timeout=None)
        except queue.Full:
            return False
        return True

    def stop(self) -> None:
        """Write what is queued, then stop the thread (at once if it already failed)."""
        if self._thread.is_alive():
            self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            try:
                item: _Submission | None = self._queue.get(timeout=0.2)
            except queue.Empty:
                item = _Submission(Received(b"", [], 0, 0, 0), None)
            batch: list[_Submission] = []
            count = 0
            while item is not None:
                batch.append(item)
                count += item.received.events
                if count >= self._batch_max:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if item is None:
                stopping = True
            full = [s for s in batch if s.received.events]
            try:
                if self._journal.roll_due(self._roll_s) or self.roll_requested.is_set():
                    self.roll_requested.clear()
                    # A roll writes the new segment's producers table: it can fail as an
                    # append does, and must stop the intake the same way (scenario 13).
                    self._journal.roll()
                if full:
                    trailers = [encode_range(*s.producer) if s.producer else b"" for s in full]
                    blocks = [s.received.data for s in full]
                    bases = self._journal.append_blocks(blocks, trailers)
            except OSError as e:  # disk full, I/O error: nothing acknowledged, stop
                log.critical("journal: append failed, intake stops: %s", e)
                self.failed = e
                return
            if full:
                if self._producers is not None:
                    for s in full:
                        if s.producer is not None:
                            producer, first, count = s.producer
                            self._producers.note(producer, first + count)
                self._sink(list(zip(bases, (s.received for s in full), strict=True)))
            for s in batch:
                if s.done is not None:
                    s.done(s.received.events)


def table_prologue(producers: ProducerTable) -> Callable[[], bytes]:
    """A :class:`Journal` prologue writing ``producers`` (the writer's table) as each new
    segment's table record; nothing while it is empty."""

    def prologue() -> bytes:
        items = producers.items()
        return encode_table(items) if items else b""

    return prologue
