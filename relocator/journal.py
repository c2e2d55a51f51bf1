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
segment; ``Journal.replay`` stops at the first record whose length or CRC is wrong in
the newest segment and truncates there (none of its frames was acknowledged). A bad
record in an older segment is real corruption: it is logged with the position, the rest
of that segment is skipped and counted, never silently. Segments are deleted by
``Journal.delete`` once every frame in them is inside a durable batch (``state.py``).

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

    def __init__(self, directory: Path, *, segment_max_bytes: int, fsync: bool = True) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._segment_max_bytes = segment_max_bytes
        self._fsync = fsync
        self._file: int | None = None
        self._segment = 0
        self._offset = 0
        self._opened_at = 0.0
        self.corrupt_records = 0
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

    def replay(self) -> Iterator[tuple[int, bytes]]:
        """Every frame of every intact record of every segment, in order:
        (position, frame).

        Truncates a torn tail of the newest segment. Call once, before appending.
        """
        existing = self.segments()
        for seg in existing:
            path = self._path(seg)
            data = path.read_bytes()
            pos = 0
            while pos + _REC.size <= len(data):
                n, crc = _REC.unpack_from(data, pos)
                start = pos + _REC.size
                block = data[start : start + n]
                if len(block) != n or zlib.crc32(block) != crc:
                    break
                frames = _frames_of(block)
                if frames is None:  # a good CRC over bytes that are not frames
                    break
                base = (seg << SEGMENT_SHIFT) | start
                for offset, frame in frames:
                    yield base + offset, frame
                pos = start + n
            if pos < len(data):
                if seg == existing[-1]:
                    log.warning("journal: truncating torn tail of segment %d at %d", seg, pos)
                    with path.open("r+b") as f:
                        f.truncate(pos)
                        os.fsync(f.fileno())
                else:
                    self.corrupt_records += 1
                    log.error("journal: corrupt record in segment %d at offset %d", seg, pos)
        self._segment = (existing[-1] + 1) if existing else 0

    def _open_next(self) -> None:
        if self._file is not None:
            os.close(self._file)
            self._segment += 1
        path = self._path(self._segment)
        self._file = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._offset = os.fstat(self._file).st_size
        self._opened_at = time.monotonic()
        _fsync_dir(self.directory)

    @property
    def active_segment(self) -> int:
        """The segment appends go to (it is never deleted)."""
        return self._segment

    def roll_due(self, max_age_s: float) -> bool:
        """Whether the active segment is older than ``max_age_s`` and not empty."""
        return self._offset > 0 and time.monotonic() - self._opened_at >= max_age_s

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

    def append_blocks(self, blocks: list[bytes]) -> list[int]:
        """Append each block of length-prefixed frames as one record, make them durable.

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
        for block in blocks:
            parts.append(_REC.pack(len(block), zlib.crc32(block)))  # crc32: GIL released
            parts.append(block)
            bases.append((self._segment << SEGMENT_SHIFT) | (offset + _REC.size))
            offset += _REC.size + len(block)
        view = memoryview(b"".join(parts))
        while view:
            written = os.write(self._file, view)
            view = view[written:]
        if self._fsync:
            os.fdatasync(self._file)
        self._offset = offset
        return bases

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


def _frames_of(block: bytes) -> list[tuple[int, bytes]] | None:
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
        out.append((pos, frame))
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


#: The aggregator's entry: (base position, frames) of each block made durable.
Sink = Callable[[list[tuple[int, Received]]], None]


class JournalWriter:
    """The one thread that appends to the journal (group commit) and then hands frames
    to ``sink`` (the aggregator) and calls each submitter's ``done(n)``."""

    def __init__(
        self, journal: Journal, sink: Sink, *, batch_max: int, queue_max: int, roll_s: float
    ) -> None:
        self._journal = journal
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
    ) -> bool:
        """Queue received frames; ``done(received.events)`` runs once they are durable
        (at once for an empty one, in queue order).

        Returns:
            False when the queue is full and ``block`` is false (the caller drops).
        """
        try:
            self._queue.put(_Submission(received, done), block=block, timeout=None)
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
            if self._journal.roll_due(self._roll_s) or self.roll_requested.is_set():
                self.roll_requested.clear()
                self._journal.roll()
            full = [s.received for s in batch if s.received.events]
            if full:
                try:
                    bases = self._journal.append_blocks([r.data for r in full])
                except OSError as e:  # disk full, I/O error: nothing acknowledged, stop
                    log.critical("journal: append failed, intake stops: %s", e)
                    self.failed = e
                    return
                self._sink(list(zip(bases, full, strict=True)))
            for s in batch:
                if s.done is not None:
                    s.done(s.received.events)
