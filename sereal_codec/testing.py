"""Hostile documents for tests and benchmarks (no test framework needed).

:func:`inflating_document` builds what issue 12 saw producers send: a few KB of zstd
whose body decompresses to hundreds of MB. It is built by streaming, so making one
never holds the inflated body in memory. :func:`object_bomb_body` is the other way to
cost memory: a body within any byte cap made of items that are one or a few bytes each
but tens of bytes of Python each (an empty hash: 1 byte, ~72 bytes decoded).
"""

from __future__ import annotations

import zstandard

from sereal_codec import tags
from sereal_codec.compression import varint_bytes

__all__ = ["OBJECT_BOMB_ITEMS", "inflating_document", "object_bomb_body", "object_bomb_objects"]

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


#: Item kinds of :func:`object_bomb_body`: the item's bytes, and the objects the decoder
#: charges for it beyond its slot (sereal_codec/DESIGN.md, "Bounded decoding").
OBJECT_BOMB_ITEMS: dict[str, tuple[bytes, int]] = {
    "empty_hashes": (bytes((tags.HASHREF_LOW,)), 1),  # {}: a dict each
    "empty_arrays": (bytes((tags.ARRAYREF_LOW,)), 1),  # []: a list each
    "ints": (bytes((tags.VARINT, 0xE8, 0x07)), 0),  # 1000: an int object each
    "strings": (bytes((tags.SHORT_BINARY_LOW | 2,)) + b"ab", 0),  # "ab": a str each
}


def _bomb_shape(count: int, group: int) -> list[int]:
    if count < 1 or group < 1:
        raise ValueError(f"count and group must be positive, not {count}, {group}")
    return [group] * (count // group) + ([count % group] if count % group else [])


def object_bomb_body(kind: str, count: int, group: int = 1000) -> bytes:
    """A Sereal body (1-based offsets) holding ``count`` items of one ``kind`` of
    :data:`OBJECT_BOMB_ITEMS`, as an array of arrays of ``group`` items each (a chunk's
    shape: an array of small containers), e.g. ``wrap_body`` it into a document.

    Args:
        kind: a key of :data:`OBJECT_BOMB_ITEMS`.
        count: items in all.
        group: items per inner array.
    """
    item, _ = OBJECT_BOMB_ITEMS[kind]
    sizes = _bomb_shape(count, group)
    parts = [bytes((tags.REFN, tags.ARRAY)), varint_bytes(len(sizes))]
    for n in sizes:
        parts += [bytes((tags.REFN, tags.ARRAY)), varint_bytes(n), item * n]
    return b"".join(parts)


def object_bomb_objects(kind: str, count: int, group: int = 1000) -> int:
    """The objects the decoder charges for all of :func:`object_bomb_body` with the
    same arguments: each array itself and its slots, plus each item's own."""
    _, own = OBJECT_BOMB_ITEMS[kind]
    sizes = _bomb_shape(count, group)
    return 1 + len(sizes) + sum(1 + n + own * n for n in sizes)
