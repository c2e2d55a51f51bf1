"""Query plugins' plans in Spark (issue 23): ``load_events(where=, select=)`` pushed into
the executors' walk of each chunk gives the rows ``load_events`` and the same filter in
Spark SQL give; bad SQL is one line before any read; a query plugin's backfill and its
``load_substream`` fallback take the native road (nothing forked on the executors)."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import sereal_codec as sereal
from eventstore.blob import verify_postfix
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient
from eventstore.testing import store_events
from relocator.events import generate_events
from tests.integration.consumer_lib.spark.spark_marks import SPARK_WARNINGS

pytestmark = SPARK_WARNINGS

START = 1_730_000_000
EPOCHS = 4
EXAMPLES = Path(__file__).parents[4] / "substreams" / "examples"

WHERE = (
    "(status >= 500 OR \"conn.retries\" > 0) AND NOT host LIKE 'web-00%' "
    "AND method IN ('GET', 'POST') AND typeof(duration_ms) <> 'text'"
)
#: The same condition in Spark SQL over the event as VARIANT.
SPARK_WHERE = (
    "(event:status::int >= 500 OR event:conn.retries::int > 0) "
    "AND NOT event:host::string LIKE 'web-00%' AND event:method::string IN ('GET', 'POST') "
    "AND NOT (event:duration_ms IS NOT NULL AND schema_of_variant(event:duration_ms) = 'STRING')"
)
SELECT = ["url", "status", '"search.city" AS city', "user_id", "duration_ms AS ms", "'x' AS tag"]
SPARK_SELECT = [
    "event:url",
    "event:status",
    "event:search.city",
    "event:user_id",
    "event:duration_ms",
]

#: Appended to a copy of a query plugin's file: every process that loads it notes its
#: pid and command line, and every fork of such a process is noted too (a real count,
#: in whichever Spark worker runs the task).
FORK_PROBE = """

import os as _os, sys as _sys
_LOG = {log!r}
def _note(what):
    with open(_LOG, "a") as f:
        f.write(f"{{what}} {{_os.getpid()}} {{' '.join(_sys.argv)}}\\n")
