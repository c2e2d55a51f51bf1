"""Documents: headers of every protocol version, user headers, every compression (with
padded varints and lying sizes), encode options, the public API surface.

The PERL_* documents were written by Perl's Sereal::Encoder 5.003 for
``["abcd" x 3, "abcd" x 3, [1], {k => "v"}]`` (user header
``{hdr => "abcd" x 3, again => "abcd" x 3}`` from protocol 2 on).
"""

from __future__ import annotations

import random
import zlib
from types import ModuleType
from typing import Any

import cramjam
import pytest
import zstandard
from sereal_testlib import V4, doc

import sereal_codec
import sereal_codec.pure
from sereal_codec.errors import (
    BadHeader,
    DecompressionError,
    InvalidStructure,
    SizeLimitExceeded,
    TruncatedInput,
    UnsupportedVersion,
)
from sereal_codec.pure.encoder import varint

PERL_VALUE = ["abcd" * 3, "abcd" * 3, [1], {"k": "v"}]
PERL_HEADER = {"hdr": "abcd" * 3, "again": "abcd" * 3}
_UH = (
    "26 01 52 63 68 64 72 6c 61 62 63 64 61 62 63 64 61 62 63 64 65 61 67 61 69 6e 6c 61 62"
    " 63 64 61 62 63 64 61 62 63 64"
)
_ZSTD = (
    "21 28 b5 2f fd 20 22 c5 00 00 70 44 6c 61 62 63 64 6c 41 01 51 61 6b 61 76 03 00 20 00"
    " 0b b9 13 ae 08"
)
PERL_DOCS = {
    "v1-snappy": "3d 73 72 6c 11 00 22 14 44 6c 61 62 63 64 11 04 32 0d 00 18 41 01 51 61 6b 61 76",
    "v1-snappy_incr": "3d 73 72 6c 21 00 15 22 14 44 6c 61 62 63 64 11 04 32 0d 00 18 41 01 51 61"
    " 6b 61 76",
    "v2-snappy_incr": "3d 73 72 6c 22 " + _UH + " 15 22 14 44 6c 61 62 63 64 11 04 32 0d 00 18 41"
    " 01 51 61 6b 61 76",
    "v3-zlib": "3d f3 72 6c 33 " + _UH + " 22 98 00 78 9c 73 c9 49 4c 4a 4e 81 61 14 8e 23 63 60"
    " 62 76 62 19 00 df 77 0c 8f",
    "v5-zstd": "3d f3 72 6c 45 " + _UH + " " + _ZSTD,
    "v3-raw": "3d f3 72 6c 03 " + _UH + " 44 6c 61 62 63 64 61 62 63 64 61 62 63 64 6c 61 62 63"
    " 64 61 62 63 64 61 62 63 64 41 01 51 61 6b 61 76",
}
PERL_HEADERS = {
    "v1-snappy": (1, "snappy"),
    "v1-snappy_incr": (1, "snappy_incr"),
    "v2-snappy_incr": (2, "snappy_incr"),
    "v3-zlib": (3, "zlib"),
    "v5-zstd": (5, "zstd"),
    "v3-raw": (3, "none"),
}


@pytest.mark.parametrize("name", sorted(PERL_DOCS))
def test_perl_documents(sereal: ModuleType, name: str) -> None:
    data = bytes.fromhex(PERL_DOCS[name])
    assert sereal.decode(data) == PERL_VALUE
    header = sereal.decode_header(data)
    assert (header.protocol, header.compression) == PERL_HEADERS[name]
    assert header.user_header == (None if header.protocol == 1 else PERL_HEADER)


# -- headers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "protocol"),
    [
        (b"=srl\x01\x00", 1),
        (b"=srl\x02\x00", 2),
        (b"=\xf3rl\x03\x00", 3),
        (b"=\xf3rl\x04\x00", 4),
        (b"=\xf3rl\x05\x00", 5),
        (b"=\xf3rl\x05\x80\x00", 5),  # padded suffix size
    ],
)
def test_every_protocol_version(sereal: ModuleType, header: bytes, protocol: int) -> None:
    data = doc("42 63 61 62 63 2f 02", header)
    if protocol == 1:  # offsets from the document start
        data = doc("42 63 61 62 63 2f " + f"{len(header) + 1:02x}", header)
    assert sereal.decode(data) == ["abc", "abc"]
    assert sereal.decode_header(data) == sereal_codec.Header(protocol, "none", None, len(header))


