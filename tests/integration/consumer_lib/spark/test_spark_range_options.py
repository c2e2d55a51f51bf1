"""The source options ``start``/``end`` take every range form the CLI and consumer_lib
take: epochs, ISO-8601 (UTC without a zone; an end inside an epoch includes it),
``now`` and ``now-5m``, as ``[start, end)`` (issue 14)."""

from __future__ import annotations

import random
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pytestmark = [
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]

BASE = {"nodes": "http://x:1", "dc": "ams1"}
T = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
E = int(T.timestamp())


def test_source_options_take_iso_and_relative_bounds() -> None:
    from consumer_lib.spark import SourceOptions, SparkSourceError

    def parse(start: str, end: str) -> tuple[int, int]:
        o = SourceOptions.parse({**BASE, "start": start, "end": end})
        return o.start, o.end

    assert parse("2026-11-22T10:00:00Z", "2026-11-22T10:05:00+00:00") == (E, E + 300)
    assert parse("2026-11-22T11:00:00+01:00", "2026-11-22 10:00:01") == (E, E + 1)  # no zone: UTC
    assert parse(str(E), "2026-11-22T10:00:00.5Z") == (E, E + 1)  # the end's epoch is read
    assert parse(str(T), T.isoformat()) == (E, E)  # str(datetime), as load_events passes it
    start, end = parse("now-5m", "now")
    assert end - start in (300, 301) and abs(end - time.time()) < 60
    with pytest.raises(SparkSourceError, match=r"option 'start': 'yesterday' is not an epoch"):
        parse("yesterday", "now")
    with pytest.raises(SparkSourceError, match=r"option 'end': '2026-13-01' is not"):
        parse("now", "2026-13-01")
    with pytest.raises(SparkSourceError, match=r"option 'end' \d+ is before start"):
        parse("2026-11-22T10:00:01Z", "2026-11-22T10:00:00Z")


def test_stream_options_read_a_relative_start_once() -> None:
    from consumer_lib.spark.stream import StreamOptions

    until = datetime(2099, 1, 1, tzinfo=timezone.utc)
    stream, batch = StreamOptions.parse({**BASE, "start": "now-1m", "end": until.isoformat()})
    assert stream.start is not None and abs(stream.start - (time.time() - 60)) < 60
    assert stream.end == int(until.timestamp())
    # The slice readers get epochs, not the relative form read again later.
    assert batch["start"] == str(stream.start) and batch["end"] == str(stream.end)
    none, _ = StreamOptions.parse({**BASE})
    assert (none.start, none.end) == (None, None)


def test_load_events_with_datetime_and_iso_bounds_reads_the_epochs_range(
    spark: Any, session_devnode: Any, epoch_writer: Any
) -> None:
    from consumer_lib.spark import load_events

    dc = f"ro{random.randrange(10**9)}"
    start = 1_470_000_000 + random.randrange(10**5) * 10
    epoch_writer(dc, start, start + 3, seed=start)
    first = datetime.fromtimestamp(start, timezone.utc)
    url = session_devnode.url
    by_epochs = load_events(spark, nodes=url, dc=dc, start=start + 1, end=start + 3)
    by_dates = load_events(
        spark,
        nodes=url,
        dc=dc,
        start=first + timedelta(seconds=1),  # passed as str(datetime)
        end=(first + timedelta(seconds=2.5)).isoformat(),  # inside epoch start + 2
    )
    expected = sorted(tuple(r) for r in by_epochs.select("epoch", "chunk").collect())
    assert {e for e, _ in expected} == {start + 1, start + 2}
    assert sorted(tuple(r) for r in by_dates.select("epoch", "chunk").collect()) == expected
