from __future__ import annotations

import pytest

import sereal_codec as sereal
from relocator.errors import MalformedFrame
from relocator.wire import (
    EV_COMPRESSED,
    EV_TOO_LARGE,
    LENGTH,
    FrameParser,
    encode_frame,
    event_verdict,
    event_verdicts,
    parse_frame,
    split_stream,
)
from sereal_codec import compression, tags


def test_frame_round_trip() -> None:
    data = encode_frame(1413813813, "ams1", "web.x", "", b"=srl-doc")
    f = parse_frame(data)
    assert (f.epoch, f.dc, f.type, f.subtype, f.document) == (
        1413813813,
        "ams1",
        "web.x",
        "",
        b"=srl-doc",
    )


@pytest.mark.parametrize(
    ("dc", "type_", "subtype"),
    [("a-b", "t", ""), ("", "t", ""), ("a", "", ""), ("a", "t:x", ""), ("a", "t", "s s")],
)
def test_bad_tokens_are_refused(dc: str, type_: str, subtype: str) -> None:
    with pytest.raises(MalformedFrame):
        encode_frame(1, dc, type_, subtype, b"x")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"XX\x01" + bytes(8) + b"\x01a\x01t\x00x",
        b"RE\x02" + bytes(8) + b"\x01a\x01t\x00x",
        b"RE\x01" + bytes(8) + b"\x05a",
        b"RE\x01" + bytes(8) + b"\x01a\x01t\x00",
        b"RE\x01" + bytes(8) + b"\x01-\x01t\x00x",
    ],
)
def test_malformed_frames(data: bytes) -> None:
    with pytest.raises(MalformedFrame):
        parse_frame(data)


def test_split_stream_keeps_partial_frames_and_marks_oversized() -> None:
    a, b, big = b"a" * 10, b"b" * 3, b"c" * 100
    stream = bytearray(
        b"".join(LENGTH.pack(len(x)) + x for x in (a, big, b)) + LENGTH.pack(9) + b"par"
    )
    frames, used = split_stream(stream, max_frame_bytes=50)
    assert frames == [a, b"", b]
    assert stream[used:] == LENGTH.pack(9) + b"par"


def test_split_stream_refuses_garbage_length() -> None:
    with pytest.raises(MalformedFrame):
        split_stream(bytearray(b"\xff\xff\xff\xff"), 100)


def test_frame_parser_cache_gives_the_same_frames() -> None:
    parser = FrameParser(max_entries=2)
    frames = [encode_frame(e, dc, "web", "", doc) for e in (1, 2, 3) for dc in ("a", "b")
              for doc in (b"x", b"yy")]  # fmt: skip
    for data in frames + frames:
        assert parser.parse(data) == parse_frame(data)
    with pytest.raises(MalformedFrame):
        parser.parse(b"RE\x01" + bytes(8) + b"\x01a")  # truncated in the tokens
    with pytest.raises(MalformedFrame):
        parser.parse(b"RE\x01" + bytes(8) + b"\x01a\x03web\x00")  # header only, no document


# -- every compressed document type's claim (issue 16: one table of document types) -----

_COMPRESSED_TYPES = sorted(
    name for name in vars(tags) if name.startswith("TYPE_") and name != "TYPE_RAW"
)


def _compressed_document(doc_type: int, body: bytes) -> bytes:
    """A document of ``doc_type`` from the document layer's framing (protocol 1 for
    SNAPPY, the only one that has it; else the highest)."""
    protocol = 1 if doc_type == tags.TYPE_SNAPPY else tags.PROTOCOLS[-1]
    magic = tags.MAGIC_V1 if protocol < 3 else tags.MAGIC_V3
    level = compression.DOC_TYPES[doc_type].default_level
    return (
        magic
        + bytes(((doc_type << 4) | protocol, 0))
        + compression.frame_body(doc_type, body, level)
    )


@pytest.mark.parametrize("name", _COMPRESSED_TYPES)
@pytest.mark.parametrize("compiled", [True, False], ids=["c", "python"])
def test_every_compressed_type_is_screened_by_its_claim(name: str, compiled: bool) -> None:
    """Both event verdicts (frames.c's and its Python twin) read the size each
    compressed type claims: a type added to tags.py but not to them fails here."""
    body = bytes((tags.REFN, tags.HASH, 1, tags.SHORT_BINARY_LOW + 1)) + b"k" + b"\x26\x80\x08"
    body += b"a" * 1024
    doc = _compressed_document(getattr(tags, name), body)
    assert sereal.decode(doc) == {"k": "a" * 1024}
    for cap, want in ((len(body), EV_COMPRESSED), (len(body) - 1, EV_TOO_LARGE)):
        assert event_verdicts([doc], cap, compiled=compiled) == bytes((want,)), (name, cap)
        assert event_verdict(doc, cap) == want
