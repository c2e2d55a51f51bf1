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


def test_series_keeps_the_last_points_whatever_the_order_of_the_clock() -> None:
    """A run's series keeps the buckets within SERIES_POINTS steps of the newest one,
    pruned only when a run lands in another bucket than the last pruning's (not on
    every run), so a bucket seen again after the clock went back still sheds what is
    out of its window."""
    from companion import defaults
    from companion.stats import SubstreamStats

    step, points = defaults.SERIES_STEP_S, defaults.SERIES_POINTS
    s = SubstreamStats()
    t0 = 1_000_000.0
    for i in range(points + 5):  # one run a bucket, then two more in the last
        s.record("ok", 0.001, t0 + i * step, key="k", error=None)
    s.record("ok", 0.001, t0 + (points + 4) * step, key="k", error=None)
    s.record("exception", 0.001, t0 + (points + 4) * step, key="k", error="exception: x")
    newest = int(t0 + (points + 4) * step)
    assert min(s.series) == newest - (points - 1) * step and len(s.series) == points
    assert s.series[newest] == [3, 1, 1.0]
    # the clock goes back a whole window, then forward to the newest bucket again:
    # the old bucket's point is dropped there
    s.record("ok", 0.001, t0 - 10 * points * step, key="k", error=None)
    s.record("ok", 0.001, t0 + (points + 4) * step, key="k", error=None)
    assert min(s.series) == newest - (points - 1) * step
    assert s.series[newest][0] == 4
