"""A chunk inflating far beyond its stored size gives the consumer one clear error
(issue 12.6): ChunkTooLarge naming the key, the size and the cap, raised before the
body is decompressed; normal chunks of the same epoch read as before. A chunk within
the byte cap whose body builds too many objects (16 million empty hashes) is the same
ChunkTooLarge, stopped by the decoder's object budget with bounded memory."""

from __future__ import annotations

import tracemalloc

import pytest

from consumer_lib import ChunkUnreadable, EventsClient
from consumer_lib.errors import ChunkTooLarge
from consumer_lib.store import Store
from eventstore.blob import (
    DECODED_FLOOR_BYTES,
    MAX_DECODED_OBJECTS,
    BlobTooManyObjects,
    DecodeLimits,
    add_postfix,
    pack_blob,
)
from eventstore.names import Namespaces
from eventstore.riak import RiakClient
from eventstore.testing import store_chunks
from relocator.events import generate_events
from sereal_codec.document import wrap_body
from sereal_codec.testing import inflating_document, object_bomb_body

EPOCH = 1_700_000_600
INFLATED = 250_000_000


def test_a_chunk_inflating_to_250_mb_is_a_clear_error(
    client: EventsClient, riak: RiakClient, dc: str
) -> None:
    normal = pack_blob([e for e in generate_events(200, seed=5) if e["type"] == "web"])
    bomb = add_postfix(inflating_document(INFLATED))
    keys = store_chunks([riak], EPOCH, dc, [("web", "main", normal), ("web", "main", bomb)])

    assert client.store.chunk(keys[0]).events  # a normal chunk: unaffected
    tracemalloc.start()
    try:
        with pytest.raises(ChunkTooLarge) as info:
            client.store.chunk(keys[1])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # nothing was inflated
    e = info.value
    assert isinstance(e, ChunkUnreadable) and not e.retriable
    assert (e.epoch, e.dc, e.key) == (EPOCH, dc, keys[1].format())
    assert str(INFLATED) in str(e) and str(DECODED_FLOOR_BYTES) in str(e)
    # through the full stream too: the epoch's read stops with the same error
    with pytest.raises(ChunkTooLarge):
        list(client.events(dc, EPOCH, EPOCH + 1))


def test_the_caps_are_the_store_s_to_choose(riak: RiakClient, dc: str) -> None:
    blob = add_postfix(inflating_document(1_000_000))
    (key,) = store_chunks([riak], EPOCH + 1, dc, [("web", "main", blob)])
    nodes = riak.nodes.nodes
    tight = Store(nodes, namespaces=Namespaces(), decode_limits=DecodeLimits(floor_bytes=0))
    roomy = Store(nodes, namespaces=Namespaces())
    try:
        with pytest.raises(ChunkTooLarge):
            tight.chunk(key)
        with pytest.raises(ChunkUnreadable, match="not an array"):  # decoded: a string
            roomy.chunk(key)
    finally:
        tight.close()
        roomy.close()


def test_a_chunk_of_16_million_empty_hashes_is_too_large_with_bounded_memory(
    client: EventsClient, riak: RiakClient, dc: str
) -> None:
    body = object_bomb_body("empty_hashes", 16_000_000)
    assert len(body) < DECODED_FLOOR_BYTES  # within the byte cap of any chunk
    bomb = add_postfix(wrap_body(body, compress="zstd"))
    del body
    (key,) = store_chunks([riak], EPOCH + 2, dc, [("web", "main", bomb)])

    tracemalloc.start()
    try:
        with pytest.raises(ChunkTooLarge) as info:
            client.store.chunk(key)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # stopped at the default budget: ~2 million dicts and the 16 MB body, where
    # decoding them all takes ~1.2 GB
    assert peak < 200 * 2**20, peak
    e = info.value
    assert (e.epoch, e.dc, e.key) == (EPOCH + 2, dc, key.format()) and not e.retriable
    cause = e.__cause__
    assert isinstance(cause, BlobTooManyObjects) and cause.max_objects == MAX_DECODED_OBJECTS
    assert f"builds more than {MAX_DECODED_OBJECTS} objects" in str(e)
