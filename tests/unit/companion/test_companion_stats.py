"""Worker statistics merged across a node's workers, with percentiles."""

from __future__ import annotations

import pytest

from companion.stats import WorkerStats, merge, percentile


def test_statistics_merge_across_workers_with_percentiles() -> None:
    a, b = WorkerStats(), WorkerStats()
    for i in range(90):
        a.record_run("s", "ok", 0.010, key=f"k{i}")
    for i in range(10):
        b.record_run("s", "timeout", 1.0, key=f"t{i}", error="timeout: 1s")
    b.record_run("s", "shed", 0.0, key="x", error="shed: queue full")
    b.count("chunks_shed")
    merged = merge([a.snapshot(), b.snapshot()])
    s = merged["substreams"]["s"]
    # a shed result is counted apart: the plugin did not run, so it is not its failure
    assert (s["runs"], s["ok"], s["failures"], s["shed"]) == (100, 90, {"timeout": 10}, 1)
    assert s["p50_ms"] == pytest.approx(10.0)
    assert s["p99_ms"] == pytest.approx(1000.0)
    assert s["last_error"] == "timeout: 1s"
    assert merged["workers"] == 2 and merged["counters"]["chunks_shed"] == 1
    assert percentile([], 0.5) is None
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
