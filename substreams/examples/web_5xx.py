"""Cherry-pick the web requests that failed with a 5xx, with URL and latency.

A consumer alerting on server errors reads a few hundred bytes per second instead of
the full web stream.
"""

from __future__ import annotations

from typing import Any

from substreams import Context, dig, substream


@substream(
    name="web_5xx",
    types=["web"],
    timeout_s=0.5,
    max_result_bytes=256 * 1024,
    fields=["status", "url", "duration_ms", "host", "request_id"],
)
def web_5xx(events: list[dict[str, Any]], ctx: Context) -> list[dict[str, Any]]:
    """Each 5xx request of the chunk: url, status, latency, host, request id."""
    out = []
    for e in events:
        status = dig(e, "status")
        if isinstance(status, int) and 500 <= status <= 599:
            out.append(
                {
                    "url": dig(e, "url"),
                    "status": status,
                    "ms": dig(e, "duration_ms"),
                    "host": dig(e, "host"),
                    "request_id": dig(e, "request_id"),
                }
            )
    return out
