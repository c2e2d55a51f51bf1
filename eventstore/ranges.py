"""Epoch ranges: ``start`` inclusive, ``end`` exclusive, given as epochs or datetimes.

An epoch is a unix second (UTC) and holds the events created in ``[epoch, epoch + 1)``.
A range ``[start, end)`` of instants therefore covers the epochs ``floor(start)`` up to
``ceil(end) - 1``: every epoch that holds an instant of the range. For whole seconds
that is simply ``start, start + 1, ..., end - 1``. Datetimes must be timezone-aware
(a naive datetime has no defined epoch; we refuse to guess the zone).

:func:`parse_when` reads the forms every command accepts: an epoch (``1700000000``), an
ISO 8601 datetime (``2026-11-22T03:00:00Z``; without a zone it is UTC), ``now``, and
``now-90`` / ``now-15m`` / ``now-2h`` / ``now-1d``. The click options built on it are
:func:`eventstore.options.cli_range` and :func:`eventstore.options.parse_bound`; the
consumer library re-exports these names from :mod:`consumer_lib.ranges`, raising its
own ``InvalidArgument`` instead of :class:`~eventstore.errors.InvalidRange`.

Pure logic, no I/O.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

from eventstore.errors import InvalidRange

__all__ = ["EpochRange", "When", "epoch_of", "parse_when"]

#: What a range bound may be: an epoch (int), an aware datetime, or a string in one of
#: the forms :func:`parse_when` reads (``"1700000000"``, ``"2026-11-22T10:00:00+00:00"``,
#: ``"now-5m"``; relative forms are taken against the current time).
When = int | datetime | str

_RELATIVE_RE = re.compile(r"now(?:-(\d+)([smhd]?))?")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def epoch_of(value: When, *, end: bool = False) -> int:
    """The epoch of a range bound.

    Args:
        value: an epoch (``int``, >= 0), a timezone-aware ``datetime``, or a string as
            :func:`parse_when` reads it (an ISO datetime without a zone is UTC).
        end: the bound is an exclusive end: a datetime inside an epoch rounds up, so
            the epoch holding it is included; a start rounds down.

    Returns:
        The epoch.

    Raises:
        InvalidRange: a negative epoch, a bool, a naive datetime, a string of no known
            form, another type.
    """
    if isinstance(value, str):
        return _parse(value, now=time.time(), end=end)
    if isinstance(value, bool) or not isinstance(value, int | datetime):
        raise InvalidRange(f"a range bound must be an int epoch, a datetime or a string: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise InvalidRange(f"epoch {value} is negative")
        return value
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidRange(f"datetime {value.isoformat()} has no timezone; give one (UTC)")
    seconds = value.timestamp()
    epoch = math.ceil(seconds) if end else math.floor(seconds)
    if epoch < 0:
        raise InvalidRange(f"datetime {value.isoformat()} is before 1970")
    return epoch


@dataclass(frozen=True)
class EpochRange:
    """Epochs ``start`` (inclusive) to ``end`` (exclusive).

    Raises:
        InvalidRange: ``end < start`` or a negative bound.
    """

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < 0:
            raise InvalidRange(f"epoch range [{self.start}, {self.end}) has a negative bound")
        if self.end < self.start:
            raise InvalidRange(f"epoch range [{self.start}, {self.end}) ends before it starts")

    @classmethod
    def of(cls, start: When, end: When) -> EpochRange:
        """The epochs of ``[start, end)`` given as epochs or aware datetimes (rounding
        described in the module docstring).

        Raises:
            InvalidRange: a bound of no known form, or the range is backwards.
        """
        return cls(epoch_of(start), epoch_of(end, end=True))

    def __len__(self) -> int:
        return self.end - self.start

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end))

    def __contains__(self, epoch: object) -> bool:
        return isinstance(epoch, int) and self.start <= epoch < self.end

    def __str__(self) -> str:
        return f"[{self.start}, {self.end})"


def parse_when(text: str, *, now: float) -> int:
    """Parse a range bound given as text into an epoch.

    Args:
        text: ``1700000000``, ``2026-11-22T03:00:00Z`` (no zone: UTC), ``now``,
            ``now-90``, ``now-15m``, ``now-2h``, ``now-1d``.
        now: the current unix time, seconds.

    Returns:
        The epoch (a datetime with a fraction rounds down).

    Raises:
        InvalidRange: none of those forms.
    """
    return _parse(text, now=now, end=False)


def _parse(text: str, *, now: float, end: bool) -> int:
    text = text.strip()
    if text.isdigit():
        return int(text)
    relative = _RELATIVE_RE.fullmatch(text)
    if relative:
        amount, unit = relative.groups()
        back = int(amount or 0) * _UNIT_S[unit or ""]
        return max(0, math.floor(now) - back)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidRange(
            f"{text!r} is not an epoch, an ISO datetime, 'now' or 'now-N[smhd]'"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return epoch_of(parsed, end=end)
