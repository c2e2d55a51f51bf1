from __future__ import annotations

import importlib
from typing import Any

import pytest
import xxhash

from eventstore.blob import (
    MAGIC,
    add_postfix,
    has_postfix,
    pack_blob,
    postfix_length,
    unpack_blob,
    verify_postfix,
)
from eventstore.errors import (
    BlobDecodeError,
    ChecksumMismatch,
    ChecksumMissing,
    UnsupportedChecksum,
)

pytestmark = pytest.mark.unit

DOC = b"=\xf3rl\x04\x00" + bytes(range(200))


def _sereal() -> Any:
    return importlib.import_module("eventstore.sereal")


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
