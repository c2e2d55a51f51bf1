"""Helpers of the consumer library's integration tests: epochs written as relocators
write them (chunks first, metadata last)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventstore.blob import pack_blob
from eventstore.names import ChunkKey, format_metadata
from eventstore.riak import RiakClient

Spec = dict[tuple[str, str], list[list[dict[str, Any]]]]
Writer = Callable[..., list[ChunkKey]]


def write_epoch(riaks: list[RiakClient], epoch: int, dc: str, spec: Spec) -> list[ChunkKey]:
    """Write each chunk of ``spec`` ((type, subtype) -> list of chunks' events) to every
    client's store, then the metadata. Returns the keys in chunk order."""
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
            f"{epoch}-{dc}",
            format_metadata(keys).encode(),
            content_type="text/plain",
        )
    return keys


def sample_spec(epoch: int, *, web_chunks: int = 12) -> Spec:
    """web:app in ``web_chunks`` chunks (so "web:app:10" sorts before "web:app:2" in the
    metadata), lb:edge in one, cron with an empty subtype in one."""
    return {
        ("web", "app"): [
            [{"epoch": epoch, "type": "web", "chunk": c, "i": i} for i in range(3)]
            for c in range(web_chunks)
        ],
        ("lb", "edge"): [[{"epoch": epoch, "type": "lb", "i": i} for i in range(2)]],
        ("cron", ""): [[{"epoch": epoch, "type": "cron", "i": 0}]],
    }