def test_protocol1_offsets_count_from_the_document_start(sereal: ModuleType) -> None:
    # Perl, protocol 1: my $a = [1]; [$a, $a]  ->  REFP 8
    value = sereal.decode(bytes.fromhex("3d 73 72 6c 01 00 42 28 ab 01 01 29 08"))
    assert value[0] is value[1]
    with pytest.raises(sereal_codec.BadBackReference):
        sereal.decode(bytes.fromhex("3d 73 72 6c 01 00 42 28 ab 01 01 29 03"))


def test_protocol1_suffix_is_skipped(sereal: ModuleType) -> None:
    # protocol 1 suffixes are opaque: offsets still count from the document start
    data = bytes.fromhex("3d 73 72 6c 01 03 ff ff ff 42 63 61 62 63 2f 0a")
    assert sereal.decode(data) == ["abc", "abc"]
    assert sereal.decode_header(data).user_header is None


HEADER_ERRORS: list[tuple[bytes, type[Exception], int]] = [
    (b"", TruncatedInput, 0),
    (b"=s", TruncatedInput, 2),
    (b"=\xf3rl", TruncatedInput, 4),
    (b"=srl\x01", TruncatedInput, 5),
    (b"=srl\x01\x80", TruncatedInput, 6),
    (b"=srl\x02\x05\x01\x51", TruncatedInput, 8),  # suffix longer than the input
    (b'{"json": 1}', BadHeader, 0),
    (b"=\xc3\xb3rl\x03\x00\x01", BadHeader, 0),  # UTF-8 encoded document
    (b"=srl\x03\x00\x01", BadHeader, 0),  # old magic, new protocol
    (b"=\xf3rl\x02\x00\x01", BadHeader, 0),  # new magic, old protocol
    (b"=srl\x00\x00\x01", UnsupportedVersion, 4),
    (b"=\xf3rl\x06\x00\x01", UnsupportedVersion, 4),
    (b"=srl\x12\x00\x01", UnsupportedVersion, 4),  # snappy type 1 after protocol 1
    (b"=srl\x32\x00\x01", UnsupportedVersion, 4),  # zlib before protocol 3
    (b"=srl\x42\x00\x01", UnsupportedVersion, 4),  # zstd before protocol 3
    (b"=\xf3rl\x54\x00\x01", UnsupportedVersion, 4),  # unknown type
    (b"=\xf3rl\x04" + b"\x80" * 16 + b"\x00\x01", InvalidStructure, 5),
]


@pytest.mark.parametrize(("data", "error", "offset"), HEADER_ERRORS)
def test_header_errors(
    sereal: ModuleType, data: bytes, error: type[Exception], offset: int
) -> None:
    for call in (sereal.decode, sereal.decode_header):
        with pytest.raises(error) as info:
            call(data)
        assert type(info.value) is error
        assert info.value.offset == offset  # type: ignore[attr-defined]
    assert not sereal.looks_like_sereal(data)


# -- user headers ----------------------------------------------------------------------


def test_user_header_round_trip(sereal: ModuleType) -> None:
    header = {"epoch": 123, "type": "web", "keys": ["a", "b"]}
    data = sereal.encode({"type": "web", "x": 1}, user_header=header)
    assert data[6] == 0x01  # bitfield: user header present
    info = sereal.decode_header(data)
    assert info.user_header == header
    assert info.body_offset == 6 + data[5]  # suffix: bitfield + user header body
    assert sereal.decode(data) == {"type": "web", "x": 1}


def test_user_header_has_its_own_offsets(sereal: ModuleType) -> None:
    # both bodies COPY offset 2 (their own "abc"); the header's body starts at index 7
    data = (
        b"=\xf3rl\x04\x08\x01"
        + bytes.fromhex("42 63 61 62 63 2f 02")
        + bytes.fromhex("42 63 78 79 7a 2f 02")
    )
    assert sereal.decode_header(data).user_header == ["abc", "abc"]
    assert sereal.decode(data) == ["xyz", "xyz"]


