"""Rate-limited log summaries: at most one line per key per interval, with a count.

Something that can happen thousands of times a minute (a retry against a node that is
down, an event rejected from a broken producer, an epoch a tail skips) is logged at
DEBUG each time by its caller and *noted* here; a :class:`LogSummary` writes one line
per key (a node, a reason, a dc) when the first occurrence is seen, then at most one
per ``interval_s``, saying how many occurred since the last line, over how long, and the
first and last details::

    retries = LogSummary(log, "riak: %(count)d retries on node %(key)s in the last "
                         "%(seconds).0f s; last error: %(last)s", interval_s=60)
    retries.note(node, str(error))

Counters are the exact record (every caller also counts into Prometheus); the log
line is for a person reading it. Occurrences noted after the last line are reported
by the next line that falls due for that key, or by :meth:`LogSummary.flush` (a
daemon calls it when it stops, so nothing it noted goes unsaid).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LogSummary"]


@dataclass
class _Pending:
    count: int = 0
    since: float = 0.0  # when the window started: the last line, or the first occurrence
    first: str = ""
    last: str = ""


class LogSummary:
    """One log line per key per ``interval_s`` summarising what was noted. Thread-safe.

    Args:
        logger: where the lines go.
        message: a %-format with named fields: ``key``, ``count`` (occurrences since the
            last line), ``seconds`` (the window they fell in), ``first`` and ``last``
            (the details given with the first and the last of them).
        interval_s: least time between two lines of one key, seconds.
        level: the level of the lines (``logging.WARNING``).
        clock: monotonic seconds (injected for tests).
    """

    def __init__(
        self,
        logger: logging.Logger,
        message: str,
        *,
        interval_s: float = 60.0,
        level: int = logging.WARNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_s < 0:
            raise ValueError(f"interval_s must not be negative, got {interval_s}")
        self._logger = logger
        self._message = message
        self._interval_s = interval_s
        self._level = level
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._last_line: dict[str, float] = {}

    def note(self, key: str, detail: str = "", n: int = 1) -> bool:
        """Count ``n`` occurrences under ``key``; write the key's line if one is due.

        Args:
            key: what the occurrences are grouped by (a node URL, a reason, a dc).
            detail: what this occurrence was (an error message, an epoch).
            n: how many occurrences this one stands for.

        Returns:
            Whether a line was written now.
        """
        if n <= 0:
            return False
        now = self._clock()
        with self._lock:
            pending = self._pending.get(key)
            if pending is None:
                last_line = self._last_line.get(key)
                pending = _Pending(since=now if last_line is None else last_line, first=detail)
                self._pending[key] = pending
            pending.count += n
            pending.last = detail
            last_line = self._last_line.get(key)
            if last_line is not None and now - last_line < self._interval_s:
                return False
            del self._pending[key]
            self._last_line[key] = now
        self._write(key, pending, now)
        return True

    def flush(self) -> int:
        """Write a line for every key with occurrences not yet reported, due or not.

        Returns:
            How many lines were written.
        """
        now = self._clock()
        with self._lock:
            pending, self._pending = self._pending, {}
            for key in pending:
                self._last_line[key] = now
        for key, p in pending.items():
            self._write(key, p, now)
        return len(pending)

    def _write(self, key: str, pending: _Pending, now: float) -> None:
        fields = {
            "key": key,
            "count": pending.count,
            "seconds": max(0.0, now - pending.since),
            "first": pending.first or "-",
            "last": pending.last or "-",
        }
        # One mapping argument: logging formats the named fields with it.
        self._logger.log(self._level, self._message, fields)
