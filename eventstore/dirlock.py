"""An exclusive lock on a daemon's data directory: one process per directory.

Every daemon that owns a directory (the devnode's store, the relocator's journal and
state, the companion's plugin and scratch files) calls :func:`lock_directory` once at
start and keeps the returned :class:`DirectoryLock` for its whole life. A second process
started on the same directory gets :class:`DirectoryLocked`, whose message names the
directory and the pid that holds it.

The lock is ``flock(LOCK_EX | LOCK_NB)`` on ``<dir>/.lock``. The kernel releases it when
the holder's last descriptor closes, so a process killed with SIGKILL never leaves a
stale lock behind (unlike a pid file). The pid written into the file is informational
only, for the error message. ``fork`` children inherit the descriptor and with it the
lock (gunicorn workers, the companion's sandbox children): a directory stays locked
while any process of the daemon lives, which is what we want.

Failure semantics: raises :class:`DirectoryLocked` when another open file description
holds the lock; ``OSError`` (no permission, read-only filesystem) passes through.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from eventstore.errors import EventStoreError

__all__ = ["LOCK_NAME", "DirectoryLock", "DirectoryLocked", "lock_directory"]

LOCK_NAME = ".lock"


class DirectoryLocked(EventStoreError):
    """Another live process holds the data directory's lock.

    Args:
        directory: the data directory.
        holder_pid: the pid recorded by the holder, or None when unreadable.
    """

    def __init__(self, directory: Path, holder_pid: int | None) -> None:
        self.directory = directory
        self.holder_pid = holder_pid
        who = f"process {holder_pid}" if holder_pid is not None else "another process"
        super().__init__(
            f"data directory {str(directory)!r} is in use by {who}; "
            "stop it first or give this process its own directory"
        )

    def __reduce__(self) -> tuple[type[DirectoryLocked], tuple[Path, int | None]]:
        return (type(self), (self.directory, self.holder_pid))


class DirectoryLock:
    """A held lock; :meth:`release` (or leaving the ``with`` block) gives it back."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> DirectoryLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _read_pid(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().strip() or "x")
    return None


def lock_directory(directory: str | os.PathLike[str]) -> DirectoryLock:
    """Create ``directory`` if needed and lock it exclusively for this process.

    Raises:
        DirectoryLocked: another process holds it.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise DirectoryLocked(root, _read_pid(path)) from None
        raise
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return DirectoryLock(root, fd)
