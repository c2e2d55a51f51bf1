"""Writing epochs as relocators write them, for tests and examples against a devnode or
a real Riak (every chunk first, the epoch's metadata last), and reading split chunks
back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventstore.blob import pack_blob, unpack_blob
from eventstore.chunking import Chunk
from eventstore.names import ChunkKey, MetadataKey, format_metadata
from eventstore.riak import RiakClient

__all__ = ["Spec", "store_chunks", "stored_by_type", "unpacked_events", "write_epoch"]

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


def stored_by_type(
    events: Sequence[dict[str, Any]], per_chunk: int, *, empty: bool = False
) -> list[tuple[ChunkKey, bytes, list[Any]]]:
    """The ``web``, ``lb`` and ``cron`` events of ``events`` cut into chunks of
    ``per_chunk`` in order, as stored: ``(key, blob, the blob's events decoded back)``
    (through the stored form, so a caller sees what a reader decodes). A type's chunks
    are of epoch ``1_700_000_000 + i`` (i its index in that list), dc ``dc1``, subtype
    ``main``; ``empty`` adds an empty ``web`` chunk last (epoch 1_700_000_009, subtype
    ``""``).
    """
    out = []
    for i, type_ in enumerate(("web", "lb", "cron")):
        of_type = [e for e in events if e["type"] == type_]
        for chunk, start in enumerate(range(0, len(of_type), per_chunk)):
            key = ChunkKey(1_700_000_000 + i, "dc1", type_, "main", chunk)
            blob = pack_blob(of_type[start : start + per_chunk])
            out.append((key, blob, unpack_blob(blob, key=key.format())))
    if empty:
        out.append((ChunkKey(1_700_000_009, "dc1", "web", "", 0), pack_blob([]), []))
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
