"""Epoch ranges in the consumer library: start inclusive, end exclusive, the forms of a
bound (consumer_lib.ranges, consumer_lib.types)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from consumer_lib import EpochRange, InvalidArgument
from consumer_lib.ranges import epoch_of, parse_when

UTC = timezone.utc


def test_ranges_start_inclusive_end_exclusive() -> None:
    assert list(EpochRange(10, 13)) == [10, 11, 12]
    assert len(EpochRange(5, 5)) == 0 and 5 not in EpochRange(5, 5)
    t = datetime.fromtimestamp(100, UTC)
    assert EpochRange.of(t, t + timedelta(seconds=3)) == EpochRange(100, 103)
    # instants inside an epoch: start rounds down, end rounds up
    assert EpochRange.of(t + timedelta(seconds=0.5), t + timedelta(seconds=2.5)) == EpochRange(
        100, 103
    )
    assert epoch_of(datetime(2026, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))) == epoch_of(
        datetime(2026, 1, 1, 0, 0, tzinfo=UTC)
    )
    for bad in (lambda: EpochRange(3, 2), lambda: epoch_of(-1), lambda: epoch_of(True)):
        with pytest.raises(InvalidArgument):
            bad()
    with pytest.raises(InvalidArgument, match="no timezone"):
        epoch_of(datetime(2026, 1, 1))


def test_parse_when_forms() -> None:
    now = 1_700_000_000.7
    assert parse_when("1699999999", now=now) == 1_699_999_999
    assert parse_when("now", now=now) == 1_700_000_000
    assert parse_when("now-90", now=now) == 1_699_999_910
    assert parse_when("now-15m", now=now) == 1_700_000_000 - 900
    assert parse_when("now-2h", now=now) == 1_700_000_000 - 7200
    assert parse_when("2023-11-14T22:13:20Z", now=now) == 1_700_000_000
    assert parse_when("2023-11-14T22:13:20", now=now) == 1_700_000_000  # no zone: UTC
    with pytest.raises(InvalidArgument):
        parse_when("yesterday", now=now)


def test_string_bounds_are_accepted_where_a_range_bound_is() -> None:
    # The README's own call: client.events("ams4", "2026-11-22T10:00:00+00:00", ...).
    start = epoch_of("2026-11-22T10:00:00+00:00")
    assert start == int(datetime(2026, 11, 22, 10, tzinfo=timezone.utc).timestamp())
    assert EpochRange.of("2026-11-22T10:00:00Z", "2026-11-22T10:00:02.5Z") == EpochRange(
        start, start + 3
    )  # an end inside an epoch includes that epoch, as for datetimes
    assert EpochRange.of("1700000000", 1_700_000_005) == EpochRange(1_700_000_000, 1_700_000_005)
    assert abs(epoch_of("now-5m") - (time.time() - 300)) < 5
    with pytest.raises(InvalidArgument, match="not an epoch, an ISO datetime"):
        epoch_of("yesterday")
    with pytest.raises(InvalidArgument, match="ends before it starts"):
        EpochRange.of("2026-11-22T10:00:05Z", "2026-11-22T10:00:00Z")
