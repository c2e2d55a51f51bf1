"""The full stream through a real devnode: ranges, order, filters, missing epochs and
chunks, and errors that name what failed."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from consumer_helpers import sample_spec, write_epoch

from consumer_lib import (
    ChunkMissing,
    ConsumerError,
    EventsClient,
    InvalidArgument,
    StoreUnavailable,
)
from devnode.testing import free_port
from eventstore.riak import RiakClient

E0 = 1_700_000_000


def test_range_is_start_inclusive_end_exclusive_in_order_with_missing_epoch_empty(
    client: EventsClient, riak: RiakClient, dc: str
) -> None:
    written = {e: sample_spec(e) for e in (E0, E0 + 1, E0 + 3)}  # E0 + 2 has no metadata
    for e, spec in written.items():
        write_epoch([riak], e, dc, spec)
    got = list(client.epochs(dc, E0, E0 + 4))
    assert [(x.epoch, x.found) for x in got] == [
        (E0, True),
        (E0 + 1, True),
        (E0 + 2, False),
        (E0 + 3, True),
    ]
    assert got[2].chunks == ()
    first = got[0]
    # chunk order: (type, subtype) then chunk NUMBER, not the metadata's byte order
    names = [(c.key.type, c.key.subtype, c.key.chunk) for c in first.chunks]
    assert names == [("cron", "", 0), ("lb", "edge", 0)] + [("web", "app", n) for n in range(12)]
    spec = written[E0]
    assert first.events == [e for t in sorted(spec) for chunk in spec[t] for e in chunk]
    assert all(c.size_bytes > 0 and c.bad_nodes == () for c in first.chunks)
    # end exclusive, and datetimes give the same epochs
    as_dt = list(
        client.epochs(
            dc,
            datetime.fromtimestamp(E0, timezone.utc),
            datetime.fromtimestamp(E0 + 1.5, timezone.utc),  # holds part of E0 + 1
        )
    )
    assert [x.epoch for x in as_dt] == [E0, E0 + 1]
    assert [x.events for x in as_dt] == [got[0].events, got[1].events]
    assert list(client.epochs(dc, E0, E0)) == []


def test_filters_apply_before_fetching_and_events_are_tagged(
    client: EventsClient, riak: RiakClient, dc: str
) -> None:
    write_epoch([riak], E0, dc, sample_spec(E0, web_chunks=2))
    (epoch,) = client.epochs(dc, E0, E0 + 1, types=["web", "cron"], subtypes=[""])
    assert [c.key.format() for c in epoch.chunks] == [f"{E0}:{dc}:cron::0"]
    (epoch,) = client.epochs(dc, E0, E0 + 1, types="w*")
    assert {c.key.type for c in epoch.chunks} == {"web"}
    tagged = list(client.events(dc, E0, E0 + 1, types=["lb"]))
    assert [(t.epoch, t.dc, t.type, t.subtype, t.chunk) for t in tagged] == [
        (E0, dc, "lb", "edge", 0)
    ] * 2
    assert [t.event["i"] for t in tagged] == [0, 1]
    assert tagged[0].as_dict()["event"] == {"epoch": E0, "type": "lb", "i": 0}


def test_missing_chunk_listed_in_metadata_is_an_error_naming_the_key(
    client: EventsClient, riak: RiakClient, dc: str
) -> None:
    write_epoch([riak], E0, dc, sample_spec(E0, web_chunks=2))
    write_epoch([riak], E0 + 1, dc, sample_spec(E0 + 1, web_chunks=2))
    gone = f"{E0 + 1}:{dc}:web:app:1"
    riak.delete("events", "events", gone)
    stream = client.epochs(dc, E0, E0 + 2)
    assert next(stream).epoch == E0  # earlier epochs are delivered first
    with pytest.raises(ChunkMissing) as info:
        next(stream)
    assert (info.value.epoch, info.value.dc, info.value.key) == (E0 + 1, dc, gone)
    assert gone in str(info.value)


def test_riak_errors_do_not_leak() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with (
        EventsClient([dead], retry_max_tries=2, retry_deadline_s=1.0) as c,
        pytest.raises(StoreUnavailable) as info,
    ):
        list(c.epochs("dc1", E0, E0 + 1))
    assert isinstance(info.value, ConsumerError)
    assert info.value.key == f"{E0}-dc1" and info.value.epoch == E0
    assert info.value.retriable


def test_bad_arguments_are_refused_at_the_call(client: EventsClient) -> None:
    with pytest.raises(InvalidArgument):
        client.epochs("bad dc", E0, E0 + 1)
    with pytest.raises(InvalidArgument):
        client.epochs("dc1", E0 + 1, E0)
    with pytest.raises(InvalidArgument):
        client.epochs("dc1", datetime(2026, 1, 1), E0)  # naive datetime
    with pytest.raises(InvalidArgument):
        EventsClient([])
