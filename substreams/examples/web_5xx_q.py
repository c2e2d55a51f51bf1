"""``web_5xx`` as a query: the web requests that failed with a 5xx, with URL and latency.

The twin of :mod:`substreams.examples.web_5xx` (same rows, checked by
``tests/contract/test_queries_match_functions.py``): ``typeof(status) = 'integer'`` is
the function's ``isinstance(status, int)`` (a 503.0 or a '503' is not a 5xx there).
"""

from __future__ import annotations

from substreams.query import query

web_5xx_q = query(
    name="web_5xx_q",
    types=["web"],
    timeout_s=0.5,
    max_result_bytes=256 * 1024,
    sql="""
        SELECT url, status, duration_ms AS ms, host, request_id
        FROM events
        WHERE typeof(status) = 'integer' AND status BETWEEN 500 AND 599
    """,
)
