"""Reading one chunk for processing: fetched from the local node, verified and decoded
once within the decode limits.

Every failure is a :class:`~companion.errors.InputChunkUnreadable` whose message starts with
what every matching substream's ``error`` result will say: ``chunk_unreadable:`` (not
found, unreachable, bad checksum, not Sereal, not an array) or ``too_large:`` (its body
would decode to more than the limits allow: refused from the header, before anything
is decompressed; companion/DESIGN.md, failure scenario 13).
"""

from __future__ import annotations

from companion.errors import InputChunkUnreadable
from eventstore.blob import DecodeLimits, unpack_blob
from eventstore.errors import BlobTooLarge, EventStoreError
from eventstore.names import ChunkKey, Namespaces
from eventstore.riak import NotFound, RiakClient, RiakError
from substreams.api import Event

__all__ = ["decode_chunk", "fetch_chunk"]


def fetch_chunk(riak: RiakClient, namespaces: Namespaces, key: ChunkKey) -> bytes:
    """The chunk's stored blob.

    Raises:
        InputChunkUnreadable: not found, or the node could not be read.
    """
    try:
        return riak.get(*namespaces.chunk_location(key)).value
    except NotFound as e:
        raise InputChunkUnreadable(f"chunk_unreadable: {key} not found") from e
    except RiakError as e:
        raise InputChunkUnreadable(f"chunk_unreadable: {key} could not be read: {e}") from e


def decode_chunk(key: ChunkKey, blob: bytes, limits: DecodeLimits) -> list[Event]:
    """The chunk's events, verified and decoded.

    Raises:
        InputChunkUnreadable: over the decode limits, corrupt, or not an array of events.
    """
    try:
        events = unpack_blob(blob, key=key.format(), limits=limits)
    except BlobTooLarge as e:
        raise InputChunkUnreadable(f"too_large: {e}") from e
    except EventStoreError as e:
        raise InputChunkUnreadable(f"chunk_unreadable: {e}") from e
    if not isinstance(events, list):
        raise InputChunkUnreadable(
            f"chunk_unreadable: {key} holds a {type(events).__name__}, not an array of events"
        )
    # Elements are whatever the producers sent; plugins treat them defensively
    # (substreams.helpers), so they are passed on as they are.
    return events
