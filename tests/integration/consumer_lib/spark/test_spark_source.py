"""The riak-events batch data source against a devnode: what Spark reads for an epoch
range equals a direct read of the same range (counts and content), options prune, and
re-querying one DataFrame with different filters stays correct (pyspark 4.3.0 returns
wrong results there when filters are pushed down: this test catches it if pushdown is
ever enabled)."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import sereal_codec as sereal
from devnode.testing import DevnodeProcess
from eventstore.blob import verify_postfix
from eventstore.names import ChunkKey, MetadataKey, format_metadata, parse_metadata
from eventstore.riak import RiakClient
from eventstore.riak.errors import NotFound
from eventstore.testing import write_epoch
from tests.integration.consumer_lib.spark.spark_marks import SPARK_WARNINGS

pytestmark = SPARK_WARNINGS

DCS = ("ams1", "ams4")
Row = tuple[int, str, str, str, int, str]  # epoch, dc, type, subtype, chunk, canonical event


def make_event(rnd: random.Random, epoch: int, i: int) -> dict[str, Any]:
    return {
        "epoch": epoch,
        "i": i,
        "host": f"web-{rnd.randrange(20):02d}.ams4",
        "status": rnd.choice([200, 200, 301, 404, 503]),
        "latency": rnd.choice([0.25, 12.5, rnd.random() * 100]),
        "ok": rnd.random() < 0.9,
        "user": {"id": rnd.randrange(2**40), "country": rnd.choice(["nl", "dk", "jp"])},
        "city": rnd.choice(["Amsterdam", "K\u00f8benhavn", "\u6771\u4eac", 'quote " \\']),
        "tags": [rnd.choice(["a", "b", "c"]) for _ in range(rnd.randrange(4))],
        "referrer": None,
        "big": 2**64 - 1 if i % 7 == 0 else -(2**63),
        "nested": [[i, 2.5e-7], [], [None, "x", {"deep": [1e300, -1.5]}]],
    }


def write_range(riak: RiakClient, start: int, end: int, seed: int) -> None:
    """Per epoch and dc: web:app in 1-3 chunks, cron: (empty subtype) in one; chunks
    first, metadata last, as relocators write."""
    rnd = random.Random(seed)
    for epoch in range(start, end):
        for dc in DCS:
            spec = {("web", "app"): rnd.randint(1, 3), ("cron", ""): 1}
            write_epoch(
                [riak],
                epoch,
                dc,
                {
                    group: [
                        [make_event(rnd, epoch, i) for i in range(rnd.randint(1, 40))]
                        for _ in range(chunks)
                    ]
                    for group, chunks in spec.items()
                },
            )


def canonical(event: Any) -> str:
    return json.dumps(event, sort_keys=True, ensure_ascii=False)


def direct_read(riak: RiakClient, start: int, end: int, types: set[str] | None = None) -> list[Row]:
    """The range read without Spark: metadata, chunks, Python decode."""
    rows: list[Row] = []
    for epoch in range(start, end):
        for dc in DCS:
            meta = MetadataKey(epoch, dc)
            try:
                value = riak.get("epochs", "epochs", meta.format()).value
            except NotFound:
                continue
            for ref in parse_metadata(value):
                if types is not None and ref.type not in types:
                    continue
                key = meta.chunk_key(ref)
                blob = riak.get("events", "events", key.format()).value
                for event in sereal.decode(verify_postfix(blob)):
                    rows.append((epoch, dc, ref.type, ref.subtype, ref.chunk, canonical(event)))
    return sorted(rows)


@pytest.fixture
def epoch_range(session_devnode: DevnodeProcess) -> Iterator[tuple[str, int, int, RiakClient]]:
    """Five epochs of two dcs written to the session devnode (a range of its own)."""
    start = 1_500_000_000 + random.randrange(10**6) * 10
    riak = RiakClient([session_devnode.url])
    try:
        write_range(riak, start, start + 5, seed=start)
        yield session_devnode.url, start, start + 5, riak
    finally:
        riak.close()


def test_range_read_equals_direct_read(spark: Any, epoch_range: Any) -> None:
    from consumer_lib.spark import load_events, register

    url, start, end, riak = epoch_range
    expected = direct_read(riak, start, end)
    assert len(expected) > 100
    # An epoch before and after the written ones (nothing stored) is in range too.
    options = {"nodes": url, "dc": ",".join(DCS), "start": start - 1, "end": end + 1}
    register(spark)
    raw = spark.read.format("riak-events")
    for name, value in {**options, "epochs_per_partition": 2, "event": "json"}.items():
        raw = raw.option(name, str(value))
    rows = raw.load().collect()
    got = sorted(
        (r.epoch, r.dc, r.type, r.subtype, r.chunk, canonical(json.loads(r.event_json)))
        for r in rows
    )
    assert got == expected
    # The VARIANT view: parse_json of the same texts, queried by path.
    events = load_events(spark, **options)
    assert events.schema["event"].dataType.typeName() == "variant"
    countries = events.selectExpr("event:user.country::string AS c").groupBy("c").count()
    by_country = {r.c: r["count"] for r in countries.collect()}
    assert by_country == dict(Counter(json.loads(e[5])["user"]["country"] for e in expected))
    texts = events.selectExpr("to_json(event) AS j").collect()
    assert sorted(canonical(json.loads(r.j)) for r in texts) == sorted(e[5] for e in expected)


def test_variant_equals_parse_json_of_the_text(spark: Any, session_devnode: Any) -> None:
    """The source's VARIANT is byte for byte what parse_json makes of the same event's
    JSON text, for realistic events and the edge cases of make_event."""
    from pyspark.sql.functions import col, parse_json, to_json

    from consumer_lib.spark import load_events, register
    from eventstore.chunking import chunk_events
    from relocator.events import generate_events

    start = 1_600_000_000 + random.randrange(10**6) * 10
    rnd = random.Random(start)
    riak = RiakClient([session_devnode.url])
    try:
        pool = generate_events(3000, seed=start) + [make_event(rnd, start, i) for i in range(500)]
        # keys out of UTF-16 order in UTF-8, -0.0 (parse_json: decimal 0.0), empty nests
        pool += [
            {"\ue000": i, "\U0001f600": -0.0, "e": [[], [[]], {}], "x": 0.1 * i} for i in range(9)
        ]
        for n, epoch in enumerate(range(start, start + 4)):
            keys = []
            for number, chunk in enumerate(chunk_events(pool[n::4], chunk_max_bytes=200_000)):
                key = ChunkKey(epoch, "ams1", "mix", "", number)
                riak.put("events", "events", key.format(), chunk.data)
                keys.append(key)
            riak.put(
                "epochs",
                "epochs",
                MetadataKey(epoch, "ams1").format(),
                format_metadata(keys).encode(),
                content_type="text/plain",
            )
    finally:
        riak.close()
    options = {"nodes": session_devnode.url, "dc": "ams1", "start": start, "end": start + 4}
    ours = load_events(spark, **options).select("event")
    register(spark)
    raw = spark.read.format("riak-events").option("event", "json")
    for name, value in options.items():
        raw = raw.option(name, str(value))
    theirs = raw.load().select(parse_json(col("event_json")).alias("event"))

    def variants(df: Any) -> list[tuple[bytes, bytes]]:
        return sorted((r.event.value, r.event.metadata) for r in df.collect())

    def texts(df: Any) -> list[str]:
        return sorted(r.j for r in df.select(to_json("event").alias("j")).collect())

    mine = variants(ours)
    assert len(mine) == len(pool)
    assert mine == variants(theirs)
    assert texts(ours) == texts(theirs)


def test_partitions_even_and_a_multiple_of_parallelism() -> None:
    from consumer_lib.spark.source import epoch_slices

    assert epoch_slices(0, 300, 60, 2) == [(i * 50, i * 50 + 50) for i in range(6)]
    assert epoch_slices(0, 150, 60, 2) == [(0, 37), (37, 75), (75, 112), (112, 150)]
    assert epoch_slices(10, 17, 2, 1) == [(10, 11), (11, 13), (13, 15), (15, 17)]
    assert epoch_slices(0, 3, 60, 4) == [(0, 1), (1, 2), (2, 3)]
    assert epoch_slices(5, 5, 60, 2) == []


def test_partition_defaults_full_stream_fat_substream_and_stream_unchanged() -> None:
    """The batch full-stream source cuts 300 epochs into one partition per core by
    default (every Spark task costs ~30 ms of CPU); the option still caps it; the
    substream and streaming sources keep 60-epoch slices."""
    from consumer_lib.spark.datasource import RiakEventsDataSource
    from consumer_lib.spark.source import DEFAULT_EPOCHS_PER_PARTITION, EpochSlice
    from consumer_lib.spark.substream_source import SubstreamOptions

    base = {"nodes": "http://x:1", "dc": "a", "start": "0", "end": "300", "parallelism": "2"}

    def slices(options: dict[str, str]) -> list[tuple[int, int]]:
        reader = RiakEventsDataSource(options).reader(RiakEventsDataSource(options).schema())
        parts = reader.partitions()
        assert all(isinstance(p, EpochSlice) for p in parts)
        return [(p.start, p.stop) for p in parts if isinstance(p, EpochSlice)]

    assert slices(base) == [(0, 150), (150, 300)]
    assert slices({**base, "end": "900"}) == [(0, 225), (225, 450), (450, 675), (675, 900)]
    assert slices({**base, "epochs_per_partition": "60"}) == [
        (i, i + 50) for i in range(0, 300, 50)
    ]
    assert DEFAULT_EPOCHS_PER_PARTITION == 60
    assert SubstreamOptions.parse({**base, "substream": "s"}).source.epochs_per_partition == 60


def test_batches_join_chunks_with_their_keys_in_order() -> None:
    """Chunks' rows joined into batches of at least batch_rows rows, the key columns
    right for every row, an empty chunk adding nothing; JSON and Variant alike."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from consumer_lib.spark.source import BatchBuilder, source_schema

    def chunk(number: int, count: int) -> tuple[ChunkKey, memoryview]:
        events = [{"n": number, "i": i, "s": "\u00f8"} for i in range(count)]
        return ChunkKey(7 + number // 3, "ams1", "web", f"s{number % 2}", number), memoryview(
            sereal.encode(events)
        )

    chunks = [chunk(n, c) for n, c in enumerate([3, 4, 0, 10, 2, 1])]
    for event in ("json", "variant"):
        schema = to_arrow_schema(source_schema({"event": event}), timezone="UTC")
        builder, batches = BatchBuilder(schema, event), []
        for key, document in chunks:
            builder.add(key, document, "utf8")
            if builder.rows >= 5:
                batches.append(builder.flush())
        batches.append(builder.flush())
        assert [b.num_rows for b in batches] == [7, 10, 3]
        assert all(b.schema.equals(schema) for b in batches)
        table = pa.Table.from_batches(batches)
        want = [
            (key.epoch, key.dc, key.type, key.subtype, key.chunk, one)
            for key, document in chunks
            for one in packed_events(document, event)
        ]
        column = table.column(5).to_pylist()
        got = [v if event == "json" else (v["value"], v["metadata"]) for v in column]
        names = ("epoch", "dc", "type", "subtype", "chunk")
        keys = zip(*(table.column(c).to_pylist() for c in names), strict=True)
        assert [(*k, e) for k, e in zip(keys, got, strict=True)] == want
        assert len(want) == 20