@pytest.mark.parametrize(
    ("suffix", "expected"),
    [
        ("00", None),  # empty suffix
        ("01 00", None),  # bitfield without user header
        ("03 00 ff ff", None),  # bit 0 clear: the rest is not a user header
        ("02 01 01", 1),
        ("04 01 01 3f 3f", 1),  # trailing PAD inside the suffix
    ],
)
def test_suffix_forms(sereal: ModuleType, suffix: str, expected: Any) -> None:
    data = b"=\xf3rl\x04" + bytes.fromhex(suffix) + b"\x05"
    assert sereal.decode_header(data).user_header == expected
    assert sereal.decode(data) == 5


@pytest.mark.parametrize(
    ("suffix", "error", "offset"),
    [
        ("01 01", TruncatedInput, 7),  # flag set, no body
        ("03 01 01 02", InvalidStructure, 8),  # trailing bytes in the user header
        ("03 01 29 01", sereal_codec.BadBackReference, 7),
    ],
)
def test_bad_user_headers(
    sereal: ModuleType, suffix: str, error: type[Exception], offset: int
) -> None:
    data = b"=\xf3rl\x04" + bytes.fromhex(suffix) + b"\x05"
    with pytest.raises(error) as info:
        sereal.decode_header(data)
    assert info.value.offset == offset  # type: ignore[attr-defined]
    assert sereal.decode(data) == 5  # decode skips the user header


# -- compression: decoding -------------------------------------------------------------

BODY = bytes.fromhex("44 6c 61 62 63 64 61 62 63 64 61 62 63 64 2f 02 41 01 51 61 6b 61 76")
VALUE = ["abcd" * 3, "abcd" * 3, [1], {"k": "v"}]


def _padded(value: int, width: int) -> bytes:
    """A varint of exactly ``width`` bytes (non-canonical when wider than needed)."""
    out = bytearray()
    for i in range(width):
        byte = (value >> (7 * i)) & 0x7F
        out.append(byte | (0x80 if i < width - 1 else 0))
    assert value >> (7 * width) == 0
    return bytes(out)


def _zlib_doc(body: bytes, claimed: int | None = None, width: int = 1) -> bytes:
    stream = zlib.compress(body)
    size = len(body) if claimed is None else claimed
    return (
        b"=\xf3rl\x33\x00"
        + _padded(size, max(width, len(varint(size))))
        + _padded(len(stream), max(width, len(varint(len(stream)))))
        + stream
    )


def _snappy_doc(body: bytes, width: int = 1) -> bytes:
    block = bytes(cramjam.snappy.compress_raw(body))
    return b"=\xf3rl\x23\x00" + _padded(len(block), max(width, len(varint(len(block))))) + block


def _zstd_doc(frame: bytes, width: int = 1) -> bytes:
    return b"=\xf3rl\x44\x00" + _padded(len(frame), max(width, len(varint(len(frame))))) + frame


@pytest.mark.parametrize("width", [1, 2, 5, 16])
def test_padded_varints_everywhere(sereal: ModuleType, width: int) -> None:
    frame = zstandard.ZstdCompressor().compress(BODY)
    for data in (_zlib_doc(BODY, width=width), _snappy_doc(BODY, width), _zstd_doc(frame, width)):
        assert sereal.decode(data) == VALUE


def test_compressed_bodies_use_body_offsets(sereal: ModuleType) -> None:
    # body errors in a compressed body carry offsets into the decompressed body
    bad = bytes.fromhex("42 01 02 03")
    with pytest.raises(InvalidStructure) as info:
        sereal.decode(_zlib_doc(bad))
    assert info.value.offset == 3


def test_decompression_cap(sereal: ModuleType) -> None:
    for data in (_zlib_doc(BODY), _snappy_doc(BODY), _zstd_doc(zstandard.compress(BODY))):
        assert sereal.decode(data, max_decompressed_size=len(BODY)) == VALUE
        with pytest.raises(SizeLimitExceeded) as info:
            sereal.decode(data, max_decompressed_size=len(BODY) - 1)
        assert info.value.offset is not None


def test_decompression_bomb_is_refused_before_inflating(sereal: ModuleType) -> None:
    huge = b"\x3f" * (16 * 2**20)  # 16 MiB of PAD, compresses to almost nothing
    for data in (_zlib_doc(huge), _zstd_doc(zstandard.compress(huge))):
        with pytest.raises(SizeLimitExceeded):
            sereal.decode(data, max_decompressed_size=2**20)


