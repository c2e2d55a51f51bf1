"""Per-URL latency histogram of one chunk: the Map half of a per-epoch aggregation.

Buckets are fixed (milliseconds, upper bounds), so consumers add histograms of many
chunks and epochs bucket by bucket (the Reduce half, on their side).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from substreams import Context, dig, substream

#: Upper bounds of the buckets, milliseconds; the last bucket is "more".
BOUNDS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500)


@substream(name="url_latency", types=["web"], timeout_s=0.5, fields=["url", "duration_ms"])
def url_latency(events: list[dict[str, Any]], ctx: Context) -> dict[str, Any]:
    """``{"bounds_ms": [...], "urls": {url: {"count", "sum_ms", "buckets": [...]}}}``."""
    urls: dict[str, dict[str, Any]] = {}
    for e in events:
        url, ms = dig(e, "url"), dig(e, "duration_ms")
        if not isinstance(url, str) or not isinstance(ms, int | float):
            continue
        h = urls.get(url)
        if h is None:
            h = urls[url] = {"count": 0, "sum_ms": 0.0, "buckets": [0] * (len(BOUNDS_MS) + 1)}
        h["count"] += 1
        h["sum_ms"] += ms
        h["buckets"][bisect_left(BOUNDS_MS, ms)] += 1
    for h in urls.values():
        h["sum_ms"] = round(h["sum_ms"], 3)
    return {"epoch": ctx.epoch, "bounds_ms": list(BOUNDS_MS), "urls": urls}