def test_batches_are_built_without_import_lookups() -> None:
    """Building a batch looks no module up: a failed import is not cached, so one per
    call scans sys.path every batch (pyarrow 26's RunEndEncodedArray.from_arrays tried
    dateutil on each call: ~0.1 ms, five times per batch)."""
    import sys

    from pyspark.sql.pandas.types import to_arrow_schema

    from consumer_lib.spark.source import BatchBuilder, source_schema

    class Recorder:
        def __init__(self) -> None:
            self.names: list[str] = []

        def find_spec(self, name: str, path: object, target: object = None) -> None:
            self.names.append(name)

    document = memoryview(sereal.encode([{"n": i} for i in range(3)]))
    schema = to_arrow_schema(source_schema({}), timezone="UTC")
    builder = BatchBuilder(schema)
    builder.add(ChunkKey(7, "ams1", "web", "s", 0), document, "utf8")
    builder.flush()  # whatever pyarrow imports once, it has now
    recorder = Recorder()
    sys.meta_path.insert(0, recorder)
    try:
        for chunk in range(3):
            builder.add(ChunkKey(7, "ams1", "web", "s", chunk), document, "utf8")
        assert builder.flush().num_rows == 9
    finally:
        sys.meta_path.remove(recorder)
    assert recorder.names == []


