"""``.option("substream", NAME)`` against a devnode: the rows equal consumer_lib's
substream read of the same range, chunk by chunk (served by the server when a good
result is stored, by the executor's fallback when it is missing, shed or of another
version), and the result is queryable as VARIANT."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from consumer_lib import EventsClient
from eventstore.riak import RiakClient
from substreams.results import error_value, ok_value
from tests.integration.consumer_lib.spark.spark_marks import SPARK_WARNINGS

pytestmark = SPARK_WARNINGS

PLUGIN = """
from substreams import substream

@substream(name="{name}", types=["web"])
def hosts(events, ctx):
    return {{"n": len(events), "hosts": sorted({{e["host"] for e in events}}),
            "chunk": ctx.chunk, "raw": b"caf\\xc3\\xa9"}}
"""


def canonical_json(text: str | None) -> str | None:
    return None if text is None else json.dumps(json.loads(text), sort_keys=True)


def test_substream_rows_equal_consumer_lib_with_fallback(
    spark: Any, session_devnode: Any, epoch_writer: Any, tmp_path: Path
) -> None:
    from consumer_lib.spark import load_substream, register
    from consumer_lib.spark.substream_source import result_json

    name = f"hosts_{random.randrange(10**9)}"
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "hosts.py").write_text(PLUGIN.format(name=name))
    start = 1_600_000_000 + random.randrange(10**6) * 10
    keys = epoch_writer("ams1", start, start + 4, seed=start, web_chunks=2)
    keys += epoch_writer("ams4", start, start + 4, seed=start + 1, web_chunks=2)
    web = [k for k in keys if k.type == "web"]
    url = session_devnode.url
    with EventsClient([url], plugin_dirs=[plugins], use_entry_points=False) as client:
        version = client.plugins.get(name).version
    riak = RiakClient([url])
    try:
        # Every other web chunk gets a stored result whose value differs from what the
        # plugin computes, so a row served by the server is told apart from a fallback.
        for i, key in enumerate(web):
            if i % 4 == 0:
                value = ok_value(name, version, {"n": -i, "stored": True})
            elif i % 4 == 1:
                value = error_value("shed", name, version, "shed: queue full")
            elif i % 4 == 2:
                value = ok_value(name, "0" * 16, {"n": -1})  # another version
            else:
                continue  # missing
            riak.put("substreams", name, key.format(), value)
    finally:
        riak.close()

    options = {
        "nodes": url,
        "dc": "ams1,ams4",
        "start": start,
        "end": start + 4,
        "substream": name,
        "plugin_dirs": str(plugins),
        "entry_points": "false",
        "epochs_per_partition": 3,
    }
    register(spark)
    reader = spark.read.format("riak-events")
    for option, value in options.items():
        reader = reader.option(option, str(value))
    df = reader.load()
    assert df.columns == [
        "epoch", "dc", "type", "subtype", "chunk",
        "served", "reason", "version", "error", "result_json",
    ]  # fmt: skip
    got = sorted(
        (r.epoch, r.dc, r.type, r.subtype, r.chunk, r.served, r.reason, r.version,
         canonical_json(r.result_json))
        for r in df.collect()
    )  # fmt: skip

    expected = []
    with EventsClient([url], plugin_dirs=[plugins], use_entry_points=False) as client:
        for dc in ("ams1", "ams4"):
            for r in client.substream(name, dc, start, start + 4):
                text = canonical_json(result_json(r.result))
                expected.append(
                    (r.epoch, r.dc, r.type, r.subtype, r.chunk, r.served, r.reason, r.version, text)
                )
    expected.sort()
    assert got == expected
    assert len(got) == len(web)  # cron chunks are not read by the plugin
    reasons = {(row[5], row[6]) for row in got}
    assert reasons == {
        ("server", None),
        ("fallback", "missing"),
        ("fallback", "shed"),
        ("fallback", "version_mismatch"),
    }
    served = [row for row in got if row[5] == "server"]
    assert all(json.loads(row[8] or "null")["stored"] is True for row in served)
    fallback = [json.loads(row[8] or "null") for row in got if row[5] == "fallback"]
    assert all(f["raw"] == "caf\u00e9" and f["n"] > 0 for f in fallback)

    # The VARIANT view, queried by path.
    results = load_substream(spark, **options)
    assert results.schema["result"].dataType.typeName() == "variant"
    total = results.where("served = 'fallback'").selectExpr("sum(result:n::int) AS n").first()
    assert total is not None
    assert total.n == sum(f["n"] for f in fallback)


def test_bad_substream_options() -> None:
    from consumer_lib.spark import SparkSourceError
    from consumer_lib.spark.substream_source import SubstreamOptions

    base = {"nodes": "http://x:1", "dc": "ams1", "start": "0", "end": "5"}
    with pytest.raises(SparkSourceError, match="substream"):
        SubstreamOptions.parse({**base, "substream": "bad/name"})
    with pytest.raises(SparkSourceError, match="fallback"):
        SubstreamOptions.parse({**base, "substream": "ok", "fallback": "sometimes"})
    with pytest.raises(SparkSourceError, match="entry_points"):
        SubstreamOptions.parse({**base, "substream": "ok", "entry_points": "yes"})
    parsed = SubstreamOptions.parse({**base, "substream": "ok", "plugin_dirs": "/a, /b"})
    assert parsed.plugin_dirs == ("/a", "/b")
    assert parsed.fallback == "auto"
