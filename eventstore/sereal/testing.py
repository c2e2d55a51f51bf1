"""Hostile documents for tests and benchmarks (no test framework needed).

:func:`inflating_document` builds what issue 12 saw producers send: a few KB of zstd
whose body decompresses to hundreds of MB. It is built by streaming, so making one
never holds the inflated body in memory.
"""

from __future__ import annotations

import zstandard

from eventstore.sereal import tags
from eventstore.sereal.compression import varint_bytes

__all__ = ["inflating_document"]

_PIECE = bytes(1 << 20)


def _padded_varint(value: int, width: int) -> bytes:
    canonical = varint_bytes(value)
    return bytes(b | 0x80 for b in canonical[:-1]) + (
        bytes((canonical[-1] | 0x80,)) + b"\x80" * (width - len(canonical) - 1) + b"\x00"
        if len(canonical) < width
        else canonical[-1:]
    )


def inflating_document(body_bytes: int) -> bytes:
    """A protocol-4 zstd Sereal document whose body is one BINARY string of zero bytes,
    ``body_bytes`` long in all once decompressed (the frame records that size), while
    the document itself is about ``body_bytes / 32000`` bytes.

    Args:
        body_bytes: the decompressed body size, bytes (at least 16).
    """
    if body_bytes < 16:
        raise ValueError(f"body_bytes must be at least 16, not {body_bytes}")
    # The length as a varint padded to 10 bytes (decoders accept up to 16), so that
    # every body size is reachable.
    length = body_bytes - 11
    head = bytes((tags.BINARY,)) + _padded_varint(length, 10)
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=True)
    stream = compressor.compressobj(size=body_bytes)
    parts = [stream.compress(head)]
    left = length
    while left:
        piece = _PIECE[: min(left, len(_PIECE))]
        parts.append(stream.compress(piece))
        left -= len(piece)
    parts.append(stream.flush())
    frame = b"".join(parts)
    version_type = 4 | (tags.TYPE_ZSTD << 4)
    return tags.MAGIC_V3 + bytes((version_type, 0)) + varint_bytes(len(frame)) + frame