def packed_events(document: memoryview, event: str) -> list[Any]:
    """A chunk's events as the codec transcodes them on their own: JSON texts, or
    (value, metadata) Variant pairs."""
    from array import array

    def split(data: bytes, offsets: bytes, code: str) -> list[bytes]:
        ends = array(code, offsets)
        return [bytes(data[ends[i] : ends[i + 1]]) for i in range(len(ends) - 1)]

    if event == "json":
        text, offsets = sereal.decode_json_packed(document)
        return [t.decode() for t in split(text, offsets, "q")]
    values, value_offsets, metadata, metadata_offsets = sereal.decode_variant_packed(document)
    pairs = zip(
        split(values, value_offsets, "i"), split(metadata, metadata_offsets, "i"), strict=True
    )
    return list(pairs)


def test_options_prune_and_requery(spark: Any, epoch_range: Any) -> None:
    from consumer_lib.spark import load_events

    url, start, end, riak = epoch_range
    web = direct_read(riak, start, end, types={"web"})
    everything = direct_read(riak, start, end)
    only_web = load_events(spark, nodes=url, dc=",".join(DCS), start=start, end=end, types="web")
    assert only_web.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism
    assert only_web.count() == len(web)
    df = load_events(spark, nodes=url, dc="ams1,ams4", start=start, end=end)
    df.cache()  # the case pushdown broke: the same DataFrame queried again
    for type_ in ("web", "cron", "web"):
        want = sum(1 for r in everything if r[2] == type_)
        assert df.filter(df.type == type_).count() == want
        assert df.where(f"type = '{type_}' AND epoch >= {start + 2}").count() == sum(
            1 for r in everything if r[2] == type_ and r[0] >= start + 2
        )
    assert df.count() == len(everything)
    df.unpersist()
    from consumer_lib.spark import SparkSourceError

    with pytest.raises(SparkSourceError, match="VARIANT"):
        load_events(spark, nodes=url, dc="ams1", start=start, end=end, event="json")


