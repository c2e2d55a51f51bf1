"""Epoch ranges for the consumer library: :mod:`eventstore.ranges`, raising
:class:`~consumer_lib.errors.InvalidArgument`.

The forms a bound may take, the rounding and ``[start, end)`` are those of
:mod:`eventstore.ranges`, the one range syntax every command and library shares (it
lives in ``eventstore`` so that the substreams CLI, below the consumer library, reads
ranges the same way). This module keeps the consumer library's names and its promise
that it raises only ``ConsumerError``: each ``InvalidRange`` becomes an
``InvalidArgument`` (a ``ValueError`` too) with the same message.

Pure logic, no I/O.
"""

from __future__ import annotations

from consumer_lib.errors import InvalidArgument
from consumer_lib.instants import range_text, utc, when_text
from eventstore import ranges
from eventstore.errors import InvalidRange
from eventstore.ranges import When

__all__ = ["EpochRange", "When", "epoch_of", "parse_when", "range_text", "utc", "when_text"]


def epoch_of(value: When, *, end: bool = False) -> int:
    """:func:`eventstore.ranges.epoch_of`.

    Raises:
        InvalidArgument: a negative epoch, a bool, a naive datetime, a string of no
            known form, another type.
    """
    try:
        return ranges.epoch_of(value, end=end)
    except InvalidRange as e:
        raise InvalidArgument(str(e)) from e


def parse_when(text: str, *, now: float) -> int:
    """:func:`eventstore.ranges.parse_when`.

    Raises:
        InvalidArgument: none of the forms a bound may take.
    """
    try:
        return ranges.parse_when(text, now=now)
    except InvalidRange as e:
        raise InvalidArgument(str(e)) from e


class EpochRange(ranges.EpochRange):
    """:class:`eventstore.ranges.EpochRange`: epochs ``start`` (inclusive) to ``end``
    (exclusive).

    Raises:
        InvalidArgument: ``end < start`` or a negative bound.
    """

    def __post_init__(self) -> None:
        try:
            super().__post_init__()
        except InvalidRange as e:
            raise InvalidArgument(str(e)) from e

    @classmethod
    def of(cls, start: When, end: When) -> EpochRange:
        """The epochs of ``[start, end)`` (see :mod:`eventstore.ranges`).

        Raises:
            InvalidArgument: a bound of no known form, or the range is backwards.
        """
        return cls(epoch_of(start), epoch_of(end, end=True))
