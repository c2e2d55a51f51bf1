"""What the workers of one node share: the inbox (one queue for every worker), the
failure counts and disabled markers, and the comparison of plugin versions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from companion.disabled import DisabledSet
from companion.inbox import Inbox, InboxItem
from companion.stats import (
    WorkerStats,
    merge,
    read_cluster_view,
    version_conflicts,
    write_cluster_view,
)
from companion.statuspage import render_status
from eventstore.names import ChunkKey

pytestmark = pytest.mark.unit


def _item(chunk: int, *, type_: str = "web") -> InboxItem:
    return InboxItem(ChunkKey(1_700_000_000, "dc1", type_, "main", chunk), 10.0 + chunk, 99.5)


def test_the_inbox_is_a_bounded_fifo_of_whole_records() -> None:
    inbox = Inbox(3)
    try:
        assert inbox.capacity == 3 and inbox.depth() == 0
        assert [inbox.put(_item(i)) for i in range(4)] == [True, True, True, False]
        assert inbox.depth() == 3
        first = inbox.get(0.1)
        assert first == _item(0)
        assert inbox.put(_item(9))  # room again
        assert [inbox.get(0.1) for _ in range(3)] == [_item(1), _item(2), _item(9)]
        assert inbox.get(0.01) is None
        with pytest.raises(ValueError, match="over 238 bytes"):
            inbox.put(_item(0, type_="t" * 300))
        inbox.put(_item(5))
        assert inbox.drain() == 1 and inbox.depth() == 0
    finally:
        inbox.close()


def test_two_processes_reading_one_inbox_share_the_items_without_duplicates() -> None:
    inbox = Inbox(200)
    for i in range(200):
        assert inbox.put(_item(i))
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # a second "worker"
        os.close(read_fd)
        taken = []
        while (item := inbox.get(0.05)) is not None:
            taken.append(str(item.key.chunk))
        os.write(write_fd, ",".join(taken).encode())
        os._exit(0)
    os.close(write_fd)
    mine = []
    while (item := inbox.get(0.05)) is not None:
        mine.append(item.key.chunk)
    with os.fdopen(read_fd, "rb") as f:
        text = f.read().decode()
    os.waitpid(pid, 0)
    inbox.close()
    theirs = [int(c) for c in text.split(",") if c]
    assert sorted(mine + theirs) == list(range(200))
    assert not set(mine) & set(theirs)


def test_inbox_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        Inbox(0)


def test_failures_in_a_row_are_counted_for_the_node_not_per_worker(tmp_path: Path) -> None:
    worker_a = DisabledSet(tmp_path / "disabled")
    worker_b = DisabledSet(tmp_path / "disabled")
    assert worker_a.count_failure("flaky", "v1") == 1
    assert worker_b.count_failure("flaky", "v1") == 2
    assert worker_a.count_failure("flaky", "v1") == 3
    worker_b.clear_failures("flaky")  # an ok run anywhere on the node
    assert worker_a.count_failure("flaky", "v1") == 1
    assert worker_b.count_failure("flaky", "v2") == 1  # a new version starts again
    assert worker_a.disable("flaky", "v2", "3 failures in a row")
    assert not worker_b.disable("flaky", "v2", "raced")  # already disabled
    assert worker_b.is_disabled("flaky", "v2") and not worker_b.is_disabled("flaky", "v1")
    assert worker_b.enable("flaky")
    assert worker_a.count_failure("flaky", "v2") == 1  # enabling resets the count
    with pytest.raises(ValueError):
        worker_a.count_failure("../etc", "v1")


def test_version_conflicts_between_workers_and_nodes() -> None:
    a, b = WorkerStats(), WorkerStats()
    a.set_loaded({"web_5xx": "v1", "counts": "c1"}, 0)
    b.set_loaded({"web_5xx": "v2", "counts": "c1"}, 0)
    loaded = merge([a.snapshot(), b.snapshot()])["loaded"]
    cluster = {
        "n1": {"substreams": {"web_5xx": ["v1", "v2"], "counts": ["c1"]}},
        "n2": {"substreams": {"web_5xx": ["v2"], "counts": ["c1"], "only_n2": ["x"]}},
    }
    conflicts = version_conflicts(loaded, "n1", cluster)
    assert conflicts == {
        "only_n2": {"nodes": {"n2": ["x"]}},
        "web_5xx": {"workers": {"v1": 1, "v2": 1}, "nodes": {"n2": ["v2"]}},
    }
    agreeing = {"n2": {"substreams": {"web_5xx": ["v1", "v2"], "counts": ["c1"]}}}
    assert "counts" not in version_conflicts(loaded, "n1", agreeing)


def test_the_status_page_shows_where_versions_differ(tmp_path: Path) -> None:
    nodes = {"n2": {"substreams": {"web_5xx": ["v9"], "counts": ["c1"]}}}
    write_cluster_view(tmp_path, nodes)
    cluster = read_cluster_view(tmp_path, stale_s=60)
    assert cluster == nodes
    assert read_cluster_view(tmp_path, stale_s=-1) == {}  # too old: nothing claimed
    assert read_cluster_view(tmp_path / "none", stale_s=60) == {}
    stats = WorkerStats()
    stats.set_loaded({"web_5xx": "v1", "counts": "c1"}, 0)
    merged = merge([stats.snapshot()])
    merged["version_conflicts"] = version_conflicts(merged["loaded"], "n1", cluster)
    page = render_status(
        node="n1",
        merged=merged,
        loaded={
            "web_5xx": {"version": "v1", "types": ["web"]},
            "counts": {"version": "c1", "types": []},
        },
        load_failures=[],
        disabled={},
        settings={},
    )
    assert 'data-name="web_5xx" data-state="enabled" data-versions="disagree"' in page
    assert "versions differ: node n2 has v9" in page
    assert 'data-name="counts" data-state="enabled" data-versions="agree"' in page
