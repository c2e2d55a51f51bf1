"""Writing epochs as relocators write them, for tests and examples against a devnode or
a real Riak: every chunk first, the epoch's metadata last."""

from __future__ import annotations

from typing import Any

from eventstore.blob import pack_blob
from eventstore.names import ChunkKey, MetadataKey, format_metadata
from eventstore.riak import RiakClient

__all__ = ["Spec", "write_epoch"]

#: (type, subtype) -> the events of each of its chunks, in chunk order.
Spec = dict[tuple[str, str], list[list[dict[str, Any]]]]


def write_epoch(riaks: list[RiakClient], epoch: int, dc: str, spec: Spec) -> list[ChunkKey]:
    """Store each chunk of ``spec`` in every client's cluster, then the metadata.

    Returns:
        The chunk keys in metadata order ((type, subtype) sorted, then chunk number).
    """
    keys = []
    for (type_, subtype), chunks in sorted(spec.items()):
        for number, events in enumerate(chunks):
            key = ChunkKey(epoch, dc, type_, subtype, number)
            for riak in riaks:
                riak.put("events", "events", key.format(), pack_blob(events))
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
