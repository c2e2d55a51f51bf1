"""Writing epochs as relocators write them, for tests and examples against a devnode or
a real Riak (every chunk first, the epoch's metadata last: :func:`write_epoch`,
:func:`store_events`, :func:`store_chunks`), and reading split chunks back; the designed
props of the chunk bucket types; a config file refused.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eventstore.blob import pack_blob, unpack_blob
from eventstore.chunking import CHUNK_MAX_BYTES, Chunk, chunk_events
from eventstore.names import ChunkKey, MetadataKey, format_metadata
from eventstore.riak import RiakClient
from eventstore.settings import SettingsError

__all__ = [
    "DESIGNED_CHUNK_PROPS",
    "Spec",
    "config_refusal",
    "relocated_blobs",
    "store_chunks",
    "store_events",
    "stored_by_type",
    "unpacked_events",
    "write_epoch",
]

#: (type, subtype) -> the events of each of its chunks, in chunk order.
Spec = dict[tuple[str, str], list[list[dict[str, Any]]]]

#: The props of the ``events`` and ``epochs`` bucket types as shared/DESIGN.md section 3
#: designs them (immutable chunks: no siblings, the last write wins, w of all three
#: replicas, r of one). Written out here, not taken from the devnode's defaults, so that
#: a test comparing a store's props with them can fail.
DESIGNED_CHUNK_PROPS: dict[str, Any] = {
    "n_val": 3,
    "allow_mult": False,
    "last_write_wins": True,
    "w": 3,
    "dw": 0,
    "pw": 0,
    "r": 1,
    "pr": 0,
    "notfound_ok": True,
    "basic_quorum": True,
}


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


def store_events(
    riaks: list[RiakClient],
    epoch: int,
    dc: str,
    events: Sequence[dict[str, Any]],
    *,
    chunk_max_bytes: int = CHUNK_MAX_BYTES,
) -> list[ChunkKey]:
    """Store ``events`` as one epoch-dc as a relocator does: grouped by (type, subtype),
    each group cut into chunks of at most ``chunk_max_bytes`` (:func:`chunk_events`), in
    every client's cluster (:func:`store_chunks`). Returns the keys in metadata order."""
    blobs = relocated_blobs(events, chunk_max_bytes=chunk_max_bytes)
    return store_chunks(riaks, epoch, dc, blobs)


def relocated_blobs(
    events: Sequence[dict[str, Any]], *, chunk_max_bytes: int = CHUNK_MAX_BYTES
) -> list[tuple[str, str, bytes]]:
    """``events`` as a relocator cuts one epoch-dc: grouped by (type, subtype) in name
    order, each group's chunks (:func:`chunk_events`) in order: ``(type, subtype, blob)``
    each, as :func:`store_chunks` takes them."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        groups[(event["type"], event["subtype"])].append(event)
    return [
        (type_, subtype, chunk.data)
        for (type_, subtype), group in sorted(groups.items())
        for chunk in chunk_events(group, chunk_max_bytes=chunk_max_bytes)
    ]


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


def config_refusal(load: Callable[[Path], object], path: Path, text: str) -> str:
    """Write ``text`` to the config file ``path``, load it with ``load`` (a daemon's
    settings loader) and return the message of the :class:`SettingsError` it raises.

    Raises:
        AssertionError: the file was accepted.
    """
    path.write_text(text)
    try:
        load(path)
    except SettingsError as e:
        return str(e)
    raise AssertionError(f"{path} was accepted: {text!r}")
