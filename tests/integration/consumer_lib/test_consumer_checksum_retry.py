"""A corrupted copy on one node of the node list, a good one on another: detected, read
again from the OTHER node and served; no good copy anywhere: an error naming the key.

Two real devnodes stand for two replicas (the devnode does not replicate, so each is
written separately, as a relocator writing both would)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from consumer_helpers import sample_spec, write_epoch
from prometheus_client import REGISTRY

from consumer_lib import ChunkCorrupt, ConsumerError, EventsClient
from devnode.testing import DevnodeProcess
from eventstore.blob import pack_blob
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient

E0 = 1_700_000_100


@pytest.fixture
def two_nodes(devnode_factory: type[DevnodeProcess], tmp_path: Path) -> Iterator[list[str]]:
    nodes = [devnode_factory(tmp_path / f"n{i}" / "data").start() for i in range(2)]
    yield [n.url for n in nodes]


def corrupt(riak: RiakClient, key: ChunkKey, events: list[dict[str, object]]) -> None:
    blob = bytearray(pack_blob(events))
    blob[len(blob) // 3] ^= 0xFF  # one flipped byte inside the document
    riak.put("events", "events", key.format(), bytes(blob))


def retries() -> float:
    return REGISTRY.get_sample_value("consumer_checksum_retries_total") or 0.0


def test_corrupted_copy_is_retried_on_the_other_node(two_nodes: list[str], dc: str) -> None:
    bad_url, good_url = two_nodes
    bad, good = RiakClient([bad_url]), RiakClient([good_url])
    spec = sample_spec(E0, web_chunks=3)
    keys = write_epoch([bad, good], E0, dc, spec)
    victim = ChunkKey(E0, dc, "web", "app", 1)
    corrupt(bad, victim, spec[("web", "app")][1])
    before = retries()
    with EventsClient([bad_url, good_url], concurrency=2) as client:
        # Round robin: of two reads in a row, one goes to the bad node first.
        served = [client.store.chunk(victim) for _ in range(2)]
        assert {c.node for c in served} == {good_url}
        assert sorted(c.bad_nodes for c in served) == [(), (bad_url,)]
        assert all(c.events == spec[("web", "app")][1] for c in served)
        for _ in range(2):  # through the reader, whichever node each read starts on
            (epoch,) = client.epochs(dc, E0, E0 + 1)
            assert [c.key for c in epoch.chunks] == keys
            assert epoch.events == [e for t in sorted(spec) for ch in spec[t] for e in ch]
    assert retries() >= before + 1
    bad.close()
    good.close()


def test_no_good_copy_anywhere_is_an_error_naming_the_key(two_nodes: list[str], dc: str) -> None:
    riaks = [RiakClient([u]) for u in two_nodes]
    spec = sample_spec(E0, web_chunks=2)
    write_epoch(riaks, E0, dc, spec)
    victim = ChunkKey(E0, dc, "web", "app", 0)
    for riak in riaks:
        corrupt(riak, victim, spec[("web", "app")][0])
    with EventsClient(two_nodes) as client, pytest.raises(ChunkCorrupt) as info:
        list(client.epochs(dc, E0, E0 + 1))
    error = info.value
    assert isinstance(error, ConsumerError) and not error.retriable
    assert (error.epoch, error.dc, error.key) == (E0, dc, victim.format())
    assert sorted(error.nodes) == sorted(two_nodes)
    assert victim.format() in str(error)
    for riak in riaks:
        riak.close()


def test_truncated_copy_is_retried_too(two_nodes: list[str], dc: str) -> None:
    bad_url, good_url = two_nodes
    riaks = [RiakClient([u]) for u in two_nodes]
    spec = sample_spec(E0, web_chunks=1)
    write_epoch(riaks, E0, dc, spec)
    victim = ChunkKey(E0, dc, "lb", "edge", 0)
    whole = pack_blob(spec[("lb", "edge")][0])
    riaks[0].put("events", "events", victim.format(), whole[:-5])  # cut off: no postfix
    with EventsClient([bad_url, good_url]) as client:
        served = [client.store.chunk(victim) for _ in range(2)]
    assert sorted(c.bad_nodes for c in served) == [(), (bad_url,)]
    assert all(c.events == spec[("lb", "edge")][0] for c in served)
    for riak in riaks:
        riak.close()
