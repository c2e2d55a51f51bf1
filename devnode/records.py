"""The on-disk forms of the devnode's store (pure functions, no I/O).

Object record (the value under a location key)::

    header  "!BBHQQI": format version (1), flags (bit 0: tombstone), reserved,
            write_time_ms, purge_at_ms (0: never), meta_len
    meta    JSON: content type, charset, user metadata, vclock, vtag
    value   the stored bytes, verbatim

Location key: ``!HH`` lengths of bucket type and bucket, then the three UTF-8 strings.
Purge-index key: ``!Q`` purge_at_ms, then the location key, so a cursor walks entries
in the order they fall due.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from devnode.errors import InvalidRequest

FORMAT_VERSION = 1
FLAG_TOMBSTONE = 0x01
_HEADER = struct.Struct("!BBHQQI")
_LOCATION = struct.Struct("!HH")
_PURGE_AT = struct.Struct("!Q")

#: LMDB's largest key is 511 bytes; the purge index prefixes 8 bytes to a location key.
MAX_LOCATION_KEY_BYTES = 511 - _PURGE_AT.size


@dataclass(frozen=True)
class StoredObject:
    """One object (or tombstone) as the store keeps it."""

    value: bytes
    content_type: str
    charset: str | None = None
    usermeta: tuple[tuple[str, str], ...] = ()
    vclock: str = ""
    vtag: str = ""
    write_time_ms: int = 0
    purge_at_ms: int = 0
    tombstone: bool = False


def location_key(bucket_type: str, bucket: str, key: str) -> bytes:
    """Encode a location as the store's key.

    Raises:
        InvalidRequest: the encoded location is longer than LMDB's key limit allows.
    """
    t, b, k = bucket_type.encode(), bucket.encode(), key.encode()
    encoded = _LOCATION.pack(len(t), len(b)) + t + b + k
    if len(encoded) > MAX_LOCATION_KEY_BYTES:
        raise InvalidRequest(
            f"bucket type, bucket and key together exceed the devnode's limit of "
            f"{MAX_LOCATION_KEY_BYTES - _LOCATION.size} bytes: {bucket_type}/{bucket}/{key[:64]}"
        )
    return encoded


def split_location_key(encoded: bytes) -> tuple[str, str, str]:
    """Decode a location key back into (bucket_type, bucket, key)."""
    tlen, blen = _LOCATION.unpack_from(encoded)
    start = _LOCATION.size
    t = encoded[start : start + tlen]
    b = encoded[start + tlen : start + tlen + blen]
    return t.decode(), b.decode(), encoded[start + tlen + blen :].decode()


def purge_key(purge_at_ms: int, loc_key: bytes) -> bytes:
    """The purge-index key of a location falling due at ``purge_at_ms``."""
    return _PURGE_AT.pack(purge_at_ms) + loc_key


def split_purge_key(encoded: bytes) -> tuple[int, bytes]:
    """Decode a purge-index key into (purge_at_ms, location key)."""
    return _PURGE_AT.unpack_from(encoded)[0], bytes(encoded[_PURGE_AT.size :])


def encode(obj: StoredObject) -> bytes:
    """Serialise a record (header, metadata JSON, value)."""
    meta = json.dumps(
        {
            "ct": obj.content_type,
            "cs": obj.charset,
            "um": [list(pair) for pair in obj.usermeta],
            "vc": obj.vclock,
            "vt": obj.vtag,
        },
        separators=(",", ":"),
    ).encode()
    flags = FLAG_TOMBSTONE if obj.tombstone else 0
    header = _HEADER.pack(FORMAT_VERSION, flags, 0, obj.write_time_ms, obj.purge_at_ms, len(meta))
    return b"".join((header, meta, obj.value))


def decode_times(raw: bytes | memoryview) -> tuple[int, int, bool]:
    """(write_time_ms, purge_at_ms, tombstone) of a record, without decoding the rest."""
    _, flags, _, write_ms, purge_ms, _ = _HEADER.unpack_from(raw)
    return write_ms, purge_ms, bool(flags & FLAG_TOMBSTONE)


def decode(raw: bytes | memoryview) -> StoredObject:
    """Deserialise a record; the value is copied out of ``raw`` exactly once.

    Raises:
        ValueError: the record is not of a format version this code reads.
    """
    version, flags, _, write_ms, purge_ms, meta_len = _HEADER.unpack_from(raw)
    if version != FORMAT_VERSION:
        raise ValueError(f"store record format {version} is not readable (want {FORMAT_VERSION})")
    start = _HEADER.size
    meta = json.loads(bytes(raw[start : start + meta_len]))
    return StoredObject(
        value=bytes(raw[start + meta_len :]),
        content_type=meta["ct"],
        charset=meta["cs"],
        usermeta=tuple((str(k), str(v)) for k, v in meta["um"]),
        vclock=meta["vc"],
        vtag=meta["vt"],
        write_time_ms=write_ms,
        purge_at_ms=purge_ms,
        tombstone=bool(flags & FLAG_TOMBSTONE),
    )
