"""Metadata read-merge-write: concurrent writers of one ``<epoch>-<dc>`` never drop an
entry another wrote (ZooKeeper lock across processes, re-read verification)."""

from __future__ import annotations

import threading

import pytest

from eventstore.names import ChunkRef, parse_metadata
from eventstore.riak import RiakClient
from relocator.metadata import MetadataWriter
from relocator.settings import ZooKeeperSettings
from relocator.testing import ZooKeeperProcess
from relocator.zk import ZkCoordinator

pytestmark = pytest.mark.integration


def test_racing_writers_with_zookeeper_lock_keep_every_entry(
    riak: RiakClient, riak_url: str, zookeeper_server: ZooKeeperProcess, zookeeper: str, dc: str
) -> None:
    coordinators = [
        ZkCoordinator(
            ZooKeeperSettings(zookeeper_server.hosts, zookeeper, 5.0), writer_id=w, units=1
        )
        for w in (1, 2)
    ]
    writers = []
    for c in coordinators:
        c.start()
        # one writer per "relocator": separate in-process locks, shared ZooKeeper lock
        writers.append(
            MetadataWriter(bucket_type="epochs", bucket="epochs", max_rounds=5, lock=c.lock)
        )
    epoch = 1_700_000_000
    errors: list[BaseException] = []

    def work(w: int) -> None:
        client = RiakClient([riak_url])
        try:
            for i in range(25):
                writers[w - 1].merge("a", client, epoch, dc, [ChunkRef("web", f"w{w}", i)])
        except BaseException as e:  # reported below
            errors.append(e)
        finally:
            client.close()

    threads = [threading.Thread(target=work, args=(w,)) for w in (1, 2) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in coordinators:
        c.stop()
    assert not errors, errors
    value = riak.get("epochs", "epochs", f"{epoch}-{dc}").value
    entries = {r.format() for r in parse_metadata(value)}
    assert entries == {f"web:w{w}:{i}" for w in (1, 2) for i in range(25)}


def test_merge_keeps_entries_written_by_someone_else(riak: RiakClient, dc: str) -> None:
    epoch = 1_700_000_001
    riak.put("epochs", "epochs", f"{epoch}-{dc}", b"lb:haproxy:7|web::3", content_type="text/plain")
    writer = MetadataWriter(bucket_type="epochs", bucket="epochs", max_rounds=3)
    value = writer.merge("a", riak, epoch, dc, [ChunkRef("web", "", 10), ChunkRef("web", "", 3)])
    assert value == "lb:haproxy:7|web::10|web::3"
    # idempotent: merging the same entries again writes nothing new
    assert writer.merge("a", riak, epoch, dc, [ChunkRef("web", "", 10)]) == value
