"""Event counts by type, subtype and host: the cheapest useful dashboard feed."""

from __future__ import annotations

from typing import Any

from substreams import Context, count_by, substream


@substream(name="event_counts", timeout_s=0.5, fields=["host"])
def event_counts(events: list[dict[str, Any]], ctx: Context) -> dict[str, Any]:
    """``{"type", "subtype", "total", "by_host": {host: n}}`` for the chunk."""
    return {
        "type": ctx.type,
        "subtype": ctx.subtype,
        "total": len(events),
        "by_host": count_by(events, "host", missing="?"),
    }