def test_bad_options() -> None:
    from consumer_lib.spark import SourceOptions, SparkSourceError

    with pytest.raises(SparkSourceError, match="nodes"):
        SourceOptions.parse({"dc": "ams1", "start": "1", "end": "2"})
    with pytest.raises(SparkSourceError, match="before start"):
        SourceOptions.parse({"nodes": "http://x:1", "dc": "ams1", "start": "5", "end": "2"})
    with pytest.raises(SparkSourceError, match="start"):
        SourceOptions.parse({"nodes": "http://x:1", "dc": "ams1", "start": "-1", "end": "2"})
    with pytest.raises(SparkSourceError, match="'event' must be variant or json"):
        SourceOptions.parse(
            {"nodes": "http://x:1", "dc": "a", "start": "1", "end": "2", "event": "x"}
        )
    with pytest.raises(SparkSourceError, match="batch_rows"):
        SourceOptions.parse(
            {"nodes": "http://x:1", "dc": "a", "start": "1", "end": "2", "batch_rows": "0"}
        )
    with pytest.raises(SparkSourceError, match="parallelism"):
        SourceOptions.parse(
            {"nodes": "http://x:1", "dc": "a", "start": "1", "end": "2", "parallelism": "0"}
        )
    parsed = SourceOptions.parse(
        {"nodes": "http://x:1/", "dc": "ams1", "start": "0", "end": "9", "types": "web:app,cron"}
    )
    assert parsed.nodes == ("http://x:1",)
    assert parsed.types == (("web", "app"), ("cron", None))
    assert (parsed.event, parsed.parallelism) == ("variant", 1)
