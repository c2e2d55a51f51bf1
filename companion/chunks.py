"""Reading one chunk for processing: fetched from the local node and checked by the
chunk thread; decoded, within the decode limits, in the child that runs its
substreams (or by the chunk thread when each substream runs in a child of its own).

Every failure is a :class:`~companion.errors.InputChunkUnreadable` whose message starts with
what every matching substream's ``error`` result will say: ``chunk_unreadable:`` (not
found, unreachable, bad checksum, not Sereal, not an array) or ``too_large:`` (its body
would decode to more than the limits allow: refused from the header, before anything
is decompressed; companion/DESIGN.md, failure scenario 13).
"""

from __future__ import annotations

import functools

from companion.errors import InputChunkUnreadable
from eventstore.blob import DecodeLimits, verify_postfix
from eventstore.errors import BlobTooLarge, EventStoreError
from eventstore.names import ChunkKey, Namespaces
from eventstore.riak import NotFound, RiakClient, RiakError
from eventstore.riak.defaults import CONFIRMED_ABSENCE
from sereal_codec.projection import Tree, project_events
from substreams import run
from substreams.api import Event
from substreams.child import Loader
from substreams.protocol import Isolation
from substreams.run import UndecodableChunk

__all__ = ["check_chunk", "chunk_source", "decode_chunk", "fetch_chunk"]


def fetch_chunk(riak: RiakClient, namespaces: Namespaces, key: ChunkKey) -> bytes:
    """The chunk's stored blob.

    Raises:
        InputChunkUnreadable: not found, or the node could not be read.
    """
    try:
        return riak.get(*namespaces.chunk_location(key), **CONFIRMED_ABSENCE).value
    except NotFound as e:
        raise InputChunkUnreadable(f"chunk_unreadable: {key} not found") from e
    except RiakError as e:
        raise InputChunkUnreadable(f"chunk_unreadable: {key} could not be read: {e}") from e


def check_chunk(key: ChunkKey, blob: bytes, limits: DecodeLimits) -> None:
    """What can be told without decoding: the checksum, the Sereal header, and the body
    size it claims against the limits (nothing is decompressed).

    Raises:
        InputChunkUnreadable: a bad or missing checksum, a malformed header, or a body
            over the limits (``too_large:``).
    """
    try:
        document = verify_postfix(blob, key.format())
        limits.check(document, len(blob), key.format())
    except BlobTooLarge as e:
        raise InputChunkUnreadable(f"too_large: {e}") from e
    except EventStoreError as e:
        raise InputChunkUnreadable(f"chunk_unreadable: {e}") from e


def decode_chunk(
    key: ChunkKey, blob: bytes, limits: DecodeLimits, fields: Tree | None = None
) -> list[Event]:
    """The chunk's events, verified and decoded (``substreams.run.decode_chunk``,
    which a companion worker's fork server runs in its children).

    Args:
        key, blob: the chunk.
        limits: the decode limits (checked from the header first; the decompressor
            and the objects built are bounded by them).
        fields: the fields of each event to keep (``sereal_codec/projection.py``);
            None: all.

    Raises:
        InputChunkUnreadable: over the decode limits (or out of memory decoding),
            corrupt, or not an array of events.
    """
    try:
        return run.decode_chunk(key.format(), blob, limits, fields)
    except UndecodableChunk as e:
        raise InputChunkUnreadable(str(e)) from e


def chunk_source(key: ChunkKey, blob: bytes, limits: DecodeLimits, isolation: Isolation) -> Loader:
    """How the chunk's runs get its events (both narrow them to each substream's
    fields in the child: ``substreams.sandbox.run_substreams``).

    Isolation ``"chunk"``: the blob, checked here, decoded in each child (the shared
    one, a lane's) with its substreams' fields, so the caller neither builds nor frees
    the events. ``"substream"``: decoded here once for all the children (decoding in
    each would cost one decode per substream).

    Raises:
        InputChunkUnreadable: see :func:`check_chunk` (and :func:`decode_chunk` when
            decoded here).
    """
    if isolation == "chunk":
        check_chunk(key, blob, limits)
        return functools.partial(decode_chunk, key, blob, limits)
    events = decode_chunk(key, blob, limits)
    return functools.partial(project_events, events)
