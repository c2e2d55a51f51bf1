"""The write-ahead journal: every accepted frame, durable before it is acknowledged.

An append-only log of **segments** ``<data_dir>/journal/<n:012d>.seg``. A record is::

    length (u32 BE) | crc32 of payload (u32 BE) | payload (one frame)

A record's **position** is ``segment << 40 | offset``, increasing in write order.
``JournalWriter`` (a thread) takes frames from intake, appends as many as are queued
(<= ``batch_max``) with one ``write`` and one ``fdatasync`` (group commit), and only
then hands each frame to the aggregator and calls the intake's callback (the TCP ack).

Failure semantics: a crash can leave a torn record only at the end of the newest
segment; ``Journal.replay`` stops at the first record whose length or CRC is wrong in
the newest segment and truncates there (those frames were never acknowledged). A bad
CRC in an older segment is real corruption: it is logged with the position, the rest
of that segment is skipped and counted, never silently. Segments are deleted by
``Journal.delete`` once every record in them is inside a durable batch (``state.py``).

Measured against LMDB on this machine (bench/relocator_bench.py --journal-only): see
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

from relocator.wire import Frame

log = logging.getLogger(__name__)

_REC = struct.Struct(">II")
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

    def segments(self) -> list[int]:
        """Existing segment numbers, oldest first."""
        return sorted(int(p.stem) for p in self.directory.glob("*.seg") if p.stem.isdigit())

    def _path(self, segment: int) -> Path:
        return self.directory / f"{segment:012d}.seg"

    def replay(self) -> Iterator[tuple[int, bytes]]:
        """Every intact record of every segment, in order: (position, payload).

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
                payload = data[start : start + n]
                if len(payload) != n or zlib.crc32(payload) != crc:
                    break
                yield (seg << SEGMENT_SHIFT) | pos, payload
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
        """Append records, make them durable, return their positions.

        Raises:
            OSError: the write or fdatasync failed (nothing may be acknowledged).
        """
        if self._file is None or self._offset >= self._segment_max_bytes:
            self._open_next()
        assert self._file is not None
        # Per-record work in C iterators (map/accumulate), not bytecode: this runs for
        # every event, on the thread every acknowledgement waits for.
        lengths = list(map(len, payloads))
        heads = map(_REC.pack, lengths, map(zlib.crc32, payloads))
        data = b"".join(itertools.chain.from_iterable(zip(heads, payloads, strict=True)))
        ends = list(itertools.accumulate(map(_REC.size.__add__, lengths), initial=self._offset))
        offset = ends.pop()
        # offsets stay below 2**SEGMENT_SHIFT, so adding the segment is or-ing it in
        positions = list(map((self._segment << SEGMENT_SHIFT).__add__, ends))
        view = memoryview(data)
        while view:
            written = os.write(self._file, view)
            view = view[written:]
        if self._fsync:
            os.fdatasync(self._file)
        self._offset = offset
        return positions

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


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class _Submission:
    frames: list[bytes]
    parsed: list[Frame]
    done: Callable[[int], None] | None


Sink = Callable[[list[int], list[Frame]], None]


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
        frames: list[bytes],
        parsed: list[Frame],
        done: Callable[[int], None] | None,
        *,
        block: bool,
    ) -> bool:
        """Queue frames (and their parsed form, for the sink); ``done(len(frames))`` runs
        once they are durable.

        Returns:
            False when the queue is full and ``block`` is false (the caller drops).
        """
        try:
            self._queue.put(_Submission(frames, parsed, done), block=block, timeout=None)
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
                first = self._queue.get(timeout=0.2)
            except queue.Empty:
                first = _Submission([], [], None)
            batch: list[_Submission] = []
            count = 0
            item: _Submission | None = first
            while item is not None:
                batch.append(item)
                count += len(item.frames)
                if count >= self._batch_max:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if item is None:
                stopping = True
            frames = [f for s in batch for f in s.frames]
            parsed = [f for s in batch for f in s.parsed]
            if self._journal.roll_due(self._roll_s) or self.roll_requested.is_set():
                self.roll_requested.clear()
                self._journal.roll()
            if frames:
                try:
                    positions = self._journal.append(frames)
                except OSError as e:  # disk full, I/O error: nothing acknowledged, stop
                    log.critical("journal: append failed, intake stops: %s", e)
                    self.failed = e
                    return
                self._sink(positions, parsed)
            for s in batch:
                if s.done is not None:
                    s.done(len(s.frames))
