"""The devnode's LMDB store (a real LMDB environment in a temp dir; no sockets)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from devnode import records
from devnode.records import StoredObject
from devnode.store import ObjectStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ObjectStore]:
    s = ObjectStore(tmp_path / "lmdb", map_size_bytes=64 * 1024**2, write_batch_max=64)
    yield s
    s.close()


def obj(
    value: bytes, write_ms: int = 1, purge_ms: int = 0, tombstone: bool = False
) -> StoredObject:
    return StoredObject(
        value,
        "application/octet-stream",
        vclock="v",
        vtag="t",
        write_time_ms=write_ms,
        purge_at_ms=purge_ms,
        tombstone=tombstone,
    )


def test_write_read_overwrite(store: ObjectStore) -> None:
    key = records.location_key("events", "events", "k")
    assert store.read(key) is None
    store.write(key, obj(b"one")).result()
    store.write(key, obj(b"two", write_ms=2)).result()
    got = store.read(key)
    assert got is not None and got.value == b"two"
    assert store.entries() == 1


def test_concurrent_writes_share_commits(store: ObjectStore) -> None:
    keys = [records.location_key("events", "events", f"k{i}") for i in range(400)]
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda k: store.write(k, obj(k)).result(), keys))
    assert store.entries() == 400
    assert store.committed_ops == 400
    assert store.commits < 400  # group commit: several writes per transaction
    assert all((o := store.read(k)) is not None and o.value == k for k in keys)


def test_purge_follows_overwrites(store: ObjectStore) -> None:
    a = records.location_key("t", "b", "a")
    b = records.location_key("t", "b", "b")
    store.write(a, obj(b"a", write_ms=1, purge_ms=100)).result()
    store.write(b, obj(b"b", write_ms=1, purge_ms=100)).result()
    store.write(b, obj(b"b2", write_ms=2, purge_ms=300)).result()  # moved later
    assert store.purge_due(200, limit=10).result() == 1
    assert store.read(a) is None
    assert store.read(b) is not None
    assert store.purge_due(200, limit=10).result() == 0
    assert store.purge_due(300, limit=10).result() == 1
    assert store.entries() == 0


def test_purge_one_only_removes_the_version_it_saw(store: ObjectStore) -> None:
    key = records.location_key("t", "b", "k")
    store.write(key, obj(b"old", write_ms=1, purge_ms=50)).result()
    store.write(key, obj(b"new", write_ms=2, purge_ms=500)).result()
    assert store.purge_one(key, 1).result() is False
    assert store.purge_one(key, 2).result() is True
    assert store.read(key) is None


def test_props_persist_across_reopen(tmp_path: Path) -> None:
    s = ObjectStore(tmp_path / "lmdb", map_size_bytes=64 * 1024**2, write_batch_max=8)
    s.save_props(b"type\x00events", b'{"r": 2}').result()
    s.close()
    again = ObjectStore(tmp_path / "lmdb", map_size_bytes=64 * 1024**2, write_batch_max=8)
    assert again.load_props() == {b"type\x00events": b'{"r": 2}'}
    again.close()


def test_a_failing_write_fails_alone(tmp_path: Path) -> None:
    s = ObjectStore(tmp_path / "lmdb", map_size_bytes=4 * 1024**2, write_batch_max=64)
    small = [records.location_key("t", "b", f"s{i}") for i in range(20)]
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(lambda k: s.write(k, obj(b"x" * 100)).result(), k) for k in small]
        big = s.write(records.location_key("t", "b", "big"), obj(b"x" * 8 * 1024**2))
        for f in futures:
            f.result()
    with pytest.raises(Exception, match="store write failed"):
        big.result()
    assert all(s.read(k) is not None for k in small)
    s.close()