@pytest.mark.parametrize("claimed", [0, 5, len(BODY) - 1, len(BODY) + 1, 10_000])
def test_zlib_lying_about_its_size(sereal: ModuleType, claimed: int) -> None:
    with pytest.raises(DecompressionError):
        sereal.decode(_zlib_doc(BODY, claimed=claimed))


def test_zlib_claim_above_cap(sereal: ModuleType) -> None:
    with pytest.raises(SizeLimitExceeded):
        sereal.decode(_zlib_doc(BODY, claimed=2**40))


def test_snappy_lying_about_its_size(sereal: ModuleType) -> None:
    block = bytes(cramjam.snappy.compress_raw(BODY))
    for preamble in (varint(len(BODY) + 1), varint(len(BODY) - 1), varint(2**31)):
        lying = preamble + block[len(varint(len(BODY))) :]
        data = b"=\xf3rl\x23\x00" + varint(len(lying)) + lying
        with pytest.raises((DecompressionError, SizeLimitExceeded)):
            sereal.decode(data)
    with pytest.raises(SizeLimitExceeded):
        lying = varint(2**31) + block[1:]
        sereal.decode(b"=\xf3rl\x23\x00" + varint(len(lying)) + lying)
    with pytest.raises(DecompressionError):  # preamble longer than 5 bytes
        sereal.decode(b"=\xf3rl\x23\x00\x06" + b"\x80" * 5 + b"\x00")


def test_zstd_frame_without_content_size(sereal: ModuleType) -> None:
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(BODY)
    with pytest.raises(DecompressionError, match="content size"):
        sereal.decode(_zstd_doc(frame))


def test_zstd_must_be_exactly_one_frame(sereal: ModuleType) -> None:
    frame = zstandard.compress(BODY)
    with pytest.raises(DecompressionError):
        sereal.decode(_zstd_doc(frame + frame))
    with pytest.raises(DecompressionError):
        sereal.decode(_zstd_doc(frame + b"junk"))
    checksummed = zstandard.ZstdCompressor(write_checksum=True).compress(BODY)
    assert sereal.decode(_zstd_doc(checksummed)) == VALUE


@pytest.mark.parametrize(
    "data",
    [
        _zstd_doc(b"not a zstd frame at all"),
        _zstd_doc(zstandard.compress(BODY)[:-3]),
        _zlib_doc(BODY)[:-8] + b"\x00" * 8,
        b"=\xf3rl\x23\x00\x05" + b"\x17\xff\xff\xff\xff",
        b"=\xf3rl\x23\x00\x00",
    ],
)
def test_corrupt_compressed_bodies(sereal: ModuleType, data: bytes) -> None:
    with pytest.raises((DecompressionError, TruncatedInput)):
        sereal.decode(data)


def test_compressed_length_beyond_the_input(sereal: ModuleType) -> None:
    data = _zstd_doc(zstandard.compress(BODY))
    with pytest.raises(TruncatedInput) as info:
        sereal.decode(data[:-1])
    assert info.value.offset == len(data) - 1


def test_bytes_after_a_compressed_block(sereal: ModuleType) -> None:
    for data in (_zlib_doc(BODY), _snappy_doc(BODY), _zstd_doc(zstandard.compress(BODY))):
        with pytest.raises(InvalidStructure) as info:
            sereal.decode(data + b"\x3f")
        assert info.value.offset == len(data)


# -- encoding options ------------------------------------------------------------------

BIG = {"events": [{"type": "web", "url": f"/page/{i}", "ms": i} for i in range(200)]}


@pytest.mark.parametrize(
    ("compress", "type_nibble", "name"),
    [
        ("zstd", 4, "zstd"),
        ("zlib", 3, "zlib"),
        ("snappy", 2, "snappy_incr"),
        ("none", 0, "none"),
        (None, 0, "none"),
    ],
)
@pytest.mark.parametrize("protocol", [3, 4, 5])
def test_encode_compression_and_protocol(
    sereal: ModuleType, compress: str | None, type_nibble: int, name: str, protocol: int
) -> None:
    if compress == "zstd" and protocol == 3:
        with pytest.raises(ValueError, match="protocol 4"):
            sereal.encode(BIG, compress=compress, protocol=protocol)
        return
    data = sereal.encode(BIG, compress=compress, protocol=protocol)
    assert data[:4] == b"=\xf3rl"
    assert data[4] == (type_nibble << 4) | protocol
    assert sereal.decode_header(data).compression == name
    assert sereal.decode(data) == BIG