_note("loaded")
_os.register_at_fork(before=lambda: _note("fork"))
"""


@dataclass(frozen=True)
class Range:
    url: str
    dc: str
    events: int
    keys: tuple[ChunkKey, ...]


@pytest.fixture(scope="module")
def written(session_devnode: Any) -> Iterator[Range]:
    """EPOCHS epochs of the shared generator's events (1,500 each) in a dc of their own,
    stored as relocators store them."""
    dc = f"q{random.randrange(10**9)}"
    pool = generate_events(EPOCHS * 1500, seed=23)
    keys: list[ChunkKey] = []
    with RiakClient([session_devnode.url]) as riak:
        for i in range(EPOCHS):
            part = pool[i * 1500 : (i + 1) * 1500]
            keys += store_events([riak], START + i, dc, part, chunk_max_bytes=100_000)
    yield Range(session_devnode.url, dc, len(pool), tuple(keys))


def _options(r: Range) -> dict[str, Any]:
    return {"nodes": r.url, "dc": r.dc, "start": START, "end": START + EPOCHS}


def test_pushdown_equals_load_events_and_the_same_filter_in_spark_sql(
    spark: Any, written: Range
) -> None:
    from consumer_lib.spark import load_events

    keys = ["epoch", "dc", "type", "subtype", "chunk"]
    full = load_events(spark, **_options(written)).where(SPARK_WHERE)
    # A selected null is SQL NULL (event:path gives a VARIANT null, to_json "null").
    anchor = full.selectExpr(*keys, *(f"nullif(to_json({c}), 'null')" for c in SPARK_SELECT))
    expected = sorted((tuple(r) for r in anchor.collect()), key=repr)
    pushed = load_events(spark, where=WHERE, select=SELECT, **_options(written))
    assert pushed.columns == [*keys, "url", "status", "city", "user_id", "ms", "tag"]
    assert {f.dataType.typeName() for f in pushed.schema.fields[5:]} == {"variant"}
    rows = pushed.selectExpr(
        *keys, *(f"to_json({c})" for c in ("url", "status", "city", "user_id", "ms")), "tag::string"
    ).collect()
    assert {r[-1] for r in rows} == {"x"}
    got = sorted((tuple(r)[:-1] for r in rows), key=repr)
    assert 0 < len(got) < written.events // 4  # the filter keeps some, drops most
    assert got == expected
    # A null is SQL NULL, as event:path gives it.
    assert any(r[8] is None for r in got) and any(r[8] is not None for r in got)

    # where= alone: the whole events the filter keeps.
    events = load_events(spark, where=WHERE, **_options(written))
    assert events.columns == [*keys, "event"]
    got_events = sorted(tuple(r) for r in events.selectExpr(*keys, "to_json(event)").collect())
    assert got_events == sorted(
        tuple(r) for r in full.selectExpr(*keys, "to_json(event)").collect()
    )


def test_the_reference_answers_where_the_walk_does_not_and_gives_its_rows() -> None:
    """The ``latin1`` mode is never the walk's (its rows come from the reference over
    the decoded chunk): the same batches as the walk's in ``utf8`` on these events."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from consumer_lib.spark.pushdown import ChunkQuery, parse_pushdown
    from consumer_lib.spark.source import BatchBuilder, rows_schema
    from substreams.query import native

    events = generate_events(3000, seed=5)
    document = sereal.encode(events)
    pushdown = parse_pushdown(WHERE, ", ".join(SELECT))
    assert pushdown is not None
    schema = to_arrow_schema(rows_schema("variant", pushdown), timezone="UTC")
    key = ChunkKey(START, "ams1", "web", "www", 0)
    walked = ChunkQuery(pushdown, "utf8")
    assert walked.program is not None and walked.program.native == (0,)
    batches = []
    for binary in ("utf8", "latin1"):
        builder = BatchBuilder(schema, "variant", ChunkQuery(pushdown, binary))
        builder.add(key, memoryview(document), binary)
        batches.append(builder.flush())
    assert batches[0].num_rows > 0
    assert batches[0].equals(batches[1])
    assert native.NATIVE


def test_bad_sql_is_one_line_naming_the_construct_before_any_read(spark: Any) -> None:
    from consumer_lib.spark import SparkSourceError, load_events

    # Nothing listens there: an error can only come from the options.
    options = {"nodes": "http://127.0.0.1:9", "dc": "ams1", "start": 0, "end": 10}
    cases = [
        ("status ~ 5", None, "option 'where': the SQL does not parse"),
        ("status IN (SELECT 1)", None, "option 'where': IN (SELECT ...) is not supported"),
        ("url ILIKE 'a%'", None, "option 'where': ILIKE is not supported"),
        ("1 = 1) GROUP BY (url", None, "option 'where'"),
        (None, ["count(*)"], "option 'select': aggregates"),
        (None, ["search.city"], 'write a nested path in double quotes: "search.city"'),
        (None, ["type"], "option 'select': the column 'type' is named like the key column"),
        (None, ["url FROM events WHERE status > 1 --"], "option 'select' must be a select list"),
        (None, ["CASE WHEN status > 1 THEN 1 END AS c"], "option 'select': CASE is not"),
    ]
    for where, select, message in cases:
        with pytest.raises(SparkSourceError) as raised:
            load_events(spark, where=where, select=select, **options)
        text = str(raised.value)
        assert message in text, (where, select, text)
        assert "\n" not in text
    # The data source itself refuses it when Spark plans the read.
    reader = spark.read.format("riak-events").option("where", "status ~ 5")
    for name, value in options.items():
        reader = reader.option(name, str(value))
    with pytest.raises(Exception, match="option 'where': the SQL does not parse"):
        reader.load()


