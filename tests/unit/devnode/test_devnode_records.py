"""The devnode's stored records and their location keys."""

from __future__ import annotations

import pytest

from devnode import records
from devnode.errors import InvalidRequest
from devnode.records import StoredObject


def test_record_round_trip() -> None:
    obj = StoredObject(
        value=b"\x00\xff" * 1000,
        content_type="application/x-sereal",
        charset="utf-8",
        usermeta=(("x-riak-meta-a", "1"),),
        vclock="vc",
        vtag="tag",
        write_time_ms=123,
        purge_at_ms=456,
        tombstone=False,
    )
    raw = records.encode(obj)
    assert records.decode(raw) == obj
    assert records.decode(memoryview(raw)) == obj
    assert records.decode_times(raw) == (123, 456, False)
    with pytest.raises(ValueError, match="format"):
        records.decode(b"\x09" + raw[1:])


def test_location_keys() -> None:
    key = records.location_key("events", "events", "1413813813:1:t:s:0")
    assert records.split_location_key(key) == ("events", "events", "1413813813:1:t:s:0")
    assert records.location_key("a", "bc", "d") != records.location_key("ab", "c", "d")
    assert records.split_purge_key(records.purge_key(99, key)) == (99, key)
    assert records.purge_key(1, key) < records.purge_key(2, b"")
    with pytest.raises(InvalidRequest, match="limit"):
        records.location_key("t", "b", "k" * 600)
