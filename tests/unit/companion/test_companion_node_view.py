"""What the workers of one node share besides the inbox (test_companion_inbox.py): the
failure counts and disabled markers, and the comparison of plugin versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from companion.disabled import DisabledSet
from companion.stats import (
    WorkerStats,
    merge,
    read_cluster_view,
    version_conflicts,
    write_cluster_view,
)
from companion.statuspage import render_status


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
