"""``url_latency`` as a query: a per-URL latency histogram of each chunk (the Map half;
a reader merges chunks with ``substreams.query.merge_partials``, the Reduce half).

The twin of :mod:`substreams.examples.url_latency`: the same buckets (milliseconds,
upper bounds; the last one is "more"), counts and sums, as one row per URL
(``{"url", "count", "sum_ms", "buckets"}``) instead of a dict keyed by URL; the
function's type checks are the ``typeof`` conditions.
"""

from __future__ import annotations

from substreams.query import query

url_latency_q = query(
    name="url_latency_q",
    types=["web"],
    timeout_s=0.5,
    sql="""
        SELECT url,
               count(*) AS count,
               sum(duration_ms) AS sum_ms,
               histogram(duration_ms, 5, 10, 25, 50, 100, 250, 500, 1000, 2500) AS buckets
        FROM events
        WHERE typeof(url) = 'text'
          AND typeof(duration_ms) IN ('integer', 'float', 'boolean')
        GROUP BY url
    """,
)
