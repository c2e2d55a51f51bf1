"""The consumer library's pure parts: ranges, filters and chunk order, the bounded
ordered prefetch, errors, the position file, node lists, the CLI's JSON."""

from __future__ import annotations

import json
import pickle
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from consumer_lib import ChunkMissing, ConsumerError, EpochRange, InvalidArgument, PositionError
from consumer_lib.cli import dumps
from consumer_lib.discovery import configured_nodes
from consumer_lib.pipeline import prefetch
from consumer_lib.ranges import epoch_of, parse_when
from consumer_lib.tail import Position
from consumer_lib.types import ChunkFilter
from eventstore.names import parse_metadata

pytestmark = pytest.mark.unit

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


def test_filter_is_applied_to_metadata_and_gives_chunk_order() -> None:
    refs = parse_metadata("web:app:10|web:app:2|web:app:0|lb::0|cron:x:1|web.api:v2:0")
    assert [r.format() for r in refs][:3] == ["cron:x:1", "lb::0", "web.api:v2:0"]
    everything = ChunkFilter.of()
    assert [r.format() for r in everything.select(refs)] == [
        "cron:x:1",
        "lb::0",
        "web:app:0",
        "web:app:2",
        "web:app:10",  # chunk number order, not byte order
        "web.api:v2:0",
    ]
    assert [r.format() for r in ChunkFilter.of("web*").select(refs)] == [
        "web:app:0",
        "web:app:2",
        "web:app:10",
        "web.api:v2:0",
    ]
    assert [r.format() for r in ChunkFilter.of(subtypes=[""]).select(refs)] == ["lb::0"]
    assert ChunkFilter.of(["lb", "cron"], "x").keeps("cron", "x")
    with pytest.raises(InvalidArgument):
        ChunkFilter.of([1])  # type: ignore[list-item]


def test_prefetch_keeps_order_and_bounds_the_work_ahead() -> None:
    lock = threading.Lock()
    started: list[int] = []
    handed = 0
    ahead = 0

    def work(i: int) -> int:
        nonlocal ahead
        with lock:
            started.append(i)
            ahead = max(ahead, len(started) - handed)
        time.sleep(0.001 * (i % 3))  # finish out of order
        return i * i

    with ThreadPoolExecutor(4) as pool:
        out = []
        for item, result in prefetch(range(200), work, pool, 5):
            out.append((item, result))
            handed += 1
    assert out == [(i, i * i) for i in range(200)]
    assert ahead <= 5  # never more than `depth` items worked but not handed back


def test_prefetch_markers_pass_through_and_errors_come_in_order() -> None:
    def work(i: object) -> object:
        if i == 3:
            raise ChunkMissing("gone", key="k3")
        return i

    with ThreadPoolExecutor(2) as pool:
        stream = prefetch(["m", 1, 2, "m", 3, 4], work, pool, 3, is_marker=lambda i: i == "m")
        assert [next(stream) for _ in range(4)] == [("m", None), (1, 1), (2, 2), ("m", None)]
        with pytest.raises(ChunkMissing):
            next(stream)


def test_errors_have_one_root_and_name_epoch_dc_key() -> None:
    error = ChunkMissing("chunk listed in metadata is missing", epoch=5, dc="d", key="5:d:t::0")
    assert isinstance(error, ConsumerError)
    assert str(error) == (
        "chunk listed in metadata is missing (epoch=5 (1970-01-01T00:00:05Z), dc=d, key=5:d:t::0)"
    )
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), again.epoch, again.dc, again.key) == (ChunkMissing, 5, "d", "5:d:t::0")
    assert issubclass(InvalidArgument, ValueError) and not ChunkMissing.retriable


def test_position_file_round_trip_and_refusals(tmp_path: Path) -> None:
    position = Position(tmp_path / "p.json", "dc1")
    assert position.load() is None
    position.save(123)
    assert position.load() == 123
    assert not list(tmp_path.glob(".*tmp"))
    assert json.loads((tmp_path / "p.json").read_text())["dc"] == "dc1"
    with pytest.raises(PositionError):
        Position(tmp_path / "p.json", "dc2").load()
    (tmp_path / "p.json").write_text("{not json")
    with pytest.raises(PositionError):
        position.load()
    with pytest.raises(PositionError):
        Position(tmp_path / "missing-dir" / "p.json", "dc1").save(1)


def test_node_lists_and_cli_json() -> None:
    assert configured_nodes(["http://a:1/", "http://a:1", " http://b:2 "]) == (
        "http://a:1",
        "http://b:2",
    )
    for bad in ([], ["a:1"], [" "]):
        with pytest.raises(InvalidArgument):
            configured_nodes(bad)
    assert json.loads(dumps({"t": b"caf\xc3\xa9", "b": b"\xff", "s": (1, 2)})) == {
        "t": "café",
        "b": {"$base64": "/w=="},
        "s": [1, 2],
    }
