"""Declarative substreams: a substream declared as a SQL query instead of a function.

    from substreams.query import query

    web_5xx_q = query(
        name="web_5xx_q",
        types=["web"],
        sql="SELECT url, status, duration_ms AS ms FROM events WHERE status >= 500",
    )

- :mod:`substreams.query.declare`: ``query(...)``, ``merge_partials`` (a reader's merge
  of per-chunk partial aggregates);
- :mod:`substreams.query.parse`: SQL (``sqlglot``) to a plan, the subset checked;
- :mod:`substreams.query.plan`: the plan, frozen and serialisable;
- :mod:`substreams.query.evaluate`, :mod:`~substreams.query.values`,
  :mod:`~substreams.query.aggregate`: the reference evaluator and its semantics.

See ``substreams/DESIGN.md``, "Declarative substreams".
"""

from __future__ import annotations

from substreams.query.declare import QueryFunction, merge_partials, plan_of, query
from substreams.query.evaluate import evaluate
from substreams.query.plan import Plan

__all__ = ["Plan", "QueryFunction", "evaluate", "merge_partials", "plan_of", "query"]
