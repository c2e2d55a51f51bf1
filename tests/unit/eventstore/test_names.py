from __future__ import annotations

import pytest

from eventstore.errors import InvalidKey, InvalidMetadataValue, InvalidName
from eventstore.names import (
    DEFAULT_NAMESPACES,
    ChunkKey,
    ChunkRef,
    MetadataKey,
    Namespaces,
    format_metadata,
    merge_metadata,
    parse_metadata,
)


@pytest.mark.parametrize(
    "text",
    [
        "1413813813:1:type1:subtype1:0",
        "1413813813:2:type3::0",
        "0:ams4:web.request:nl.www:17",
        "9223372036854775807:X_1:a::9223372036854775807",
    ],
)
def test_chunk_key_round_trip(text: str) -> None:
    key = ChunkKey.parse(text)
    assert key.format() == text == str(key)
    assert ChunkKey(key.epoch, key.dc, key.type, key.subtype, key.chunk) == key


def test_chunk_key_parts() -> None:
    key = ChunkKey.parse("1413813813:2:type3::0")
    assert (key.epoch, key.dc, key.type, key.subtype, key.chunk) == (
        1413813813,
        "2",
        "type3",
        "",
        0,
    )
    assert key.metadata_key == MetadataKey(1413813813, "2")
    assert key.ref == ChunkRef("type3", "", 0)


@pytest.mark.parametrize(
    ("text", "part"),
    [
        ("1413813813:1:type1:subtype1", "key"),
        ("1413813813:1:type1:subtype1:0:1", "key"),
        ("01413813813:1:t:s:0", "epoch"),
        ("+1:1:t:s:0", "epoch"),
        ("-1:1:t:s:0", "epoch"),
        (" 1:1:t:s:0", "epoch"),
        ("1_0:1:t:s:0", "epoch"),
        ("\u0661:1:t:s:0", "epoch"),  # ARABIC-INDIC DIGIT ONE: int() takes it
        ("9223372036854775808:1:t:s:0", "epoch"),
        ("1:a.b:t:s:0", "dc"),
        ("1::t:s:0", "dc"),
        ("1:d-c:t:s:0", "dc"),
        ("1:1::s:0", "type"),
        ("1:1:t/x:s:0", "type"),
        ("1:1:t:s s:0", "subtype"),
        ("1:1:t:s:00", "chunk"),
        ("1:1:t:s:", "chunk"),
        ("1:1:t:s:x", "chunk"),
    ],
)
def test_chunk_key_rejects(text: str, part: str) -> None:
    with pytest.raises(InvalidKey) as e:
        ChunkKey.parse(text)
    assert e.value.part == part
    assert e.value.text == text
    assert text in str(e.value) or repr(text) in str(e.value)


def test_chunk_key_constructor_validates() -> None:
    with pytest.raises(InvalidKey, match="epoch"):
        ChunkKey(-1, "1", "t", "", 0)
    with pytest.raises(InvalidKey, match="chunk"):
        ChunkKey(1, "1", "t", "", True)
    with pytest.raises(InvalidKey, match="dc"):
        ChunkKey(1, "a:b", "t", "", 0)
    with pytest.raises(InvalidKey):
        ChunkKey.parse(b"1:1:t:s:0")  # type: ignore[arg-type]


def test_metadata_key() -> None:
    key = MetadataKey.parse("1413813813-2")
    assert key == MetadataKey(1413813813, "2")
    assert key.format() == "1413813813-2"
    assert key.chunk_key(ChunkRef("t", "", 3)) == ChunkKey(1413813813, "2", "t", "", 3)
    for bad, part in [("1413813813", "key"), ("01-2", "epoch"), ("1-", "dc"), ("1-2-3", "dc")]:
        with pytest.raises(InvalidKey) as e:
            MetadataKey.parse(bad)
        assert e.value.part == part


def test_metadata_value_round_trip_and_order() -> None:
    value = "type1:subtype1:0|type1:subtype1:1|type3::0"
    refs = parse_metadata(value)
    assert format_metadata(refs) == value
    assert parse_metadata(value.encode()) == refs
    # byte order of the entry text, duplicates dropped; readers accept any order
    assert format_metadata(parse_metadata("t::2|t::10|t::2")) == "t::10|t::2"
    assert parse_metadata("") == ()
    assert format_metadata([]) == ""
    assert format_metadata([ChunkKey(1, "1", "t", "", 0)]) == "t::0"


@pytest.mark.parametrize(
    ("value", "part"),
    [
        ("t::0|", "entry 1"),
        ("t::0||t::1", "entry 1"),
        ("t:0", "entry 0"),
        ("t::01", "entry 0 ('t::01') chunk"),
        ("t:s s:0", "entry 0 ('t:s s:0') subtype"),
        (":s:0", "entry 0 (':s:0') type"),
        ("t::0|x:y:z:1", "entry 1"),
    ],
)
def test_metadata_value_rejects(value: str, part: str) -> None:
    with pytest.raises(InvalidMetadataValue) as e:
        parse_metadata(value, key="1-1")
    assert e.value.part.startswith(part)
    assert "1-1" in str(e.value)


def test_metadata_value_must_be_ascii() -> None:
    with pytest.raises(InvalidMetadataValue, match="ASCII"):
        parse_metadata("t::0|é::0".encode())
    with pytest.raises(InvalidMetadataValue, match="ASCII"):
        parse_metadata("t::0|é::0")


def test_merge_never_drops_a_key() -> None:
    a = "t::0|t::1"
    b = "t::1|u::0"
    assert merge_metadata(a, b) == "t::0|t::1|u::0"
    assert merge_metadata(b, a) == merge_metadata(a, b)
    assert merge_metadata(a, [ChunkRef("v", "", 0)], b"") == "t::0|t::1|v::0"
    assert merge_metadata() == ""
    with pytest.raises(InvalidMetadataValue):
        merge_metadata(a, "garbage")


def test_namespaces() -> None:
    key = ChunkKey.parse("1:1:t:s:0")
    assert DEFAULT_NAMESPACES.chunk_location(key) == ("events", "events", "1:1:t:s:0")
    assert DEFAULT_NAMESPACES.metadata_location(key.metadata_key) == ("epochs", "epochs", "1-1")
    assert DEFAULT_NAMESPACES.substream_location("top_urls", key) == (
        "substreams",
        "top_urls",
        "1:1:t:s:0",
    )
    custom = Namespaces(events_bucket_type="ev_test", events_bucket="e1")
    assert custom.chunk_location(key)[:2] == ("ev_test", "e1")
    with pytest.raises(InvalidName):
        Namespaces(events_bucket="a/b")
    with pytest.raises(InvalidName):
        DEFAULT_NAMESPACES.substream_location("../x", key)
