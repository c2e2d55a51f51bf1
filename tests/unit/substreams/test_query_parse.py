"""Declarative substreams, declared: the SQL subset compiled to a plan, its fields
derived, the plan serialisable, everything outside the subset refused with one line
naming it when the plugin file is loaded, and the declaration shared with
``@substream`` (names, limits, version, origin)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from substreams.api import declaration_of
from substreams.errors import InvalidDeclaration, PluginLoadError
from substreams.loader import load_file
from substreams.query import Plan, QueryFunction, query
from substreams.query import plan as qp
from substreams.query.parse import SUPPORTED, parse_query


def path(dotted: str) -> qp.Path:
    return qp.Path(tuple(dotted.split(".")))


def test_a_select_compiles_to_its_plan_and_its_fields_are_the_paths_it_reads() -> None:
    plan = parse_query(
        "q",
        """SELECT url, "search.city" AS city, 'web' AS kind, "queue.0"
           FROM events
           WHERE (status >= 500 OR status IN (404, 410)) AND NOT host IS NULL
             AND request_id IS NOT NULL AND url LIKE '/api/v_/%' AND typeof(ms) = 'float'
             AND method != 'HEAD' AND ms BETWEEN 1.5 AND -2""",
    )
    assert plan.outputs == (
        qp.Column("url", path("url")),
        qp.Column("city", path("search.city")),
        qp.Column("kind", qp.Const("web")),
        qp.Column("queue.0", path("queue.0")),
    )
    assert plan.where == qp.And(
        (
            qp.Or((qp.Compare(">=", path("status"), qp.Const(500)),
                   qp.InList(path("status"), (qp.Const(404), qp.Const(410))))),
            qp.Not(qp.IsNull(path("host"))),
            qp.Not(qp.IsNull(path("request_id"))),
            qp.Like(path("url"), "/api/v_/", exact=False),
            qp.Compare("=", qp.TypeOf(path("ms")), qp.Const("float")),
            qp.Compare("<>", path("method"), qp.Const("HEAD")),
            qp.Compare(">=", path("ms"), qp.Const(1.5)),  # BETWEEN, flattened into the AND
            qp.Compare("<=", path("ms"), qp.Const(-2)),
        )
    )  # fmt: skip
    assert not plan.aggregates
    assert plan.fields == (
        "url", "search.city", "queue.0", "status", "host", "request_id", "ms", "method",
    )  # fmt: skip


def test_a_group_by_compiles_with_its_aggregates_and_default_names() -> None:
    plan = parse_query(
        "q",
        """SELECT host, "http.method" AS m, count(*), COUNT(url), sum(ms), min(ms) AS fastest,
                  max("search.city"), histogram(ms, 0, 10.5, 100) AS h
           FROM events WHERE TRUE = flag GROUP BY "http.method", host""",
    )
    assert plan.outputs == (
        qp.Column("host", path("host")),
        qp.Column("m", path("http.method")),
        qp.Aggregate("count", "count"),
        qp.Aggregate("count_url", "count", path("url")),
        qp.Aggregate("sum_ms", "sum", path("ms")),
        qp.Aggregate("fastest", "min", path("ms")),
        qp.Aggregate("max_search.city", "max", path("search.city")),
        qp.Aggregate("h", "histogram", path("ms"), (0, 10.5, 100)),
    )
    assert plan.where == qp.Compare("=", qp.Const(True), path("flag"))
    assert plan.group_by == (path("http.method"), path("host"))
    assert plan.key_columns() == ("m", "host")
    assert plan.aggregates
    assert plan.fields == ("host", "http.method", "url", "ms", "search.city", "flag")


def test_count_alone_reads_no_field_and_is_one_aggregate() -> None:
    plan = parse_query("q", "select count(*) as n from events")
    assert plan.fields == () and plan.aggregates and plan.group_by == ()


def test_a_plan_round_trips_through_json() -> None:
    plan = parse_query(
        "q",
        """SELECT host, count(*) AS n, histogram(ms, 1, 2.5) AS h, 'x' AS k FROM events
           WHERE NOT (a IN ('x', 1, TRUE) OR b LIKE 'p_%') AND c IS NULL
             AND typeof("d.0") <> 'null' GROUP BY host""",
    )
    data = json.loads(json.dumps(qp.to_dict(plan)))
    assert data["format"] == 1
    back = qp.from_dict(data)
    assert back == plan and hash(back) == hash(plan)
    with pytest.raises(ValueError, match="format"):
        qp.from_dict({**data, "format": 2})
    with pytest.raises(ValueError, match="unknown node 'Exec'"):
        qp.from_dict({**data, "where": {"node": "Exec", "code": "rm -rf /"}})


UNSUPPORTED = [
    ("SELECT a FROM events JOIN b ON a = b.x", "JOIN is not supported"),
    ("SELECT a FROM events ORDER BY a", "ORDER BY is not supported"),
    ("SELECT a FROM events LIMIT 3", "LIMIT is not supported"),
    (
        "SELECT host, count(*) FROM events GROUP BY host HAVING count(*) > 1",
        "HAVING is not supported",
    ),
    ("SELECT DISTINCT a FROM events", "DISTINCT is not supported"),
    ("WITH t AS (SELECT 1) SELECT a FROM events", "WITH is not supported"),
    ("SELECT a FROM events UNION SELECT b FROM events", "UNION is not supported"),
    ("SELECT a FROM (SELECT a FROM events) x", "a subquery is not supported"),
    ("SELECT a + 1 AS b FROM events", "arithmetic (a + 1) is not supported"),
    ("SELECT a FROM events WHERE a * 2 > 3", "arithmetic (a * 2) is not supported"),
    ("SELECT CASE WHEN a THEN 1 END AS c FROM events", "CASE is not supported"),
    ("SELECT count(DISTINCT a) FROM events", "DISTINCT is not supported"),
    ("SELECT * FROM events", "* is not supported"),
    ("SELECT upper(a) AS u FROM events", "the function UPPER() is not supported"),
    ("SELECT a FROM events WHERE regexp_like(a, 'x')", "is not supported"),
    ("SELECT a FROM events WHERE a ILIKE 'x%'", "ILIKE is not supported"),
    (
        "SELECT a FROM events WHERE a LIKE '%x'",
        "LIKE '%x' (only a prefix: '%' at the end) is not supported",
    ),
    ("SELECT a FROM events WHERE a IN (SELECT b FROM events)", "IN (SELECT ...) is not supported"),
    ("SELECT a FROM events WHERE a = :p", "parameters is not supported"),
    ("SELECT search['city'] AS c FROM events", "brackets"),
    ("SELECT a FROM events WHERE a IS TRUE", "IS other than IS [NOT] NULL is not supported"),
]  # fmt: skip


def refusal(sql: str) -> str:
    """The one line refusing ``sql`` as the query web_x."""
    with pytest.raises(InvalidDeclaration) as raised:
        parse_query("web_x", sql)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("query web_x: ")
    return message


@pytest.mark.parametrize(("sql", "named"), UNSUPPORTED, ids=[u[1][:30] for u in UNSUPPORTED])
def test_unsupported_sql_is_one_line_naming_the_construct(sql: str, named: str) -> None:
    message = refusal(sql)
    assert named in message
    assert message.endswith(f"({SUPPORTED})")


MISUSED = [
    ("SELECT a FROM", "the SQL does not parse at line 1"),
    ("SELECT 'a FROM events", "the SQL does not parse"),
    ("SELEC a", "not a SELECT statement"),
    ("SELECT a FROM events; SELECT b FROM events", "one statement, not 2"),
    ("", "sql= must be a SELECT statement"),
    ("SELECT a", "FROM events is missing"),
    ("SELECT a FROM other", "FROM must name the table events"),
    ("SELECT a FROM events AS e", "FROM must name the table events"),
    (
        "SELECT search.city FROM events",
        'search.city reads as table.column; write a nested path in double quotes: "search.city"',
    ),
    ('SELECT "a..b" AS x FROM events', "the path 'a..b' has an empty part"),
    ("SELECT 1 FROM events", "the literal 1 needs a name: 1 AS name"),
    ("SELECT a, b AS a FROM events", "the column name 'a' is given twice"),
    ("SELECT a, count(*) FROM events", "a is selected but neither grouped by nor aggregated"),
    ("SELECT count(*) FROM events GROUP BY host", "GROUP BY host: select it too"),
    ("SELECT count(*) FROM events GROUP BY 1", "GROUP BY takes paths, not '1'"),
    ("SELECT a FROM events WHERE a = NULL", "is never true: write IS NULL"),
    ("SELECT a FROM events WHERE a IN (1, NULL)", "write IS NULL"),
    ("SELECT a FROM events WHERE a IN (1, b)", "IN takes a list of literals, not 'b'"),
    ("SELECT a FROM events WHERE a", "a path is not a condition; compare it (a = TRUE)"),
    ("SELECT a FROM events WHERE count(*) > 1", "aggregates are allowed in SELECT only"),
    ("SELECT a FROM events WHERE typeof(a) = 'int'", "typeof() gives one of null, boolean"),
    ("SELECT a FROM events WHERE a > 1e999", "is not finite"),
    ("SELECT a FROM events WHERE a LIKE b", "LIKE takes a 'text' pattern"),
    ("SELECT histogram(a) AS h FROM events", "histogram() takes a path and its buckets"),
    ("SELECT histogram(a, 10, 5) AS h FROM events", "histogram() bounds must increase: 10, 5"),
    ("SELECT histogram(a, 'x') AS h FROM events", "histogram() bounds are numbers"),
    ("SELECT sum(a + 1) AS s FROM events", "sum() takes one path"),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "named"), MISUSED, ids=[m[1][:30] for m in MISUSED])
def test_a_misused_construct_is_one_line_saying_what_to_write(sql: str, named: str) -> None:
    assert named in refusal(sql)


PLUGIN = """
from substreams.query import query

