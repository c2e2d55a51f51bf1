"""Example substreams shipped with the platform (also installed as entry points).

- :mod:`substreams.examples.web_5xx`: cherry-pick web 5xx errors with URL and latency.
- :mod:`substreams.examples.url_latency`: per-URL latency histogram (pre-aggregation).
- :mod:`substreams.examples.event_counts`: event counts by type/subtype/host.
"""
