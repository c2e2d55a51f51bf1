"""``event_counts`` as a query: events by host, one row per host (``{"host", "events"}``).

The twin of :mod:`substreams.examples.event_counts`; a chunk's type and subtype are its
key's, and its total the sum of the rows. Hosts are kept as the events hold them (the
function writes ``str(host)``, and ``"?"`` for a missing one: a host that is NULL here).
"""

from __future__ import annotations

from substreams.query import query

event_counts_q = query(
    name="event_counts_q",
    timeout_s=0.5,
    sql="SELECT host, count(*) AS events FROM events GROUP BY host",
)