web_q = query(name="web_q", types=["web*"], timeout_s=0.25, max_result_bytes=1000,
              sql="SELECT url, status FROM events WHERE status >= 500")
"""


def test_a_query_plugin_loads_like_a_function_plugin(tmp_path: Path) -> None:
    (tmp_path / "web_q.py").write_text(PLUGIN)
    (sub,) = load_file(tmp_path / "web_q.py")
    assert (sub.name, sub.types, sub.timeout_s, sub.max_result_bytes) == (
        "web_q", ("web*",), 0.25, 1000,
    )  # fmt: skip
    assert sub.fields == ("url", "status")
    assert sub.origin == str(tmp_path / "web_q.py") and len(sub.version) == 16
    assert isinstance(sub.plan, Plan) and isinstance(sub.function, QueryFunction)
    assert sub.function.plan is sub.plan
    rows = sub([{"url": "/a", "status": 503}, {"url": "/b", "status": 200}], None)  # type: ignore[arg-type]
    assert rows == [{"url": "/a", "status": 503}]


def test_unsupported_sql_stops_the_file_from_loading_with_the_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(PLUGIN.replace("WHERE", "JOIN x ON a = b WHERE"))
    with pytest.raises(PluginLoadError) as raised:
        load_file(tmp_path / "bad.py")
    assert "query web_q: JOIN is not supported (supported: SELECT paths" in str(raised.value)


def test_a_query_shares_the_declaration_rules_of_substream() -> None:
    with pytest.raises(InvalidDeclaration, match="does not match"):
        query(name="bad name", sql="SELECT a FROM events")
    with pytest.raises(InvalidDeclaration, match="timeout_s=99"):
        query(name="q", sql="SELECT a FROM events", timeout_s=99)
    with pytest.raises(InvalidDeclaration, match="types pattern"):
        query(name="q", sql="SELECT a FROM events", types=["we b"])
    made = query(name="q", sql="SELECT a FROM events")
    declared = declaration_of(made)
    assert declared is not None and declared.name == "q"
    assert made.__module__ == __name__, "defined in the module that declared it"
