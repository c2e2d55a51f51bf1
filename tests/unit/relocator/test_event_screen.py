"""Bounded cost per input (issue 12.6): intake refuses a document whose compressed body
claims more than ``max_event_bytes`` and an event that is not a hash, from the
document's first bytes; the sealer opens compressed bodies with that cap and refuses
the same; both counted by reason, neighbours kept."""

from __future__ import annotations

import array
import logging
import random

import pytest
import zstandard

import sereal_codec as sereal
from eventstore.blob import unpack_blob
from relocator.aggregator import Group
from relocator.metrics import Metrics
from relocator.rejects import Rejections
from relocator.testing import numbered_sealer
from relocator.wire import (
    EV_COMPRESSED,
    EV_NOT_A_DICT,
    EV_OK,
    EV_TOO_LARGE,
    EV_UNREADABLE,
    LENGTH,
    FrameParser,
    encode_frame,
    event_verdict,
    event_verdicts,
    scan_stream,
)
from sereal_codec import compression

CAP = 10_000


def _raw(body: bytes, version: int = 4) -> bytes:
    magic = b"=srl" if version < 3 else b"=\xf3rl"
    return magic + bytes((version, 0)) + body


CASES: dict[str, tuple[bytes, int]] = {
    "dict": (sereal.encode({"a": 1}), EV_OK),
    "protocol 1 dict": (_raw(b"\x28\x2a\x00", version=1), EV_OK),
    "big dict": (sereal.encode({f"k{i}": i for i in range(40)}), EV_OK),
    "REFN HASH": (_raw(b"\x28\x2a\x01\x61a\x01"), EV_OK),
    "PAD REFN PAD HASH": (_raw(b"\x3f\x28\x3f\x2a\x00"), EV_OK),
    "WEAKEN REFN HASH": (_raw(b"\x30\x28\x2a\x00"), EV_OK),
    "tracked HASHREF": (_raw(b"\xd0"), EV_OK),
    "protocol 2 dict": (_raw(b"\x50", version=2), EV_OK),
    "list": (sereal.encode([1, 2]), EV_NOT_A_DICT),
    "string": (sereal.encode("hello"), EV_NOT_A_DICT),
    "int": (sereal.encode(7), EV_NOT_A_DICT),
    "none": (sereal.encode(None), EV_NOT_A_DICT),
    "REFN REFN HASH": (_raw(b"\x28\x28\x2a\x00"), EV_NOT_A_DICT),
    "REFN ARRAY": (_raw(b"\x28\x2b\x00"), EV_NOT_A_DICT),
    "object": (_raw(b"\x2c\x63Foo\x28\x2a\x00"), EV_NOT_A_DICT),
    "zstd small dict": (sereal.encode({"a": "x" * 5000}, compress="zstd"), EV_COMPRESSED),
    "zlib small dict": (sereal.encode({"a": "x" * 5000}, compress="zlib"), EV_COMPRESSED),
    "snappy small dict": (sereal.encode({"a": "x" * 5000}, compress="snappy"), EV_COMPRESSED),
    "zstd too large": (sereal.encode({"a": "x" * 50_000}, compress="zstd"), EV_TOO_LARGE),
    "zlib too large": (sereal.encode("x" * 50_000, compress="zlib"), EV_TOO_LARGE),
    "snappy too large": (sereal.encode(["x" * 50_000], compress="snappy"), EV_TOO_LARGE),
    "empty": (b"", EV_UNREADABLE),
    "not sereal": (b"hello world", EV_UNREADABLE),
    "header only": (_raw(b""), EV_UNREADABLE),
    "PADs only": (_raw(b"\x3f\x3f"), EV_UNREADABLE),
    "unknown type": (b"=\xf3rl" + bytes((0x54, 0)) + b"\x50", EV_UNREADABLE),
}


def _zstd_doc(body: bytes, *, content_size: bool = True) -> bytes:
    frame = zstandard.ZstdCompressor(write_content_size=content_size).compress(body)
    return b"=\xf3rl" + bytes((0x44, 0)) + compression.varint_bytes(len(frame)) + frame


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("compiled", [True, False], ids=["c", "python"])
def test_verdicts(name: str, compiled: bool) -> None:
    doc, want = CASES[name]
    assert event_verdicts([doc], CAP, compiled=compiled) == bytes((want,))
    assert event_verdict(doc, CAP) == want


def test_zstd_content_size_forms() -> None:
    # the content size field takes 1, 2, 4 or 8 bytes (2 with an offset of 256) or is absent
    for n in (10, 300, 70_000, 9_000):
        doc = _zstd_doc(b"\x50" + b"\0" * n)
        want = EV_TOO_LARGE if n + 1 > CAP else EV_COMPRESSED
        assert event_verdicts([doc], CAP) == bytes((want,)) == bytes((event_verdict(doc, CAP),))
    unknown = _zstd_doc(b"\x50" + b"\0" * 70_000, content_size=False)
    assert event_verdict(unknown, CAP) == EV_COMPRESSED  # no claim: the codec refuses it
    assert event_verdicts([unknown], CAP) == bytes((EV_COMPRESSED,))


