from __future__ import annotations

import importlib
import pickle
import tracemalloc
from typing import Any

import pytest
import xxhash

from eventstore.blob import (
    DECODED_FLOOR_BYTES,
    MAGIC,
    MAX_DECODED_BYTES,
    MAX_DECODED_OBJECTS,
    BlobTooManyObjects,
    DecodeLimits,
    add_postfix,
    has_postfix,
    pack_blob,
    postfix_length,
    unpack_blob,
    verify_postfix,
)
from eventstore.errors import (
    BlobDecodeError,
    BlobTooLarge,
    ChecksumMismatch,
    ChecksumMissing,
    UnsupportedChecksum,
)
from sereal_codec.compression import varint_bytes
from sereal_codec.document import wrap_body
from sereal_codec.testing import inflating_document, object_bomb_body

DOC = b"=\xf3rl\x04\x00" + bytes(range(200))


def _sereal() -> Any:
    return importlib.import_module("sereal_codec")


def test_layout() -> None:
    blob = add_postfix(DOC)
    assert len(blob) == len(DOC) + postfix_length() == len(DOC) + 16
    assert blob.startswith(DOC)
    assert blob.endswith(MAGIC)
    digest = blob[len(DOC) : len(DOC) + 8]
    assert int.from_bytes(digest, "little") == xxhash.xxh3_64_intdigest(DOC)
    assert blob[-8:-6] == bytes([1, 16])
    assert has_postfix(blob) and not has_postfix(DOC)


def test_verify_returns_the_document_without_copy() -> None:
    blob = bytearray(add_postfix(DOC))
    view = verify_postfix(blob, "k")
    assert bytes(view) == DOC
    assert view.obj is blob  # a view on the caller's buffer, no copy
    assert bytes(verify_postfix(memoryview(bytes(blob)), "k")) == DOC


@pytest.mark.parametrize("flip", [0, 5, 100, len(DOC) - 1, len(DOC), len(DOC) + 7])
def test_any_flipped_bit_in_document_or_digest_is_caught(flip: int) -> None:
    blob = bytearray(add_postfix(DOC))
    blob[flip] ^= 0x10
    with pytest.raises(ChecksumMismatch) as e:
        verify_postfix(bytes(blob), "1:1:t::0")
    assert e.value.key == "1:1:t::0"
    assert "1:1:t::0" in str(e.value)
    assert e.value.retriable


@pytest.mark.parametrize("cut", [1, 6, 8, 16, 17, 100])
def test_truncated_blob_is_rejected(cut: int) -> None:
    blob = add_postfix(DOC)
    with pytest.raises(ChecksumMismatch, match="k1"):
        verify_postfix(blob[:-cut], "k1")


def test_missing_postfix() -> None:
    with pytest.raises(ChecksumMissing, match="no checksum postfix"):
        verify_postfix(DOC, "k")
    assert bytes(verify_postfix(DOC, "k", required=False)) == DOC
    with pytest.raises(ChecksumMissing):
        verify_postfix(b"", "k")


def test_malformed_postfix() -> None:
    blob = bytearray(add_postfix(DOC))
    blob[-7] = 200  # length byte
    with pytest.raises(ChecksumMismatch, match="malformed"):
        verify_postfix(bytes(blob), "k")
    blob = bytearray(add_postfix(DOC))
    blob[-8] = 77  # algorithm id
    with pytest.raises(UnsupportedChecksum, match="77"):
        verify_postfix(bytes(blob), "k")
    with pytest.raises(UnsupportedChecksum):
        add_postfix(DOC, algorithm=9)
    # only a postfix, nothing before it, still verifies (empty document)
    assert bytes(verify_postfix(add_postfix(b""), "k")) == b""
    # a postfix claiming to be longer than the data
    short = bytes([1, 16]) + MAGIC
    with pytest.raises(ChecksumMismatch):
        verify_postfix(short, "k")


def test_pack_unpack_round_trip() -> None:
    sereal = _sereal()
    events = [{"cpu": 5}, {"cpu": 99, "host": "web-1"}]
    for compress in ("zstd", "zlib", "snappy", None):
        blob = pack_blob(events, compress=compress)
        assert has_postfix(blob)
        assert unpack_blob(blob, key="k") == events
        assert sereal.decode(bytes(verify_postfix(blob))) == events


def test_unpack_names_key_on_bad_document() -> None:
    _sereal()
    blob = add_postfix(b"=\xf3rl\x04\x00\xff\xff")
    with pytest.raises(BlobDecodeError, match="1:1:t::0") as e:
        unpack_blob(blob, key="1:1:t::0")
    assert e.value.__cause__ is not None
    with pytest.raises(ChecksumMismatch):
        unpack_blob(pack_blob([1])[:-1], key="k")


# -- bounded decoding (issue 12.6) --------------------------------------------------------


def test_decode_limits_cap() -> None:
    limits = DecodeLimits(max_decoded_bytes=1000, max_decoded_ratio=4.0, floor_bytes=100)
    assert limits.cap_for(10) == 100  # the floor
    assert limits.cap_for(50) == 200  # the ratio
    assert limits.cap_for(10_000) == 1000  # the absolute cap
    assert DecodeLimits(floor_bytes=2**40).cap_for(1) == MAX_DECODED_BYTES
    with pytest.raises(ValueError):
        DecodeLimits(max_decoded_ratio=0)


