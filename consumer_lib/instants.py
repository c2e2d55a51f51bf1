"""How the consumer library names an epoch in its messages and errors: the number, then
its UTC instant, ``1700000000 (2023-11-14T22:13:20Z)``. The one place that formats it
(re-exported by :mod:`consumer_lib.ranges`). Pure, no I/O, imports nothing of ours (the
errors module uses it too)."""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["range_text", "utc", "when_text"]


def utc(epoch: int) -> str:
    """The epoch as an ISO-8601 UTC instant to the second, ``2023-11-14T22:13:20Z``."""
    try:
        return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return "beyond the calendar"


def when_text(epoch: int) -> str:
    """``1700000000 (2023-11-14T22:13:20Z)``: how every consumer message names an epoch."""
    return f"{epoch} ({utc(epoch)})"


def range_text(start: int, end: int) -> str:
    """``[start, end)`` with both bounds named by :func:`when_text`."""
    return f"[{when_text(start)}, {when_text(end)})"