@pytest.fixture(scope="module")
def backfilled(
    spark: Any, written: Range, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, dict[str, int]]:
    """web_5xx_q (a copy with the fork probe) backfilled over the range: (plugin dir,
    probe log, the backfill's counts)."""
    from consumer_lib.spark.backfill import backfill

    plugins = tmp_path_factory.mktemp("query-plugins")
    log = plugins.parent / f"{plugins.name}.log"
    source = (EXAMPLES / "web_5xx_q.py").read_text()
    (plugins / "web_5xx_q.py").write_text(source + FORK_PROBE.format(log=str(log)))
    counts = backfill(
        spark,
        nodes=[written.url],
        dcs=[written.dc],
        substream="web_5xx_q",
        start=START,
        end=START + EPOCHS,
        plugin_dirs=[str(plugins)],
        entry_points=False,
        max_chunks_per_s=0,
    )
    return plugins, log, counts


def _probe(log: Path) -> tuple[set[str], list[str]]:
    """(the command lines of the processes that loaded the plugin, fork lines of
    processes other than this one)."""
    lines = log.read_text().splitlines() if log.exists() else []
    loaded = {line.split(" ", 2)[2] for line in lines if line.startswith("loaded ")}
    forks = [line for line in lines if line.startswith("fork ") and
             int(line.split()[1]) != os.getpid()]  # fmt: skip
    return loaded, forks


def test_backfill_of_a_query_plugin_forks_nothing(
    backfilled: tuple[Path, Path, dict[str, int]], written: Range
) -> None:
    from substreams.loader import load_file
    from substreams.query import evaluate
    from substreams.results import read_result

    plugins, log, counts = backfilled
    assert counts["stored"] == counts["chunks"] > 0
    assert counts["failed"] == counts["unreadable"] == 0
    loaded, forks = _probe(log)
    assert len(loaded) >= 2  # the driver and at least one Spark worker loaded it
    assert not forks, forks
    assert not [c for c in loaded if "forkserver_process" in c], loaded  # the server's module
    # The stored records hold the reference evaluator's rows.
    (plugin,) = load_file(plugins / "web_5xx_q.py")
    assert plugin.plan is not None
    web = [k for k in written.keys if k.type == "web"]
    assert counts["chunks"] == len(web)
    with RiakClient([written.url]) as riak:
        for key in web:
            name = key.format()
            record = read_result(riak.get("substreams", "web_5xx_q", name).value)
            blob = riak.get("events", "events", name).value
            events = sereal.decode(verify_postfix(blob, name))
            assert record.version == plugin.version
            assert record.result == evaluate(plugin.plan, events)


def test_load_substream_of_a_query_recomputes_deleted_results_natively(
    spark: Any, backfilled: tuple[Path, Path, dict[str, int]], written: Range
) -> None:
    from consumer_lib.spark import load_substream

    plugins, log, _ = backfilled
    options = {
        **_options(written),
        "substream": "web_5xx_q",
        "plugin_dirs": str(plugins),
        "entry_points": "false",
    }
    columns = ["epoch", "dc", "type", "subtype", "chunk", "served", "to_json(result)"]
    stored = sorted(
        tuple(r) for r in load_substream(spark, **options).selectExpr(*columns).collect()
    )
    assert {r[5] for r in stored} == {"server"}
    assert any(json.loads(r[6]) for r in stored)  # some chunks hold 5xx rows
    with RiakClient([written.url]) as riak:
        for epoch, dc, type_, subtype, chunk, _, _ in stored:
            riak.delete(
                "substreams", "web_5xx_q", ChunkKey(epoch, dc, type_, subtype, chunk).format()
            )
    log.unlink(missing_ok=True)
    again = sorted(
        tuple(r) for r in load_substream(spark, **options).selectExpr(*columns).collect()
    )
    assert {r[5] for r in again} == {"fallback"}
    assert [r[:5] + r[6:] for r in again] == [r[:5] + r[6:] for r in stored]
    loaded, forks = _probe(log)
    assert loaded and not forks, (loaded, forks)
    assert not [c for c in loaded if "forkserver_process" in c], loaded  # the server's module
