"""Every Spark job reads (and the backfill writes) the bucket types and buckets it is
given (issue 22, item 5): a devnode whose data lives only under other names than the
defaults (``[bucket_types]`` of its config), read by the batch source, the streaming
source (its landing probes too), the substream source, and the jobs through
``riak-events spark export|backfill``. Before, every one of them read the default
names and found nothing.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from consumer_lib import EventsClient
from consumer_lib.spark import load_events, load_substream, register
from devnode.testing import DevnodeProcess
from eventstore.blob import pack_blob
from eventstore.names import ChunkKey, MetadataKey, Namespaces, format_metadata
from eventstore.riak import RiakClient
from substreams.results import read_result
from tests.integration.consumer_lib.spark.spark_marks import SPARK_WARNINGS

pytestmark = SPARK_WARNINGS

NS = Namespaces(
    events_bucket_type="ev_alt",
    events_bucket="chunks",
    epochs_bucket_type="ep_alt",
    epochs_bucket="meta",
    substreams_bucket_type="ss_alt",
)
#: The namespaces as the sources' options (the [namespaces] keys).
OPTIONS: dict[str, Any] = {
    "events_bucket_type": NS.events_bucket_type,
    "events_bucket": NS.events_bucket,
    "epochs_bucket_type": NS.epochs_bucket_type,
    "epochs_bucket": NS.epochs_bucket,
    "substreams_bucket_type": NS.substreams_bucket_type,
}
DC = "nsdc"
EPOCHS = 3
PLUGIN = """
from substreams import substream

@substream(name="{name}", types=["web"])
def count(events, ctx):
    return len(events)
"""


class Written:
    """What the module's devnode holds: ``EPOCHS`` epochs from ``start`` of ``DC``, only
    under :data:`NS`."""

    def __init__(self, node: DevnodeProcess, start: int, keys: list[ChunkKey], events: int):
        self.node = node
        self.url = node.url
        self.start = start
        self.end = start + EPOCHS
        self.keys = keys
        self.events = events


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Written]:
    root = tmp_path_factory.mktemp("ns-devnode")
    config = root / "devnode.toml"
    props = "allow_mult = false\nlast_write_wins = true\n"
    config.write_text(
        "".join(
            f"[bucket_types.{t}.props]\n{props}"
            for t in (NS.events_bucket_type, NS.epochs_bucket_type, NS.substreams_bucket_type)
        )
    )
    node = DevnodeProcess(root / "data", config=config).start()
    # Recent epochs, so that the streaming source probes their metadata (a late wait
    # of an hour) rather than letting them land unprobed.
    start = int(time.time()) - 30
    rnd = random.Random(7)
    keys: list[ChunkKey] = []
    events = 0
    with RiakClient([node.url]) as riak:
        for epoch in range(start, start + EPOCHS):
            listed = []
            for type_, subtype, chunks in (("web", "app", 2), ("cron", "", 1)):
                for n in range(chunks):
                    batch = [{"epoch": epoch, "i": i} for i in range(rnd.randint(1, 20))]
                    key = ChunkKey(epoch, DC, type_, subtype, n)
                    riak.put(*NS.chunk_location(key), pack_blob(batch))
                    listed.append(key)
                    events += len(batch)
            riak.put(
                *NS.metadata_location(MetadataKey(epoch, DC)),
                format_metadata(listed).encode(),
                content_type="text/plain",
            )
            keys += listed
    try:
        yield Written(node, start, keys, events)
    finally:
        node.stop()


def test_the_sources_read_the_names_they_are_given(spark: Any, written: Written) -> None:
    # The same data through consumer_lib, told the same names: the reference.
    with EventsClient([written.url], namespaces=NS) as client:
        direct = sum(1 for _ in client.events(DC, written.start, written.end))
    assert direct == written.events

    bounds: dict[str, Any] = {
        "nodes": written.url,
        "dc": DC,
        "start": written.start,
        "end": written.end,
    }
    assert load_events(spark, **bounds, **OPTIONS).count() == written.events

    register(spark)
    reader = spark.readStream.format("riak-events")
    stream_options = {**bounds, **OPTIONS, "lag_s": 0, "late_wait_s": 3600}
    for name, value in stream_options.items():
        reader = reader.option(name, str(value))
    query = (
        reader.load()
        .writeStream.format("memory")
        .queryName("namespaces_stream")
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    assert spark.table("namespaces_stream").count() == written.events


def test_the_jobs_read_and_write_the_names_they_are_given(
    spark: Any, written: Written, tmp_path: Path
) -> None:
    from eventstore.cli import main

    name = f"count_{random.randrange(10**9)}"
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "count.py").write_text(PLUGIN.format(name=name))
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in OPTIONS.items()]
    common = ["--node", written.url, "--dc", DC, "--start", str(written.start),
              "--end", str(written.end)]  # fmt: skip

    def run(*args: str) -> Any:
        result = CliRunner().invoke(main, ["spark", *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    web = [k for k in written.keys if k.type == "web"]
    counts = run("backfill", *common, "--substream", name, "--plugin-dir", str(plugins),
                 "--no-entry-points", "--max-chunks-per-s", "0", "--json", *flags)  # fmt: skip
    assert (counts["stored"], counts["chunks"]) == (len(web), len(web))
    with RiakClient([written.url]) as riak:
        stored = [read_result(riak.get(*NS.substream_location(name, k)).value) for k in web]
    assert [r.status for r in stored] == ["ok"] * len(web)

    # Served from where the backfill stored them (no plugin here: nothing computed).
    rows = load_substream(
        spark, substream=name, nodes=written.url, dc=DC, start=written.start,
        end=written.end, fallback="off", entry_points="false", **OPTIONS,
    ).collect()  # fmt: skip
    assert sorted(r.served for r in rows) == ["server"] * len(web)

    # export takes no substreams bucket type (it reads no results)
    hours = run("export", *common, "--out", str(tmp_path / "lake"), "--json",
                *[f for f in flags if "substreams" not in f])  # fmt: skip
    assert sum(h["events"] for h in hours) == written.events


def test_a_bad_name_is_one_line_naming_the_option() -> None:
    from consumer_lib.spark.source import SourceOptions, SparkSourceError
    from eventstore.cli import main

    options = {"nodes": "http://127.0.0.1:1", "dc": DC, "start": "0", "end": "1"}
    with pytest.raises(SparkSourceError, match=r"^option 'epochs_bucket': 'a b' does not match"):
        SourceOptions.parse({**options, "epochs_bucket": "a b"})
    result = CliRunner().invoke(
        main,
        ["spark", "export", "--node", "http://127.0.0.1:1", "--dc", DC, "--start", "0",
         "--end", "1", "--out", "x", "--events-bucket-type", "a/b"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "Invalid value for --events-bucket-type: 'a/b' does not match" in result.output
