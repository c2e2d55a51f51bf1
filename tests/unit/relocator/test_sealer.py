from __future__ import annotations

import array
import random

import pytest

import sereal_codec as sereal
from eventstore.blob import unpack_blob
from relocator.aggregator import Group
from relocator.errors import BadSpoolFile
from relocator.testing import numbered_sealer
from sereal_codec import compression, tags


def test_group_becomes_chunks_under_the_limit_with_writer_numbering() -> None:
    rng = random.Random(1)
    events = [{"i": i, "noise": rng.randbytes(200).hex()} for i in range(300)]
    g = Group(epoch=123, dc="ams1", close_at=0)
    g.docs[("web", "www")] = [sereal.encode(e) for e in events]
    g.docs[("lb", "")] = [sereal.encode({"x": 1})]
    g.positions = array.array("Q", range(301))
    g.segments = {0: 301}
    s, _ = numbered_sealer()
    b = s.seal(g)
    assert list(b.positions) == list(range(301)) and b.segments == {0}
    assert b.id == "0007-000000000040"
    assert all(len(v) <= 20_000 for v in b.values)
    assert len(b.keys) > 3
    assert b.keys[0].format() == f"123:ams1:lb::{7 * 10**15 + 40 * 10**4}"
    web = [k for k in b.keys if k.type == "web"]
    assert [k.chunk - web[0].chunk for k in web] == list(range(len(web)))
    got = [
        e for k, v in zip(b.keys, b.values, strict=True) if k.type == "web" for e in unpack_blob(v)
    ]
    assert got == events
    assert sum(b.events) == 301


def test_undecodable_and_oversized_events_are_dropped_and_counted() -> None:
    g = Group(epoch=1, dc="d", close_at=0)
    big = {"blob": random.Random(2).randbytes(40_000).hex()}
    g.docs[("t", "")] = [sereal.encode({"a": 1}), b"not sereal", sereal.encode(big)]
    g.positions = array.array("Q", [1, 2, 3])
    s, m = numbered_sealer()
    b = s.seal(g)
    assert [e for v in b.values for e in unpack_blob(v)] == [{"a": 1}]
    assert m.dropped.labels("undecodable")._value.get() == 1
    assert m.dropped.labels("oversized")._value.get() == 1


def test_spool_blob_is_split_and_numbering_can_be_imposed() -> None:
    events = [{"id": i, "pad": "z" * (i % 90)} for i in range(2000)]
    s, _ = numbered_sealer(chunk_max_bytes=8_000)
    b = s.seal_spool(
        "x.srl",
        sereal.encode(events),
        epoch=9,
        dc="d",
        type_="cron",
        subtype="batch",
        seq=5,
        writer_id=2,
    )
    assert b.id == "0002-000000000005"
    assert b.spool == "x.srl"
    assert [e for v in b.values for e in unpack_blob(v)] == events
    assert b.keys[0].chunk == 2 * 10**15 + 5 * 10**4


def test_spool_blob_that_is_not_an_array_is_refused() -> None:
    s, _ = numbered_sealer()
    with pytest.raises(BadSpoolFile):
        s.seal_spool("x.srl", sereal.encode({"a": 1}), epoch=9, dc="d", type_="t", subtype="")
    with pytest.raises(BadSpoolFile):
        s.seal_spool("x.srl", b"garbage", epoch=9, dc="d", type_="t", subtype="")


def test_spool_blob_that_already_fits_is_stored_verbatim() -> None:
    events = [{"id": i, "job": "billing"} for i in range(500)]
    for compress in ("zlib", "zstd", None):
        blob = sereal.encode(events, compress=compress, protocol=4)
        s, _ = numbered_sealer(chunk_max_bytes=len(blob) + 16)
        b = s.seal_spool("x.srl", blob, epoch=1, dc="d", type_="t", subtype="")
        assert len(b.values) == 1 and b.events == (500,)
        assert b.values[0][:-16] == blob  # same bytes plus our checksum postfix
        assert unpack_blob(b.values[0]) == events
        # one byte less room: cut and re-encoded instead, same events
        s, _ = numbered_sealer(chunk_max_bytes=len(blob) + 15)
        b = s.seal_spool("x.srl", blob, epoch=1, dc="d", type_="t", subtype="")
        assert [e for v in b.values for e in unpack_blob(v)] == events
    old = sereal.encode(events, compress="zlib", protocol=3)  # protocol 3: re-encoded
    s, _ = numbered_sealer(chunk_max_bytes=10**6)
    b = s.seal_spool("x.srl", old, epoch=1, dc="d", type_="t", subtype="")
    assert b.values[0][:-16] != old
    assert [e for v in b.values for e in unpack_blob(v)] == events


_COMPRESSED_TYPES = sorted(
    name for name in vars(tags) if name.startswith("TYPE_") and name != "TYPE_RAW"
)


@pytest.mark.parametrize("name", _COMPRESSED_TYPES)
def test_every_compressed_type_is_opened_with_the_event_cap(name: str) -> None:
    """The sealer opens an event of each compressed type tags.py names through the
    document layer, capped at max_event_bytes: within the cap it is stored (a hash) or
    dropped as not_a_dict (a list, seen only once opened); over it, too_large."""
    doc_type = getattr(tags, name)
    protocol = 1 if doc_type == tags.TYPE_SNAPPY else tags.PROTOCOLS[-1]
    head = (tags.MAGIC_V1 if protocol < 3 else tags.MAGIC_V3) + bytes(
        ((doc_type << 4) | protocol, 0)
    )
    level = compression.DOC_TYPES[doc_type].default_level

    def doc(body: bytes) -> bytes:
        return head + compression.frame_body(doc_type, body, level)

    text = b"\x26\x80\x08" + b"a" * 1024  # BINARY of 1024 bytes
    key = bytes((tags.SHORT_BINARY_LOW + 1,)) + b"k"
    hash_body = bytes((tags.REFN, tags.HASH, 1)) + key + text
    list_body = bytes((tags.REFN, tags.ARRAY, 1)) + text
    cap = len(hash_body) + 10
    big_body = bytes((tags.REFN, tags.HASH, 1)) + key + b"\x26\x80\x10" + b"a" * 2048
    s, m = numbered_sealer(writer_id=1, first_seq=1, chunk_max_bytes=200_000, max_event_bytes=cap)
    g = Group(epoch=5, dc="ams1", close_at=0)
    g.docs[("web", "")] = [doc(hash_body), doc(list_body), doc(big_body)]
    g.positions = array.array("Q", range(3))
    g.segments = {0: 3}
    batch = s.seal(g)
    assert [e for v in batch.values for e in unpack_blob(v)] == [{"k": "a" * 1024}]
    count = m.registry.get_sample_value
    assert count("relocator_events_dropped_total", {"reason": "not_a_dict"}) == 1
    assert count("relocator_events_dropped_total", {"reason": "too_large"}) == 1
