"""Metadata read-merge-write: concurrent writers of one ``<epoch>-<dc>`` never drop an
entry another wrote (ZooKeeper lock across processes, re-read verification)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from eventstore.names import ChunkRef, parse_metadata
from eventstore.riak import RiakClient
from relocator.metadata import MetadataWriter
from relocator.settings import ZooKeeperSettings
from relocator.testing import ZooKeeperProcess
from relocator.zk import ZkCoordinator


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


class _LateWriter(RiakClient):
    """A client whose next PUT to ``key`` is preceded by another writer's merge: the
    interleaving a late PUT (a retry, a stalled node) or a writer outside the lock
    makes, forced in order against the real store."""

    def __init__(self, url: str, key: str, before_put: Callable[[], object]) -> None:
        super().__init__([url])
        self._key = key
        self._before_put: Callable[[], object] | None = before_put

    def put(self, bucket_type: str | None, bucket: str, key: str, value: bytes, **kw: Any) -> Any:
        if key == self._key and self._before_put is not None:
            before, self._before_put = self._before_put, None
            before()
        return super().put(bucket_type, bucket, key, value, **kw)


def _merge_with_another_between(
    riak: RiakClient, riak_url: str, epoch: int, dc: str, *, theirs: ChunkRef, ours: ChunkRef
) -> tuple[str, list[str]]:
    """Our merge of ``ours`` with another writer's merge of ``theirs`` forced between
    our read and our PUT; our merge's result and the rounds it repaired."""
    other = MetadataWriter(bucket_type="epochs", bucket="epochs", max_rounds=3)
    repairs: list[str] = []
    writer = MetadataWriter(
        bucket_type="epochs", bucket="epochs", max_rounds=3, on_repair=repairs.append
    )
    client = _LateWriter(
        riak_url, f"{epoch}-{dc}", lambda: other.merge("a", riak, epoch, dc, [theirs])
    )
    try:
        return writer.merge("a", client, epoch, dc, [ours]), repairs
    finally:
        client.close()


def test_a_write_since_our_read_is_never_overwritten(
    riak: RiakClient, riak_url: str, dc: str
) -> None:
    """Between our read and our PUT another writer adds an entry: our PUT is refused
    (If-Match), the next round merges both; an unconditional PUT would drop theirs."""
    epoch = 1_700_000_002
    riak.put("epochs", "epochs", f"{epoch}-{dc}", b"web::1", content_type="text/plain")
    value, repairs = _merge_with_another_between(
        riak, riak_url, epoch, dc, theirs=ChunkRef("web", "", 2), ours=ChunkRef("web", "", 3)
    )
    assert value == "web::1|web::2|web::3"
    assert riak.get("epochs", "epochs", f"{epoch}-{dc}").value == b"web::1|web::2|web::3"
    assert repairs == ["a"]  # the second round


def test_a_new_key_created_since_our_read_is_never_overwritten(
    riak: RiakClient, riak_url: str, dc: str
) -> None:
    """The same when the key did not exist at our read (If-None-Match: *)."""
    value, repairs = _merge_with_another_between(
        riak, riak_url, 1_700_000_003, dc, theirs=ChunkRef("lb", "", 5), ours=ChunkRef("web", "", 3)
    )
    assert value == "lb::5|web::3"
    assert repairs == ["a"]
