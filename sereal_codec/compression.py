"""Compressed Sereal bodies: framing (document types 1-4) and the codecs behind it,
Snappy (raw block format), zlib and zstd.

This module is the one Python place that knows a document type's framing: its name,
the ``compress=`` option that writes it (:data:`DOC_TYPES`), how its body is opened
(:func:`unframe_body`), what size it claims (:func:`claimed_body_size`) and how it is
written (:func:`frame_body`). Its number and first protocol are ``tags.py``'s (held to
the C core's ``tags.h``); ``tests/unit/sereal_codec/test_document_types.py`` fails when a
type ``tags.py`` names is not handled through every path.

Decompression never trusts a size it has not checked: the size a body claims is
compared with ``max_size`` before the decompressor runs, the decompressor is never
given room for more than that claim, and the output must be exactly the claimed size.
Every failure is a :class:`~sereal_codec.errors.SerealDecodeError` carrying the
document offset of the compressed block.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple

import cramjam
import zstandard

from sereal_codec import tags
from sereal_codec.errors import (
    DecompressionError,
    InvalidStructure,
    SizeLimitExceeded,
    TruncatedInput,
    UnsupportedVersion,
)

__all__ = [
    "DOC_TYPES",
    "METHODS",
    "ZLIB_DEFAULT_LEVEL",
    "ZSTD_DEFAULT_LEVEL",
    "ZSTD_MAGIC",
    "Framing",
    "claimed_body_size",
    "compress_body",
    "frame_body",
    "read_varint",
    "screen_claim",
    "snappy_compress",
    "snappy_decompress",
    "unframe_body",
    "varint_bytes",
    "zlib_compress",
    "zlib_decompress",
    "zstd_compress",
    "zstd_decompress",
    "zstd_frame_content_size",
]

ZSTD_DEFAULT_LEVEL = 3
ZLIB_DEFAULT_LEVEL = 6
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZLIB_LEVELS = range(-1, 10)


class Framing(NamedTuple):
    """What a document type is to the document layer.

    Attributes:
        name: ``Header.compression``.
        method: the ``compress=`` option that writes it, or None when nothing does.
        write_protocol: the lowest protocol it is written at.
        default_level, levels: the compression level used when none is given, and the
            levels accepted (snappy and none ignore the level; it is checked as
            zlib's, as it always was).
    """

    name: str
    method: str | None
    write_protocol: int
    default_level: int
    levels: range


#: Every document type there is, by its number (``tags.TYPE_*``).
DOC_TYPES: dict[int, Framing] = {
    tags.TYPE_RAW: Framing("none", "none", 1, ZLIB_DEFAULT_LEVEL, _ZLIB_LEVELS),
    tags.TYPE_SNAPPY: Framing("snappy", None, 1, ZLIB_DEFAULT_LEVEL, _ZLIB_LEVELS),
    tags.TYPE_SNAPPY_INCR: Framing("snappy_incr", "snappy", 1, ZLIB_DEFAULT_LEVEL, _ZLIB_LEVELS),
    tags.TYPE_ZLIB: Framing("zlib", "zlib", 3, ZLIB_DEFAULT_LEVEL, _ZLIB_LEVELS),
    tags.TYPE_ZSTD: Framing("zstd", "zstd", 4, ZSTD_DEFAULT_LEVEL, range(-(1 << 17), 23)),
}
#: The ``compress=`` options ("none", "snappy", "zlib", "zstd") -> the type each writes.
METHODS: dict[str, int] = {f.method: t for t, f in DOC_TYPES.items() if f.method is not None}


def read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A varint at ``pos``: ``(value, position after it)``. Padded (non-canonical)
    forms of up to 16 bytes are accepted, as Perl writes them; the value must fit in
    64 bits."""
    value = 0
    for i in range(16):
        if pos + i >= end:
            raise TruncatedInput("input ends inside a varint", end)
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            if value >= 1 << 64:
                raise InvalidStructure("varint exceeds 64 bits", pos)
            return value, pos + i + 1
    raise InvalidStructure("varint longer than 16 bytes", pos)


def varint_bytes(value: int) -> bytes:
    """The canonical (shortest) varint of a non-negative integer."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def unframe_body(
    data: bytes, protocol: int, doc_type: int, start: int, max_size: int
) -> tuple[bytes, int, int]:
    """Locate (and if need be decompress) the body of a document.

    Args:
        data: the whole document.
        protocol: its protocol version; doc_type: its document type (0-4).
        start: document offset of the first byte after the header.
        max_size: largest decompressed body accepted, in bytes.

    Returns:
        ``(buffer, body start, base)`` as ``decode_body`` takes them.

    Raises:
        TruncatedInput, InvalidStructure: bad framing (or bytes after a compressed
            block); SizeLimitExceeded, DecompressionError: see the module docstring.
    """
    n = len(data)
    if doc_type == tags.TYPE_RAW:
        return data, start, (0 if protocol == 1 else start - 1)
    if doc_type not in DOC_TYPES:
        raise UnsupportedVersion(f"document type {doc_type} in protocol {protocol}", 4)
    # A decompressed body starts at index 0; protocol 1 offsets still count from the
    # document start, as if the body followed the header.
    base = -start if protocol == 1 else -1
    if doc_type == tags.TYPE_SNAPPY:
        return snappy_decompress(data[start:], max_size, start), 0, base
    claimed = 0
    if doc_type == tags.TYPE_ZLIB:
        claimed, pos = read_varint(data, start, n)
        length, pos = read_varint(data, pos, n)
    else:
        length, pos = read_varint(data, start, n)
    if length > n - pos:
        raise TruncatedInput("input ends inside the compressed body", n)
    if pos + length != n:
        raise InvalidStructure("trailing bytes after the compressed body", pos + length)
    block = data[pos:]
    if doc_type == tags.TYPE_SNAPPY_INCR:
        return snappy_decompress(block, max_size, pos), 0, base
    if doc_type == tags.TYPE_ZLIB:
        return zlib_decompress(block, claimed, max_size, pos), 0, base
    if doc_type == tags.TYPE_ZSTD:
        return zstd_decompress(block, max_size, pos), 0, base
    raise UnsupportedVersion(f"document type {doc_type} has no decompressor here", 4)


def claimed_body_size(data: bytes, protocol: int, doc_type: int, start: int) -> int:
    """The size the body of a document will have once decompressed, as its framing
    claims it, without decompressing anything (the decompressors of this module then
    hold the body to exactly that size).

    A reader bounding what a document may cost checks this before :func:`unframe_body`
    (``eventstore.blob.DecodeLimits``), and can then pass its cap as ``max_size``.

    Args:
        data: the whole document; protocol, doc_type, start: as for :func:`unframe_body`.

    Returns:
        Bytes: a raw body's own length; Snappy: the block's preamble; zlib: the declared
        uncompressed length; zstd: the frame's content size.

    Raises:
        TruncatedInput, InvalidStructure, DecompressionError: bad framing, or a zstd
            frame without a content size.
    """
    n = len(data)
    if doc_type == tags.TYPE_RAW:
        return n - start
    if doc_type == tags.TYPE_SNAPPY:
        return _snappy_claim(data[start : start + 5], start)
    if doc_type not in DOC_TYPES:
        raise UnsupportedVersion(f"document type {doc_type} in protocol {protocol}", 4)
    first, pos = read_varint(data, start, n)
    if doc_type == tags.TYPE_ZLIB:
        return first
    if doc_type == tags.TYPE_SNAPPY_INCR:
        return _snappy_claim(data[pos : pos + 5], pos)
    if doc_type == tags.TYPE_ZSTD:
        return _zstd_claim(data[pos:], pos)
    raise UnsupportedVersion(f"document type {doc_type} has no size claim here", 4)


def screen_claim(data: bytes, doc_type: int, pos: int) -> int:
    """The size the compressed body at ``data[pos:]`` claims, read as the compiled
    ``event_verdict`` reads it (``frames.c``: any varint of up to 16 bytes, no check
    of the type against the protocol, nothing decompressed), for the relocator's
    screen (``relocator.wire.event_verdict``). Never raises.

    Args:
        data: the document; doc_type: its type (not RAW); pos: first byte after its
            header.

    Returns:
        The claim in bytes (Snappy: the block's preamble, after a length for
        SNAPPY_INCR; zlib: the uncompressed length; zstd: the frame's content size);
        -1 when the body records none (a zstd frame without a content size, which
        :func:`unframe_body` refuses); -2 when it is cut short or unreadable, or the type
        is unknown.
    """
    n = len(data)
    try:
        if doc_type == tags.TYPE_SNAPPY_INCR:
            pos = read_varint(data, pos, n)[1]
        if doc_type in (tags.TYPE_SNAPPY, tags.TYPE_SNAPPY_INCR, tags.TYPE_ZLIB):
            return read_varint(data, pos, n)[0]
        if doc_type == tags.TYPE_ZSTD:
            return zstd_frame_content_size(data, read_varint(data, pos, n)[1])
    except (TruncatedInput, InvalidStructure):  # a varint cut short or over 64 bits
        return -2
    return -2


def compress_body(body: bytes, method: str, level: int, threshold: int) -> tuple[int, bytes]:
    """``(document type, framed body)`` for ``method`` (a key of :data:`METHODS`:
    "none", "snappy", "zlib", "zstd"). The body stays raw (type 0) when shorter than
    ``threshold`` bytes or when the framed compressed form would not be strictly
    shorter. Lengths are canonical."""
    if method == "none" or len(body) < threshold:
        return tags.TYPE_RAW, body
    doc_type = METHODS[method]
    framed = frame_body(doc_type, body, level)
    if len(framed) >= len(body):
        return tags.TYPE_RAW, body
    return doc_type, framed


def frame_body(doc_type: int, body: bytes, level: int) -> bytes:
    """What follows the header of a document of ``doc_type`` holding ``body``:
    compressed (at ``level``, where the type has levels) and framed, lengths canonical,
    whatever its size.

    Raises:
        ValueError: a type with no framing here.
    """
    if doc_type == tags.TYPE_RAW:
        return body
    if doc_type == tags.TYPE_SNAPPY:  # protocol 1: the block is the rest of the document
        return snappy_compress(body)
    if doc_type == tags.TYPE_SNAPPY_INCR:
        block = snappy_compress(body)
        return varint_bytes(len(block)) + block
    if doc_type == tags.TYPE_ZLIB:
        stream = zlib_compress(body, level)
        return varint_bytes(len(body)) + varint_bytes(len(stream)) + stream
    if doc_type == tags.TYPE_ZSTD:
        frame = zstd_compress(body, level)
        return varint_bytes(len(frame)) + frame
    raise ValueError(f"document type {doc_type} has no framing here")


def _check_claim(claimed: int, max_size: int, what: str, offset: int) -> None:
    if claimed > max_size:
        raise SizeLimitExceeded(
            f"{what} body claims {claimed} bytes, more than max_decompressed_size={max_size}",
            offset,
        )


def _check_actual(actual: int, claimed: int, what: str, offset: int) -> None:
    if actual != claimed:
        raise DecompressionError(
            f"{what} body inflated to {actual} bytes but declared {claimed}", offset
        )


# -- Snappy -----------------------------------------------------------------------


def snappy_decompress(block: bytes, max_size: int, offset: int) -> bytes:
    """Decompress one raw Snappy block (the preamble varint states its size).

    Args:
        block: the whole block, preamble included.
        max_size: largest acceptable uncompressed size, in bytes.
        offset: document offset of the block, for errors.

    Raises:
        SizeLimitExceeded: the preamble claims more than ``max_size``.
        DecompressionError: a bad preamble, corrupt data, or a size mismatch.
    """
    claimed = _snappy_claim(block, offset)
    _check_claim(claimed, max_size, "Snappy", offset)
    out = bytearray(claimed)
    try:
        written = cramjam.snappy.decompress_raw_into(block, out)
    except cramjam.DecompressionError as exc:
        raise DecompressionError(f"corrupt Snappy block: {exc}", offset) from None
    _check_actual(written, claimed, "Snappy", offset)
    return bytes(out)


def _snappy_claim(block: bytes, offset: int) -> int:
    """The uncompressed size in a Snappy block's preamble."""
    claimed = 0
    for i in range(5):  # Snappy's preamble is a varint of at most 32 bits
        if i >= len(block):
            raise DecompressionError("Snappy preamble is truncated", offset)
        byte = block[i]
        claimed |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            break
    else:
        raise DecompressionError("Snappy preamble is longer than 5 bytes", offset)
    if claimed >= 1 << 32:
        raise DecompressionError("Snappy preamble exceeds 32 bits", offset)
    return claimed


def snappy_compress(body: bytes) -> bytes:
    """One raw Snappy block (with its size preamble) holding ``body``."""
    return bytes(cramjam.snappy.compress_raw(body))


# -- zlib -------------------------------------------------------------------------


def zlib_decompress(stream: bytes, claimed: int, max_size: int, offset: int) -> bytes:
    """Inflate one complete zlib stream that must produce exactly ``claimed`` bytes.

    Raises:
        SizeLimitExceeded: ``claimed`` is more than ``max_size``.
        DecompressionError: corrupt or truncated stream, data after it, or a size
            other than ``claimed``.
    """
    _check_claim(claimed, max_size, "zlib", offset)
    inflater = zlib.decompressobj()
    try:
        # max_length 0 would mean "unlimited": ask for at least one byte.
        out = inflater.decompress(stream, max(claimed, 1))
    except zlib.error as exc:
        raise DecompressionError(f"corrupt zlib stream: {exc}", offset) from None
    _check_actual(len(out), claimed, "zlib", offset)
    if not inflater.eof:
        raise DecompressionError("zlib stream is truncated or longer than declared", offset)
    if inflater.unused_data:
        raise DecompressionError("data after the end of the zlib stream", offset)
    return out


def zlib_compress(body: bytes, level: int) -> bytes:
    """A zlib stream of ``body`` at ``level`` (0-9)."""
    return zlib.compress(body, level)


# -- zstd -------------------------------------------------------------------------


def zstd_decompress(frame: bytes, max_size: int, offset: int) -> bytes:
    """Decompress exactly one zstd frame that records its content size.

    Raises:
        SizeLimitExceeded: the frame's content size is more than ``max_size``.
        DecompressionError: not a zstd frame, no content size, corrupt data, more
            than one frame or trailing bytes, or a size mismatch.
    """
    claimed = _zstd_claim(frame, offset)
    _check_claim(claimed, max_size, "zstd", offset)
    if _zstd_frame_length(frame, offset) != len(frame):
        raise DecompressionError("data after the zstd frame", offset)
    try:
        # With a content size the one-shot decompressor allocates exactly that much
        # and fails if the frame would produce more.
        out = zstandard.ZstdDecompressor().decompress(frame, max_output_size=max(claimed, 1))
    except zstandard.ZstdError as exc:
        raise DecompressionError(f"corrupt zstd frame: {exc}", offset) from None
    _check_actual(len(out), claimed, "zstd", offset)
    return out


def _zstd_claim(frame: bytes, offset: int) -> int:
    """The content size a zstd frame's header records (it must record one)."""
    if not frame.startswith(ZSTD_MAGIC):
        raise DecompressionError("not a zstd frame", offset)
    try:
        claimed: int = zstandard.get_frame_parameters(frame).content_size
    except zstandard.ZstdError as exc:
        raise DecompressionError(f"bad zstd frame header: {exc}", offset) from None
    if claimed == zstandard.CONTENTSIZE_UNKNOWN:
        raise DecompressionError("zstd frame does not record its content size", offset)
    return claimed


def zstd_frame_content_size(data: bytes, pos: int) -> int:
    """The content size the header of the zstd frame at ``data[pos:]`` records, read
    as the compiled ``event_verdict`` reads it (``frames.c``), without zstandard.

    Returns:
        The size (at most 2**63 - 1); -1 when the header records none; -2 when it is
        cut short or not a zstd frame's.
    """
    if data[pos : pos + 4] != ZSTD_MAGIC or pos + 4 >= len(data):
        return -2
    fhd = data[pos + 4]
    single, flag = (fhd >> 5) & 1, fhd >> 6
    size_bytes = single if flag == 0 else 1 << flag
    at = pos + 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    if size_bytes == 0:
        return -1
    if at + size_bytes > len(data):
        return -2
    size = int.from_bytes(data[at : at + size_bytes], "little")
    return min(size + 256 if size_bytes == 2 else size, 2**63 - 1)


def _zstd_frame_length(frame: bytes, offset: int) -> int:
    """Length of the zstd frame at the start of ``frame``, from its block headers."""
    try:
        pos = zstandard.frame_header_size(frame)
    except zstandard.ZstdError as exc:
        raise DecompressionError(f"bad zstd frame header: {exc}", offset) from None
    has_checksum = frame[4] & 0x04
    while True:
        if pos + 3 > len(frame):
            raise DecompressionError("zstd frame is truncated", offset)
        header = int.from_bytes(frame[pos : pos + 3], "little")
        pos += 3
        block_type = (header >> 1) & 0x03
        if block_type == 3:
            raise DecompressionError("reserved zstd block type", offset)
        pos += 1 if block_type == 1 else header >> 3  # RLE blocks store one byte
        if header & 1:  # last block
            return pos + (4 if has_checksum else 0)


def zstd_compress(body: bytes, level: int) -> bytes:
    """One zstd frame of ``body`` at ``level``, recording its content size."""
    compressor = zstandard.ZstdCompressor(level=level, write_content_size=True)
    return compressor.compress(body)
