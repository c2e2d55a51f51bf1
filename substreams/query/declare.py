"""``query(...)``: a substream declared as SQL instead of a function.

    from substreams.query import query

    web_5xx_q = query(
        name="web_5xx_q",
        types=["web"],
        sql="SELECT url, status, duration_ms AS ms FROM events WHERE status >= 500",
    )

The declaration is checked and compiled when the plugin file is imported (a query
outside the subset raises ``InvalidDeclaration``, so the file does not load), and
gives what ``@substream`` gives: a callable carrying a :class:`~substreams.api.Substream`
as ``__substream__``, defined in the plugin's module, so the loader, the registry, the
sandbox, the fallbacks, ``substream test``, the backfill and Spark treat it as any
plugin. Its function is the plan's evaluator (:class:`QueryFunction`); its declared
fields are the paths the query reads; ``Substream.plan`` is the plan, for an evaluator
that runs plans without Python (the next step: ``substreams/DESIGN.md``).

Pure logic, no I/O except reading the plugin's own source to hash it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from substreams import defaults
from substreams.api import Context, Substream, check_name, declare, version_of
from substreams.errors import InvalidDeclaration
from substreams.query.evaluate import Rows, compile_plan, merge_rows
from substreams.query.plan import Plan

__all__ = ["QueryFunction", "merge_partials", "plan_of", "query"]


class QueryFunction:
    """A plan's evaluator as a substream function: ``f(events, ctx) -> rows``.

    Attributes:
        plan: the compiled query.
    """

    __substream__: Substream

    def __init__(self, plan: Plan, module: str) -> None:
        self.plan = plan
        self.__module__ = module  # the plugin's module: the loader takes what it defines
        self.__qualname__ = self.__name__ = plan.name
        self._run = compile_plan(plan)

    def __call__(self, events: Iterable[Any], ctx: Context | None = None) -> Rows:
        """The query's result on one chunk's events (``ctx`` is not used)."""
        return self._run(events)

    def __repr__(self) -> str:
        return f"<query {self.plan.name}>"


def query(
    *,
    name: str,
    sql: str,
    types: Sequence[str] | None = None,
    subtypes: Sequence[str] | None = None,
    timeout_s: float = defaults.TIMEOUT_S,
    memory_mb: int = defaults.MEMORY_MB,
    max_result_bytes: int = defaults.MAX_RESULT_BYTES,
) -> QueryFunction:
    """Declare a substream as a query.

    Args:
        name: the substream's name; its results are stored in the bucket of that name.
        sql: ``SELECT ... FROM events [WHERE ...] [GROUP BY ...]`` in the subset of
            ``substreams/query/parse.py``; a nested path is written in double quotes
            (``"search.city"``).
        types, subtypes, timeout_s, memory_mb, max_result_bytes: as ``@substream``.

    Returns:
        The query's evaluator, with its declaration as ``__substream__``: assign it to
        a module-level name of the plugin file.

    Raises:
        InvalidDeclaration: SQL outside the subset (one line naming the construct), or
            a name, pattern or limit out of its domain.
    """
    check_name(name)
    # sqlglot only where a query is declared: the platform's processes that never load
    # one do not pay for importing it.
    from substreams.query.parse import parse_query  # noqa: PLC0415

    plan = parse_query(name, sql)
    declared = declare(
        name=name,
        types=types,
        subtypes=subtypes,
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        max_result_bytes=max_result_bytes,
        fields=list(plan.fields),
    )
    caller = sys._getframe(1).f_globals
    function = QueryFunction(plan, str(caller.get("__name__", "__main__")))
    source_file = caller.get("__file__")
    version, origin = "", name
    if isinstance(source_file, str) and Path(source_file).is_file():
        origin, version = source_file, version_of(Path(source_file).read_bytes())
    function.__substream__ = replace(
        declared, function=function, plan=plan, version=version, origin=origin
    )
    return function


def plan_of(declared: Plan | Substream | QueryFunction) -> Plan:
    """The plan of a query, its declaration or its function.

    Raises:
        InvalidDeclaration: a substream declared as a function, not a query.
    """
    if isinstance(declared, Plan):
        return declared
    if isinstance(declared, QueryFunction):
        return declared.plan
    if declared.plan is None:
        raise InvalidDeclaration(f"substream {declared.name!r} is a function, not a query")
    return declared.plan


def merge_partials(declared: Plan | Substream | QueryFunction, partials: Iterable[Rows]) -> Rows:
    """Merge the results of a query substream over many chunks (a reader's Reduce).

        results = client.substream("url_latency_q", "ams4", "now-5m", "now")
        by_url = merge_partials(plugin, [r.result for r in results if r.result is not None])

    Args:
        declared: the query (its plan, its declaration, or the plugin's function).
        partials: the results of its chunks: a GROUP BY query's partial aggregates are
            merged group by group (counts, sums and histograms added, min and max
            kept); a SELECT's rows are concatenated.

    Returns:
        One row per group (without GROUP BY: one row), in order of first appearance.

    Raises:
        InvalidDeclaration: ``declared`` is a function plugin.
        ValueError: a partial that is not a result of this query (a gap's None, a row
            lacking a column, a histogram of another length).
    """
    return merge_rows(plan_of(declared), partials)
