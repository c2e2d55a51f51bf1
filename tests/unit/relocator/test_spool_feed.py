"""The spool path without ZooKeeper: a real spool directory, sealer and state store."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import sereal_codec as sereal
from eventstore.blob import unpack_blob
from relocator.intake.spool import Spool
from relocator.metrics import Metrics
from relocator.sealer import Sealer
from relocator.spool_feed import FILES_PER_TICK, SpoolFeed


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(2) as p:
        yield p


def _feed(
    directory: Path, pool: ThreadPoolExecutor, max_bytes: int = 1 << 20
) -> tuple[SpoolFeed, Metrics]:
    reserve = itertools.count(40).__next__
    m = Metrics()
    sealer = Sealer(
        writer_id=7, reserve_seq=reserve, chunk_max_bytes=20_000, compress="zstd", metrics=m
    )
    spool = Spool(directory, units=4, max_bytes=max_bytes)
    feed = SpoolFeed(spool, sealer=sealer, reserve_seq=reserve, pool=pool, metrics=m, writer_id=7)
    return feed, m


def _drop(directory: Path, name: str, events: list[dict[str, int]]) -> None:
    (directory / name).write_bytes(sereal.encode(events))


def test_waiting_files_are_numbered_in_name_order_sealed_or_rejected(
    tmp_path: Path, pool: ThreadPoolExecutor
) -> None:
    feed, metrics = _feed(tmp_path, pool)
    _drop(tmp_path, "100-ams1-web-www-b.srl", [{"id": 2}, {"id": 3}])
    _drop(tmp_path, "100-ams1-web-www-a.srl", [{"id": 1}])
    _drop(tmp_path, "100-ams1-web-www-c.srl", [{"id": 4}])  # already inside a stored batch
    (tmp_path / "100-ams1-web-www-bad.srl").write_bytes(sereal.encode({"not": "an array"}))

    batches = feed.seal_waiting(taken={"100-ams1-web-www-c.srl"})

    assert [(b.spool, b.id) for b in batches] == [
        ("100-ams1-web-www-a.srl", "0007-000000000040"),
        ("100-ams1-web-www-b.srl", "0007-000000000041"),
    ]
    assert [e for v in batches[1].values for e in unpack_blob(v)] == [{"id": 2}, {"id": 3}]
    assert (tmp_path / ".rejected" / "100-ams1-web-www-bad.srl").exists()
    assert metrics.spool_files.labels("sealed")._value.get() == 2
    assert metrics.spool_files.labels("rejected")._value.get() == 1
    assert metrics.received.labels("spool")._value.get() == 3
    # sealing deletes nothing: a file goes only once every cluster holds its batch
    assert (tmp_path / "100-ams1-web-www-a.srl").exists()


def test_a_round_takes_at_most_files_per_tick(tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    feed, _ = _feed(tmp_path, pool)
    for i in range(FILES_PER_TICK + 2):
        _drop(tmp_path, f"100-ams1-web-www-f{i:03d}.srl", [{"id": i}])
    first = feed.seal_waiting(taken=set())
    assert len(first) == FILES_PER_TICK
    second = feed.seal_waiting(taken={b.spool for b in first})
    assert [b.spool for b in second] == [
        f"100-ams1-web-www-f{i:03d}.srl" for i in (FILES_PER_TICK, FILES_PER_TICK + 1)
    ]


def test_a_finished_file_is_deleted_and_counted(tmp_path: Path, pool: ThreadPoolExecutor) -> None:
    feed, metrics = _feed(tmp_path, pool)
    _drop(tmp_path, "100-ams1-web-www-a.srl", [{"id": 1}])
    (batch,) = feed.seal_waiting(taken=set())
    feed.finished(batch.spool)
    feed.forget_progress()  # without ZooKeeper: nothing to forget
    assert not (tmp_path / batch.spool).exists()
    assert metrics.spool_files.labels("pushed")._value.get() == 1
    assert feed.may_push(batch.spool)


def test_a_file_over_max_spool_bytes_is_rejected_and_the_round_goes_on(
    tmp_path: Path, pool: ThreadPoolExecutor
) -> None:
    feed, metrics = _feed(tmp_path, pool, max_bytes=200)
    _drop(tmp_path, "100-ams1-web-www-a.srl", [{"id": i} for i in range(100)])  # > 200 bytes
    _drop(tmp_path, "100-ams1-web-www-b.srl", [{"id": 1}])
    (batch,) = feed.seal_waiting(taken=set())
    assert batch.spool == "100-ams1-web-www-b.srl"
    assert (tmp_path / ".rejected" / "100-ams1-web-www-a.srl").exists()
    assert metrics.spool_files.labels("rejected")._value.get() == 1
