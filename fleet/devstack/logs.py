"""One merged log of every process of the dev stack, a prefix per process.

Each daemon writes its own log file (the harnesses append stdout and stderr there);
:class:`LogMerger` follows those files from the size they had when added, like
``tail -F``, and writes each complete line as ``<name> | <line>`` to one stream, so
the terminal of ``dev up`` shows everything in one place while each file keeps its own
record. One thread polls every file; a file that does not exist yet is waited for.

Failure semantics: a file that cannot be read is retried at the next poll; the stream
failing (a closed terminal) stops the merger, never the stack.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

__all__ = ["LogMerger"]


@dataclass
class _Followed:
    name: str
    path: Path
    offset: int
    keep: Callable[[str], bool] | None = None
    partial: bytes = b""


class LogMerger:
    """Follows log files and writes their new lines, prefixed, to ``out``.

    Args:
        out: where the merged lines go (a terminal, or the detached stack's log file).
        interval_s: seconds between two polls of the files.
    """

    def __init__(self, out: TextIO, *, interval_s: float = 0.2) -> None:
        self._out = out
        self._interval_s = interval_s
        self._files: list[_Followed] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._width = 9
        self._thread = threading.Thread(target=self._run, name="dev-log-merger", daemon=True)

    def follow(self, name: str, path: Path, keep: Callable[[str], bool] | None = None) -> None:
        """Follow ``path`` from its current end (from its start if it does not exist yet);
        with ``keep``, only the lines it accepts are shown (the file keeps them all)."""
        offset = path.stat().st_size if path.exists() else 0
        with self._lock:
            self._files.append(_Followed(name, path, offset, keep))
            self._width = max(self._width, len(name))

    def say(self, name: str, text: str) -> None:
        """Write ``text`` (each of its lines) with ``name``'s prefix, now."""
        for line in text.splitlines() or [""]:
            self._write(f"{name:<{self._width}} | {line}")

    def start(self) -> LogMerger:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Write what is left, then stop following."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        self.poll()

    def poll(self) -> None:
        """Write the new complete lines of every file (once)."""
        with self._lock:
            files = list(self._files)
        for followed in files:
            for line in self._read_new(followed):
                if followed.keep is None or followed.keep(line):
                    self._write(f"{followed.name:<{self._width}} | {line}")

    def _read_new(self, followed: _Followed) -> list[str]:
        try:
            size = followed.path.stat().st_size
            if size < followed.offset:  # truncated or replaced: start again
                followed.offset, followed.partial = 0, b""
            if size == followed.offset:
                return []
            with followed.path.open("rb") as f:
                f.seek(followed.offset)
                data = f.read(size - followed.offset)
        except OSError:
            return []
        followed.offset += len(data)
        *lines, followed.partial = (followed.partial + data).split(b"\n")
        return [line.decode(errors="replace").rstrip("\r") for line in lines]

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._out.write(text + "\n")
            self._out.flush()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.poll()
