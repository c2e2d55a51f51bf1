"""The streaming source: the landing rule (lag and late wait), and a query run in its
own process with a checkpoint, killed and restarted between batches while new epochs
are written, that neither skips nor repeats an epoch."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.integration.consumer_lib.spark.spark_marks import SPARK_WARNINGS

pytestmark = SPARK_WARNINGS

# The query, run in a process of its own (a Spark session of its own: the point is to
# kill it). Each micro-batch's (epoch, dc) -> event count goes to batch-<id>.json,
# written atomically: a batch Spark runs again after a crash rewrites its own file (an
# idempotent sink), so two files holding one epoch would be a real repeat.
QUERY = """
import json, os, sys, time
from pyspark.sql import SparkSession
from consumer_lib.spark import register

url, dcs, start, end, ckpt, out, pause_s = sys.argv[1:8]
spark = (SparkSession.builder.master("local[1]").appName("stream-test")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
         .config("spark.driver.memory", "512m").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
register(spark)
df = (spark.readStream.format("riak-events").option("nodes", url).option("dc", dcs)
      .option("start", start).option("end", end).option("lag_s", "0")
      .option("late_wait_s", "3600").option("max_epochs_per_batch", "2").load())

def sink(batch, batch_id):
    rows = batch.groupBy("epoch", "dc").count().collect()
    counts = sorted([r.epoch, r.dc, r["count"]] for r in rows)
    tmp = os.path.join(out, f".batch-{batch_id}.tmp")
    with open(tmp, "w") as f:
        json.dump(counts, f)
    os.replace(tmp, os.path.join(out, f"batch-{batch_id}.json"))
    time.sleep(float(pause_s))  # the test kills the process here: written, not committed

q = (df.writeStream.foreachBatch(sink).option("checkpointLocation", ckpt)
     .trigger(availableNow=True).start())
q.awaitTermination()
spark.stop()
"""


def test_landing_rule_waits_for_late_metadata_then_gives_up() -> None:
    from consumer_lib.spark.stream import StreamOptions, landed_end
    from eventstore.names import MetadataKey

    stream, _ = StreamOptions.parse(
        {"nodes": "http://x:1", "dc": "a,b", "lag_s": "2", "late_wait_s": "10"}
    )
    stored = {MetadataKey(e, dc).format() for e in range(100, 120) for dc in "ab"}
    stored.discard(MetadataKey(105, "b").format())  # one dc late for epoch 105
    asked: list[int] = []

    def has(keys: list[MetadataKey]) -> set[str]:
        asked.extend(k.epoch for k in keys)
        return {k.format() for k in keys} & stored

    # now=110.5: epochs < 108 are due; 105 is due but within its late wait (until 118).
    assert landed_end(100, 10**6, 110.5, stream, has) == 105
    # now=118.0: 105 is past its wait and lands; epochs < 116 are due, all stored.
    assert landed_end(100, 10**6, 118.0, stream, has) == 116
    # The target caps; an epoch long past its wait is not probed.
    asked.clear()
    assert landed_end(100, 103, 500.0, stream, has) == 103
    assert asked == []
    with pytest.raises(ValueError, match="lag_s"):
        StreamOptions.parse({"nodes": "http://x:1", "dc": "a", "lag_s": "-1"})


def run_query(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with log.open("ab") as f:
        return subprocess.Popen(
            [sys.executable, "-c", QUERY, *args],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def batches(out: Path) -> dict[int, list[list[Any]]]:
    return {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in out.glob("batch-*.json")}


def test_query_restarted_from_checkpoint_neither_skips_nor_repeats(
    session_devnode: Any, epoch_writer: Any, tmp_path: Path
) -> None:
    dcs = ("ams1", "ams4")
    start = int(time.time()) - 600  # recent: missing metadata is awaited (late_wait 3600)
    end = start + 14
    written: Counter[tuple[int, str]] = Counter()

    def write(first: int, stop: int) -> None:
        for dc in dcs:
            for key in epoch_writer(dc, first, stop, seed=first):
                written[(key.epoch, dc)] += 0
        # Count events as the reader will: decode what was written.
        from eventstore.blob import unpack_blob
        from eventstore.names import MetadataKey, parse_metadata
        from eventstore.riak import RiakClient

        with RiakClient([session_devnode.url]) as riak:
            for epoch in range(first, stop):
                for dc in dcs:
                    meta = MetadataKey(epoch, dc)
                    refs = parse_metadata(riak.get("epochs", "epochs", meta.format()).value)
                    for ref in refs:
                        blob = riak.get("events", "events", meta.chunk_key(ref).format()).value
                        written[(epoch, dc)] += len(unpack_blob(blob))

    ckpt, out, log = tmp_path / "checkpoint", tmp_path / "out", tmp_path / "query.log"
    out.mkdir()

    def args(pause_s: float) -> list[str]:
        return [session_devnode.url, ",".join(dcs), str(start), str(end), str(ckpt), str(out),
                str(pause_s)]  # fmt: skip

    # Run 1: epochs [start, start+6) stored; start+6 is missing and within its late
    # wait, so the query stops before it: 3 batches of 2 epochs.
    write(start, start + 6)
    proc = run_query(args(0), log)
    assert proc.wait(timeout=240) == 0, log.read_text()[-5000:]
    first_run = batches(out)
    assert sorted(first_run) == [0, 1, 2], log.read_text()[-5000:]
    assert sorted({row[0] for rows in first_run.values() for row in rows}) == list(
        range(start, start + 6)
    )

    # Run 2: 6 more epochs; killed (whole process group, JVM included) while its first
    # batch sits written but not committed.
    write(start + 6, start + 12)
    proc = run_query(args(120), log)
    deadline = time.monotonic() + 240
    while 3 not in batches(out):
        assert proc.poll() is None, log.read_text()[-5000:]
        assert time.monotonic() < deadline, "the restarted query wrote no batch"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    killed_batch = batches(out)[3]

    # Run 3: more epochs written meanwhile; the uncommitted batch runs again with the
    # same offsets, then the query goes on to `end`.
    write(start + 12, end)
    proc = run_query(args(0), log)
    assert proc.wait(timeout=240) == 0, log.read_text()[-5000:]

    final = batches(out)
    assert final[3] == killed_batch  # the same epochs again, same content
    seen: Counter[tuple[int, str]] = Counter()
    counts: dict[tuple[int, str], int] = {}
    for rows in final.values():
        for epoch, dc, n in rows:
            seen[(epoch, dc)] += 1
            counts[(epoch, dc)] = n
    assert set(seen) == set(written)  # nothing skipped
    assert set(seen.values()) == {1}  # nothing in two batches
    assert counts == dict(written)
    assert sorted(final) == list(range(len(final)))


def test_stream_of_events_and_of_a_substream_equals_the_batch_read(
    spark: Any, session_devnode: Any, epoch_writer: Any, tmp_path: Path
) -> None:
    """In this session: availableNow over old epochs (past their late wait), in
    batches of 2 epochs; the rows equal the batch source's, for events, for a
    substream (served and fallback rows alike), and for events read with where= and
    select=."""
    from consumer_lib.spark import register

    dc = f"st{random.randrange(10**9)}"
    start = 1_450_000_000 + random.randrange(10**5) * 10
    epoch_writer(dc, start, start + 5, seed=5)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    name = f"n_{dc}"
    (plugins / "n.py").write_text(
        "from substreams import substream\n\n"
        f"@substream(name={name!r}, types=['web'])\n"
        "def n(events, ctx):\n    return {'n': len(events)}\n"
    )
    register(spark)
    common = {"nodes": session_devnode.url, "dc": dc, "start": str(start), "end": str(start + 5)}
    extra = {"substream": name, "plugin_dirs": str(plugins), "entry_points": "false"}
    for options, columns in (
        (common, ["epoch", "dc", "type", "subtype", "chunk", "to_json(event) AS j"]),
        ({**common, **extra}, ["epoch", "type", "chunk", "served", "result_json"]),
        # where= and select= pushed into each slice's walk, as in a batch read
        (
            {**common, "where": "status >= 500 AND host <> 'web-0'", "select": "i, city AS c"},
            ["epoch", "type", "chunk", "to_json(i) AS i", "to_json(c) AS c"],
        ),
    ):
        batch = spark.read.format("riak-events").options(**options).load()
        expected = sorted(tuple(r) for r in batch.selectExpr(*columns).collect())
        stream = (
            spark.readStream.format("riak-events")
            .options(**options, max_epochs_per_batch="2")
            .load()
            .selectExpr(*columns)
        )
        table = f"t{random.randrange(10**9)}"
        query = (
            stream.writeStream.format("memory")
            .queryName(table)
            .option("checkpointLocation", str(tmp_path / table))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.lastProgress is not None
        got = sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {table}").collect())
        assert got == expected
        assert len(expected) > 5
        assert query.lastProgress["batchId"] >= 2  # 5 epochs in batches of at most 2