def test_encode_defaults(sereal: ModuleType) -> None:
    data = sereal.encode(BIG)
    assert data[4] == 0x44  # zstd, protocol 4
    assert sereal.encode(BIG) == sereal.encode(BIG, compress="zstd", level=3, protocol=4)
    assert sereal.encode(BIG, compress="zlib") == sereal.encode(BIG, compress="zlib", level=6)


def test_zlib_lengths_are_canonical(sereal: ModuleType) -> None:
    data = sereal.encode(BIG, compress="zlib")
    body = sereal.encode(BIG, compress="none")[6:]
    stream = zlib.compress(body, 6)
    assert data[6:] == varint(len(body)) + varint(len(stream)) + stream


def test_compress_threshold(sereal: ModuleType) -> None:
    small = {"a": 1}
    assert sereal.encode(small)[4] == 0x04  # below 1024 bytes: raw
    assert sereal.encode(small, compress_threshold=0)[4] == 0x04  # would not shrink
    value = ["x" * 100]
    size = len(sereal.encode(value, compress="none")) - 6
    assert sereal.encode(value, compress_threshold=0)[4] == 0x44
    assert sereal.encode(value, compress_threshold=size + 1)[4] == 0x04
    assert sereal.encode(value, compress_threshold=size)[4] == 0x44


def test_incompressible_body_stays_raw(sereal: ModuleType) -> None:
    noise = random.Random(0).randbytes(600)
    for compress in ("zstd", "zlib", "snappy"):
        data = sereal.encode(noise, compress=compress, compress_threshold=0)
        assert data[4] >> 4 == 0, compress


@pytest.mark.parametrize(
    "options",
    [
        {"protocol": 2},
        {"protocol": 6},
        {"protocol": "4"},
        {"protocol": True},
        {"compress": "lz4"},
        {"compress": "zstd", "protocol": 3},
        {"level": 23},
        {"compress": "zlib", "level": 10},
        {"level": 1.5},
        {"compress_threshold": -1},
        {"max_depth": -1},
    ],
)
def test_encode_rejects_bad_options(sereal: ModuleType, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as info:
        sereal.encode([1], **options)
    assert not isinstance(info.value, sereal_codec.SerealDecodeError)


@pytest.mark.parametrize(
    "options",
    [{"binary": "ascii"}, {"binary": None}, {"max_depth": -1}, {"max_decompressed_size": -1}],
)
def test_decode_rejects_bad_options(sereal: ModuleType, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        sereal.decode(doc("01"), **options)


# -- API surface -----------------------------------------------------------------------


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_accepts_bytes_like(sereal: ModuleType, wrap: Any) -> None:
    data = sereal.encode(BIG)
    assert sereal.decode(wrap(data)) == BIG
    assert sereal.decode_header(wrap(data)).protocol == 4
    assert sereal.looks_like_sereal(wrap(data))


def test_rejects_str_input(sereal: ModuleType) -> None:
    with pytest.raises(TypeError):
        sereal.decode("=\xf3rl\x04\x00\x01")
    assert not sereal.looks_like_sereal("=\xf3rl\x04\x00\x01")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (doc("01"), True),
        (b"=srl\x01\x00\x01", True),
        (V4, False),  # no body
        (b"=\xf3rl\x04\x02\x01", False),  # suffix runs past the end
        (b"=srl\x04\x00\x01", False),
        (b"", False),
        (b"hello world", False),
    ],
)
def test_looks_like_sereal(sereal: ModuleType, data: bytes, expected: bool) -> None:
    assert sereal.looks_like_sereal(data) is expected


def test_header_is_frozen(sereal: ModuleType) -> None:
    header = sereal.decode_header(doc("01"))
    with pytest.raises(AttributeError):
        header.protocol = 3


def test_public_names() -> None:
    assert sereal_codec.IMPLEMENTATION in ("c", "pure")
    assert sereal_codec.pure.IMPLEMENTATION == "pure"
    for name in ("encode", "decode", "decode_header", "looks_like_sereal", "Header"):
        assert hasattr(sereal_codec.pure, name)
    assert issubclass(sereal_codec.SerealError, ValueError)
    assert sereal_codec.PerlRef is sereal_codec.types.PerlRef