def test_a_blob_inflating_to_250_mb_is_refused_before_it_is_decompressed() -> None:
    blob = add_postfix(inflating_document(250_000_000))
    assert len(blob) < 10_000
    tracemalloc.start()
    try:
        with pytest.raises(BlobTooLarge) as err:
            unpack_blob(blob, key="k1", limits=DecodeLimits())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # nothing was inflated
    e = err.value
    assert (e.key, e.decoded_bytes, e.cap_bytes, e.stored_bytes) == (
        "k1",
        250_000_000,
        DECODED_FLOOR_BYTES,  # 64 x 8 KB is less than the floor
        len(blob),
    )
    assert not e.retriable
    assert "250000000" in str(e) and str(DECODED_FLOOR_BYTES) in str(e) and "'k1'" in str(e)
    assert pickle.loads(pickle.dumps(e)).cap_bytes == e.cap_bytes
    # the same blob decodes when the limits allow it (and without limits)
    small = add_postfix(inflating_document(1_000_000))
    assert len(unpack_blob(small, limits=DecodeLimits(), binary="bytes")) == 1_000_000 - 11


def test_the_cap_is_relative_to_the_stored_size() -> None:
    body = [_sereal().PerlRef("x" * 1000)] * 100  # 100 KB of body, stored raw
    blob = pack_blob(body, compress=None)
    tight = DecodeLimits(max_decoded_bytes=2**30, max_decoded_ratio=0.5, floor_bytes=0)
    with pytest.raises(BlobTooLarge) as err:
        unpack_blob(blob, limits=tight)
    assert err.value.cap_bytes == len(blob) // 2
    assert unpack_blob(blob, limits=DecodeLimits(max_decoded_ratio=1.0, floor_bytes=0)) == body


def test_realistic_and_repetitive_chunks_are_under_the_default_cap() -> None:
    from eventstore.chunking import chunk_events
    from relocator.events import generate_events

    events = generate_events(3000, 7)
    repetitive = [dict(events[0]) for _ in range(100_000)]  # ratio in the thousands
    for chunk in chunk_events(events) + chunk_events(repetitive):
        assert isinstance(unpack_blob(chunk.data, limits=DecodeLimits()), list)


def test_realistic_chunks_are_far_under_the_default_object_budget() -> None:
    from eventstore.chunking import CHUNK_MAX_BODY_BYTES, chunk_events
    from relocator.events import generate_events

    events = generate_events(3000, 7)
    quarter = DecodeLimits(max_decoded_objects=MAX_DECODED_OBJECTS // 4)
    for chunk in chunk_events(events):  # ~0.28 objects per body byte
        assert isinstance(unpack_blob(chunk.data, limits=quarter), list)
    # The largest body our writers make, of the same events, stays under the default
    # budget with a margin: objects per body byte x 8 MiB, measured on a smaller body.
    body = _sereal().encode(events[:500], compress=None)
    with pytest.raises(_sereal().DecodeBudgetExceeded):
        _sereal().decode(body, max_objects=len(body) // 5)  # more than 0.2 per byte
    _sereal().decode(body, max_objects=int(len(body) * 0.3))
    assert 0.3 * CHUNK_MAX_BODY_BYTES * 1.5 < MAX_DECODED_OBJECTS


def test_a_chunk_of_many_small_objects_is_too_large_before_it_is_built() -> None:
    bomb = add_postfix(wrap_body(object_bomb_body("empty_hashes", 1_200_000), compress="zstd"))
    assert len(bomb) < 20_000  # within every byte cap: 1.2 MB of body
    limits = DecodeLimits(max_decoded_objects=100_000)
    tracemalloc.start()
    try:
        with pytest.raises(BlobTooLarge) as err:
            unpack_blob(bomb, key="k2", limits=limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 12 * 2**20, peak  # unbounded: ~86 MB of dicts
    e = err.value
    assert isinstance(e, BlobTooManyObjects) and not e.retriable
    assert (e.key, e.max_objects, e.stored_bytes) == ("k2", 100_000, len(bomb))
    assert e.decoded_bytes < e.cap_bytes == DECODED_FLOOR_BYTES  # the byte cap passed
    assert "100000 objects" in str(e) and "'k2'" in str(e) and f"byte {e.offset}" in str(e)
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is BlobTooManyObjects and again.offset == e.offset


def test_the_default_limits_carry_the_object_budget() -> None:
    # An array claiming more slots than the default budget: refused when it is opened,
    # before its list is allocated (34 MB unbounded).
    body = bytes((0x28, 0x2B)) + varint_bytes(MAX_DECODED_OBJECTS) + bytes(MAX_DECODED_OBJECTS)
    blob = add_postfix(wrap_body(body, compress="zstd"))
    tracemalloc.start()
    try:
        with pytest.raises(BlobTooManyObjects) as err:
            unpack_blob(blob, limits=DecodeLimits())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.value.offset == 1 and err.value.max_objects == MAX_DECODED_OBJECTS
    assert peak < 2.5 * len(body), peak  # the decompressed body, nothing decoded
    with pytest.raises(ValueError):
        DecodeLimits(max_decoded_objects=0)


def test_a_malformed_frame_is_a_decode_error() -> None:
    doc = inflating_document(100_000)
    broken = add_postfix(doc[:7] + b"\x00\x00\x00\x00" + doc[11:])  # not a zstd frame
    with pytest.raises(BlobDecodeError):
        unpack_blob(broken, limits=DecodeLimits())