def test_compiled_and_python_agree_on_mutated_documents() -> None:
    rng = random.Random(7)
    docs = [d for d, _ in CASES.values()] + [_zstd_doc(b"\x50" + b"\0" * 300)]
    mutated = []
    for _ in range(3000):
        d = bytearray(rng.choice(docs))
        if d and rng.random() < 0.7:
            for _ in range(rng.randrange(1, 4)):
                d[rng.randrange(len(d))] = rng.randrange(256)
        if rng.random() < 0.3:
            d = d[: rng.randrange(len(d) + 1)]
        mutated.append(bytes(d))
    cap = rng.choice((0, 5, 300, CAP))
    assert event_verdicts(mutated, cap) == event_verdicts(mutated, cap, compiled=False)


@pytest.mark.parametrize("compiled", [True, False], ids=["c", "python"])
def test_intake_rejects_too_large_and_non_dicts_and_keeps_neighbours(compiled: bool) -> None:
    docs = [
        sereal.encode({"id": 0}),
        sereal.encode({"a": "x" * 50_000}, compress="zstd"),  # 50 KB claimed, cap 10 KB
        sereal.encode({"id": 2}),
        sereal.encode("a string"),
        sereal.encode([1, 2, 3]),
        sereal.encode({"id": 5}, compress="zstd"),
        sereal.encode(12),
    ]
    stream = b"".join(
        LENGTH.pack(len(f)) + f for f in (encode_frame(9, "d", "web", "", d) for d in docs)
    )
    received, used = scan_stream(stream, CAP, FrameParser(), compiled=compiled)
    assert used == len(stream)
    assert (received.events, received.too_large, received.not_a_dict) == (3, 1, 3)
    assert received.rejected == 4
    assert [sereal.decode(d) for g in received.groups for d in g.documents] == [
        {"id": 0},
        {"id": 2},
        {"id": 5},
    ]


def test_sealer_opens_compressed_events_with_the_cap_and_refuses_non_dicts() -> None:
    docs = [
        sereal.encode({"id": 0}),
        sereal.encode({"id": 1, "pad": "y" * 3000}, compress="zstd"),
        sereal.encode(["a list"], compress="zstd"),  # only visible once opened
        sereal.encode({"big": "x" * 50_000}, compress="zlib"),  # claims 50 KB > cap
        sereal.encode("a string"),  # journaled by a version that did not check
        sereal.encode({"id": 5, "r": [{"x": "shared"}, "shared"]}, compress="snappy"),
        _zstd_doc(b"\x50" + b"\0" * 50_000, content_size=False),  # no claim: undecodable
        # protocol 1 Snappy, a COPY whose offset counts from the document start
        b"=srl\x11\x00" + compression.snappy_compress(b"\x52\x62id\x07\x61s\x2f\x07"),
    ]
    g = Group(epoch=5, dc="ams1", close_at=0)
    g.docs[("web", "")] = docs
    g.positions = array.array("Q", range(len(docs)))
    g.segments = {0: len(docs)}
    sealer, m = numbered_sealer(
        writer_id=1, first_seq=1, chunk_max_bytes=200_000, max_event_bytes=CAP
    )
    batch = sealer.seal(g)
    got = [e for v in batch.values for e in unpack_blob(v)]
    assert [e["id"] for e in got] == [0, 1, 5, 7]
    assert got[1]["pad"] == "y" * 3000 and got[2]["r"] == [{"x": "shared"}, "shared"]
    assert got[3] == {"id": 7, "s": "id"}
    assert list(batch.positions) == list(range(len(docs)))  # the journal is released
    count = m.registry.get_sample_value
    assert count("relocator_events_dropped_total", {"reason": "not_a_dict"}) == 2
    assert count("relocator_events_dropped_total", {"reason": "too_large"}) == 1
    assert count("relocator_events_dropped_total", {"reason": "undecodable"}) == 1


def test_rejections_count_every_event_and_log_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    m = Metrics()
    r = Rejections(m, "tcp", interval_s=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="relocator.rejects"):
        for _ in range(1000):
            r.add("not_a_dict", 2, "from 127.0.0.1:1")
        now[0] += 11
        r.add("not_a_dict", 1, "from 127.0.0.1:2")
        r.add("too_large", 1)
    lines = [rec.getMessage() for rec in caplog.records]
    assert len(lines) == 3
    assert "rejected 1999 event(s) (not_a_dict)" in lines[1] and "127.0.0.1:2" in lines[1]
    assert m.registry.get_sample_value(
        "relocator_events_dropped_total", {"reason": "not_a_dict"}
    ) == float(2001)
