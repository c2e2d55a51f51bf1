"""The node's bounded queue of chunks to process, shared by every gunicorn worker.

The hook sends one key group per node and epoch-dc, so one POST (answered by one
worker) carries every chunk of the node. A queue per worker would leave the other
workers idle while that one works through the group. The inbox is a pipe created in
the gunicorn master before it forks the workers: every worker inherits both ends, any
worker writes the keys it received, and whichever chunk thread is free reads the next
one.

Records have a fixed size (``RECORD_BYTES``, below ``PIPE_BUF``), so each write is
atomic and each read returns exactly one record whichever process reads. The pipe's
capacity bounds the queue: a write that would block (``EAGAIN``) or would take the
depth over ``capacity`` is refused and the caller sheds the key.

Failure semantics: records are lost with the pipe (the master stops). A worker that
dies between reading a record and storing results loses that chunk (the auditor or the
consumer's fallback covers it). The depth check and the write are not atomic across
workers, so the queue may briefly hold a few records over ``capacity``, never more than
the pipe holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import struct
import termios
from dataclasses import dataclass
from pathlib import Path

from eventstore.names import ChunkKey

log = logging.getLogger(__name__)

__all__ = ["RECORD_BYTES", "Inbox", "InboxItem"]

#: One record: arrival and deadline (CLOCK_MONOTONIC, the same in every process of the
#: machine), the key's length (its top bit: the auditor sent it), the key, zero padding.
RECORD_BYTES = 256
_HEAD = struct.Struct(">ddH")
_AUDIT_BIT = 0x8000
_MAX_KEY_BYTES = RECORD_BYTES - _HEAD.size
#: Pipe capacities are set in pages; Linux lets unprivileged users go up to
#: /proc/sys/fs/pipe-max-size (1 MiB by default).
_PAGE = 4096


@dataclass(frozen=True)
class InboxItem:
    """One chunk waiting: its key, when it arrived, when it must have started, and
    whether the auditor sent it (then only its missing results are written)."""

    key: ChunkKey
    arrived: float
    deadline: float
    audit: bool = False


class Inbox:
    """A bounded, multi-process queue of chunk keys over one pipe.

    Args:
        capacity: most records waiting; the pipe is sized to hold at least this many
            when the system allows, else ``capacity`` shrinks to what it holds.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"inbox capacity must be at least 1, not {capacity}")
        self._read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        wanted = max(_PAGE, -(-capacity * RECORD_BYTES // _PAGE) * _PAGE)
        size = _set_pipe_size(self._write_fd, wanted)
        self.capacity = min(capacity, size // RECORD_BYTES)
        if self.capacity < capacity:
            log.warning(
                "companion inbox: the pipe holds %d chunks, not %d (raise fs.pipe-max-size)",
                self.capacity,
                capacity,
            )

    def put(self, item: InboxItem) -> bool:
        """Queue ``item`` without blocking; False when the inbox is full.

        Raises:
            ValueError: the key is longer than a record holds.
        """
        key = item.key.format().encode()
        if len(key) > _MAX_KEY_BYTES:
            raise ValueError(f"chunk key {item.key} is over {_MAX_KEY_BYTES} bytes")
        if self.depth() >= self.capacity:
            return False
        flags = _AUDIT_BIT if item.audit else 0
        record = _HEAD.pack(item.arrived, item.deadline, len(key) | flags) + key
        try:
            os.write(self._write_fd, record.ljust(RECORD_BYTES, b"\0"))
        except BlockingIOError:
            return False
        return True

    def get(self, timeout_s: float) -> InboxItem | None:
        """The next item, waiting up to ``timeout_s``; None when there is none (or
        another reader took it first)."""
        poller = select.poll()
        poller.register(self._read_fd, select.POLLIN)
        if not poller.poll(max(0, int(timeout_s * 1000))):
            return None
        try:
            record = os.read(self._read_fd, RECORD_BYTES)
        except BlockingIOError:
            return None
        if len(record) != RECORD_BYTES:  # cannot happen with whole-record writes
            log.error("companion inbox: dropped a partial record of %d bytes", len(record))
            return None
        arrived, deadline, field = _HEAD.unpack_from(record)
        length = field & ~_AUDIT_BIT
        key = ChunkKey.parse(record[_HEAD.size : _HEAD.size + length].decode())
        return InboxItem(key, arrived, deadline, bool(field & _AUDIT_BIT))

    def depth(self) -> int:
        """Records waiting now (in the whole node)."""
        buffer = bytearray(4)
        fcntl.ioctl(self._read_fd, termios.FIONREAD, buffer)
        return int.from_bytes(buffer, "little") // RECORD_BYTES

    def drain(self) -> int:
        """Read and drop every waiting record; returns how many."""
        dropped = 0
        while True:
            try:
                record = os.read(self._read_fd, RECORD_BYTES)
            except BlockingIOError:
                return dropped
            if not record:
                return dropped
            dropped += 1

    def close(self) -> None:
        """Close both ends (in this process)."""
        for fd in (self._read_fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _set_pipe_size(fd: int, wanted: int) -> int:
    """Grow the pipe to ``wanted`` bytes, or as far as allowed; returns its size."""
    try:
        limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except (OSError, ValueError):
        limit = 1 << 20
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(wanted, limit))
    return fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
