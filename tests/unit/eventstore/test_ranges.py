"""The one range syntax (eventstore.ranges), the click options built on it
(eventstore.options.cli_range) and the consumer library's names for it
(consumer_lib.ranges, raising InvalidArgument)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import click
import pytest

import consumer_lib.ranges
from consumer_lib.errors import InvalidArgument
from eventstore import ranges
from eventstore.errors import EventStoreError, InvalidRange
from eventstore.options import cli_range

NOW = 1_700_000_000.0

BAD: list[Callable[[Any], object]] = [
    lambda m: m.EpochRange(3, 2),
    lambda m: m.EpochRange(-1, 2),
    lambda m: m.EpochRange.of(5, 4),
    lambda m: m.epoch_of(-1),
    lambda m: m.epoch_of(True),
    lambda m: m.epoch_of(datetime(2026, 1, 1)),
    lambda m: m.parse_when("yesterday", now=NOW),
]


@pytest.mark.parametrize("bad", BAD)
def test_eventstore_ranges_raise_invalid_range(bad: Callable[[Any], object]) -> None:
    with pytest.raises(InvalidRange) as e:
        bad(ranges)
    assert isinstance(e.value, EventStoreError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize("bad", BAD)
def test_consumer_lib_ranges_raise_invalid_argument(bad: Callable[[Any], object]) -> None:
    with pytest.raises(InvalidRange) as store:
        bad(ranges)
    with pytest.raises(InvalidArgument) as consumer:
        bad(consumer_lib.ranges)
    assert str(consumer.value) == str(store.value)


def test_both_read_the_same_forms() -> None:
    for text in ("1699999999", "now", "now-15m", "2023-11-14T22:13:20Z", "2023-11-14T22:13:20"):
        assert consumer_lib.ranges.parse_when(text, now=NOW) == ranges.parse_when(text, now=NOW)
    assert consumer_lib.ranges.EpochRange.of(1, "3") == consumer_lib.ranges.EpochRange(1, 3)
    assert isinstance(consumer_lib.ranges.EpochRange(1, 3), ranges.EpochRange)


def test_cli_range_is_start_inclusive_end_exclusive_and_names_the_bad_option() -> None:
    assert cli_range("now-10", "now", now=NOW) == ranges.EpochRange(1_699_999_990, 1_700_000_000)
    with pytest.raises(click.BadParameter, match="ends before it starts") as e:
        cli_range("20", "10", now=NOW)
    assert e.value.param_hint == "--end"
    with pytest.raises(click.BadParameter, match="not an epoch, an ISO datetime") as e:
        cli_range("soon", "10", now=NOW)
    assert e.value.param_hint == "--start"
