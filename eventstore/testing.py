"""Writing epochs as relocators write them, for tests and examples against a devnode or
a real Riak (every chunk first, the epoch's metadata last), and reading split chunks
back."""

from __future__ import annotations

from typing import Any

from eventstore.blob import pack_blob, unpack_blob
from eventstore.chunking import Chunk
from eventstore.names import ChunkKey, MetadataKey, format_metadata
from eventstore.riak import RiakClient

__all__ = ["Spec", "store_chunks", "unpacked_events", "write_epoch"]

#: (type, subtype) -> the events of each of its chunks, in chunk order.
Spec = dict[tuple[str, str], list[list[dict[str, Any]]]]


def unpacked_events(chunks: list[Chunk]) -> list[Any]:
    """Every event of ``chunks``, in order, each chunk's blob unpacked.

    Raises:
        AssertionError: a chunk's blob is not an array of ``count`` events.
    """
    out: list[Any] = []
    for c in chunks:
        value = unpack_blob(c.data, key="t")
        assert isinstance(value, list)
        assert len(value) == c.count
        out.extend(value)
    return out


def write_epoch(riaks: list[RiakClient], epoch: int, dc: str, spec: Spec) -> list[ChunkKey]:
    """Store each chunk of ``spec`` in every client's cluster, then the metadata.

    Returns:
        The chunk keys in metadata order ((type, subtype) sorted, then chunk number).
    """
    blobs = [
        (type_, subtype, pack_blob(events))
        for (type_, subtype), chunks in sorted(spec.items())
        for events in chunks
    ]
    return store_chunks(riaks, epoch, dc, blobs)


def store_chunks(
    riaks: list[RiakClient], epoch: int, dc: str, blobs: list[tuple[str, str, bytes]]
) -> list[ChunkKey]:
    """Store stored-format blobs ``(type, subtype, blob)`` as the chunks of one epoch-dc,
    numbered in order within each (type, subtype), in every client's cluster; then the
    metadata listing them in that order. Returns the keys."""
    keys = []
    numbers: dict[tuple[str, str], int] = {}
    for type_, subtype, blob in blobs:
        number = numbers[type_, subtype] = numbers.get((type_, subtype), -1) + 1
        key = ChunkKey(epoch, dc, type_, subtype, number)
        for riak in riaks:
            riak.put("events", "events", key.format(), blob)
        keys.append(key)
    for riak in riaks:
        riak.put(
            "epochs",
            "epochs",
            MetadataKey(epoch, dc).format(),
            format_metadata(keys).encode(),
            content_type="text/plain",
        )
    return keys
