"""The Spark jobs against a devnode, through the CLI in this process (the session of
the test run is the active one): export is idempotent per hour (same files twice, an
hour re-run is replaced, not duplicated), markers only for finished hours, a failed
hour leaves no marker and the earlier ones intact; backfill stores what the companion
would store, keeps results of the same version, and consumer_lib then reads the results
as served by the server."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from consumer_lib import EventsClient
from eventstore.blob import unpack_blob
from eventstore.names import ChunkKey, MetadataKey, format_metadata
from eventstore.riak import RiakClient
from substreams.results import error_value, ok_value, read_result
from tests.integration.consumer_lib.spark.spark_marks import SPARK_WARNINGS

pytestmark = SPARK_WARNINGS

HOUR = 3600


def parquet_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.parquet"))}


def hour_events(out: Path, hour_dir: str) -> list[dict[str, Any]]:
    rows = []
    for path in sorted((out / hour_dir).rglob("*.parquet")):
        table = pq.read_table(path)
        assert table.schema.field("ts").type == pa.timestamp("us", tz="UTC")
        ts_type = pq.ParquetFile(path).schema.column(1).logical_type
        assert ts_type.type == "TIMESTAMP" and "microseconds" in str(ts_type)
        for row in table.to_pylist():
            assert int(row["ts"].timestamp()) == row["epoch"]
            rows.append({"epoch": row["epoch"], **json.loads(row["event_json"])})
    return rows


def stored_events(riak: RiakClient, keys: list[ChunkKey], hour: int) -> list[dict[str, Any]]:
    found = []
    for key in keys:
        if hour <= key.epoch < hour + HOUR:
            blob = riak.get("events", "events", key.format()).value
            found += [{"epoch": key.epoch, **e} for e in unpack_blob(blob)]
    return found


def canon(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def run_cli(args: list[str]) -> Any:
    from eventstore.cli import main

    result = CliRunner().invoke(main, ["spark", *args], catch_exceptions=False)
    return result


def test_export_is_idempotent_per_hour_with_markers(
    spark: Any, session_devnode: Any, epoch_writer: Any, tmp_path: Path
) -> None:
    from consumer_lib.spark.export import export_range, hour_dir

    dc = f"exp{random.randrange(10**9)}"
    h0 = 1_400_000_000 // HOUR * HOUR
    h1 = h0 + HOUR
    keys = epoch_writer(dc, h0 + 100, h0 + 104, seed=1)
    keys += epoch_writer(dc, h1 + 5, h1 + 7, seed=2)
    url = session_devnode.url
    out = tmp_path / "out"
    args = ["export", "--node", url, "--dc", dc, "--start", str(h0 + 100), "--end",
            str(h1 + 7), "--out", str(out)]  # fmt: skip

    first = run_cli(args)
    assert first.exit_code == 0, first.output
    assert "2 hours (2 complete)" in first.output
    files = parquet_files(out)
    assert sorted({str(Path(f).parent) for f in files}) == [
        f"{hour_dir(h, dc)}/type={t}" for h in (h0, h1) for t in ("cron", "web")
    ]
    with RiakClient([url]) as riak:
        for hour in (h0, h1):
            assert canon(hour_events(out, hour_dir(hour, dc))) == canon(
                stored_events(riak, keys, hour)
            )
            marker = json.loads((out / hour_dir(hour, dc) / "_COMPLETE").read_text())
            assert marker["events"] == len(stored_events(riak, keys, hour))
    assert not list((out / "_staging").iterdir())
    # Nothing else in the hours: no Spark _SUCCESS, no hidden checksum files.
    names = {p.name for p in out.glob("date=*/**/*") if p.is_file()}
    assert names == {"_COMPLETE", "part-00000.parquet", "part-00001.parquet"}, names

    # Twice: the same files, byte for byte.
    again = run_cli(args)
    assert again.exit_code == 0, again.output
    assert parquet_files(out) == files

    # New epochs in h0, then only h0 re-run: replaced (not duplicated), h1 untouched.
    keys += epoch_writer(dc, h0 + 200, h0 + 202, seed=3)
    redo = run_cli([*args[:6], str(h0), "--end", str(h0 + 1), "--out", str(out)])
    assert redo.exit_code == 0, redo.output
    with RiakClient([url]) as riak:
        assert canon(hour_events(out, hour_dir(h0, dc))) == canon(stored_events(riak, keys, h0))
    now = parquet_files(out)
    assert {k: v for k, v in now.items() if f"hour={h1 // HOUR % 24:02d}" in k} == {
        k: v for k, v in files.items() if f"hour={h1 // HOUR % 24:02d}" in k
    }

    # Markers only for finished hours: at h1 + 100 s, h0 has settled, h1 is not over.
    partial = tmp_path / "partial"
    done = export_range(
        spark, nodes=[url], dc=dc, start=h0, end=h1 + 1, out=str(partial),
        clock=lambda: h1 + 100.0,
    )  # fmt: skip
    assert [h.complete for h in done] == [True, False]
    assert (partial / hour_dir(h0, dc) / "_COMPLETE").exists()
    assert not (partial / hour_dir(h1, dc) / "_COMPLETE").exists()
    assert (partial / hour_dir(h1, dc) / "type=web").is_dir()  # exported, not marked

    # A failing hour (a chunk its metadata lists is gone): no marker, nothing of it;
    # the earlier hour is complete, and a previous export of the failing hour intact.
    h2 = h1 + HOUR
    missing = ChunkKey(h2 + 1, dc, "web", "app", 0)
    with RiakClient([url]) as riak:
        riak.put(
            "epochs", "epochs", MetadataKey(h2 + 1, dc).format(),
            format_metadata([missing]).encode(), content_type="text/plain",
        )  # fmt: skip
    failed = run_cli([*args[:6], str(h1), "--end", str(h2 + 5), "--out", str(out)])
    assert failed.exit_code == 1
    assert "export failed" in failed.output and missing.format() in failed.output
    assert (out / hour_dir(h1, dc) / "_COMPLETE").exists()
    assert not (out / hour_dir(h2, dc)).exists()


PLUGIN = """
from substreams import substream

@substream(name="{name}", types=["web"])
def summary(events, ctx):
    return {{"n": len(events), "statuses": sorted({{e["status"] for e in events}})}}
"""


def test_backfill_stores_results_consumer_lib_reads_as_served(
    spark: Any, session_devnode: Any, epoch_writer: Any, tmp_path: Path
) -> None:
    dc = f"bf{random.randrange(10**9)}"
    name = f"summary_{dc}"
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "summary.py").write_text(PLUGIN.format(name=name))
    start = 1_450_000_000
    keys = epoch_writer(dc, start, start + 3, seed=4, web_chunks=2)
    web = [k for k in keys if k.type == "web"]
    url = session_devnode.url
    with EventsClient([url], plugin_dirs=[plugins], use_entry_points=False) as client:
        version = client.plugins.get(name).version
    sentinel = {"n": -1, "kept": True}
    with RiakClient([url]) as riak:
        riak.put("substreams", name, web[0].format(), ok_value(name, version, sentinel))
        riak.put("substreams", name, web[1].format(), error_value("shed", name, version, "shed"))
        riak.put("substreams", name, web[2].format(), ok_value(name, "f" * 16, {"n": -2}))
    args = ["backfill", "--node", url, "--dc", dc, "--substream", name, "--start",
            str(start), "--end", str(start + 3), "--plugin-dir", str(plugins),
            "--no-entry-points", "--max-chunks-per-s", "0"]  # fmt: skip
    # A result of another version is not overwritten unless asked: the job says so.
    refused = run_cli(args)
    assert refused.exit_code != 0
    assert "other_version 1" in refused.output and "--replace-version" in refused.output
    with RiakClient([url]) as riak:
        kept = read_result(riak.get("substreams", name, web[2].format()).value)
    assert (kept.version, kept.result) == ("f" * 16, {"n": -2})
    # (the first run stored the missing ones already)
    result = run_cli([*args, "--replace-version"])
    assert result.exit_code == 0, result.output
    assert f"stored 1, failed 0, kept {len(web) - 1}, unreadable 0, chunks {len(web)}" in (
        result.output
    )

    with EventsClient([url], plugin_dirs=[plugins], use_entry_points=False) as client:
        served = list(client.substream(name, dc, start, start + 3, fallback="off"))
        computed = list(client.substream(name, dc, start, start + 3, fallback="always"))
    assert [r.served for r in served] == ["server"] * len(web)
    assert {r.version for r in served} == {version}
    assert served[0].result == sentinel  # a result of the same version is never overwritten
    assert [r.result for r in served[1:]] == [r.result for r in computed[1:]]
    with RiakClient([url]) as riak:
        record = read_result(riak.get("substreams", name, web[1].format()).value)
    assert (record.status, record.substream, record.version) == ("ok", name, version)

    # A second run keeps everything: nothing is stored again.
    again = run_cli(args)
    assert f"stored 0, failed 0, kept {len(web)}" in again.output
    bad = run_cli([*args[:-1], "-1"])
    assert bad.exit_code == 2
    assert "max-chunks-per-s" in bad.output


def test_export_rejects_bad_input(spark: Any, session_devnode: Any, tmp_path: Path) -> None:
    bad = run_cli(["export", "--node", session_devnode.url, "--dc", "a,b", "--start", "0",
                   "--end", "10", "--out", str(tmp_path)])  # fmt: skip
    assert bad.exit_code == 2
    assert "one dc" in bad.output
    bad = run_cli(["export", "--node", session_devnode.url, "--dc", "a", "--start", "yesterday",
                   "--end", "10", "--out", str(tmp_path)])  # fmt: skip
    assert bad.exit_code == 2
    assert "--start" in bad.output


def test_export_splits_an_hour_by_chunks() -> None:
    from consumer_lib.spark.export import hours_of, split_by_chunks

    assert split_by_chunks({}, 2) == []
    assert split_by_chunks({7: 3}, 2) == [(7, 8)]
    assert split_by_chunks({e: 1 for e in range(10, 20)}, 2) == [(10, 15), (15, 20)]
    # A huge epoch does not leave empty ranges; the ranges cover every epoch, in order.
    assert split_by_chunks({1: 100, 2: 1, 3: 1}, 3) == [(1, 2), (2, 4)]
    # Data in the first 300 s of the hour: both tasks get data (not one idle).
    assert split_by_chunks({e: 2 for e in range(3600, 3900)}, 2) == [(3600, 3750), (3750, 3900)]
    assert hours_of(3599, 3601) == [0, 3600]
    assert hours_of(3600, 7200) == [3600]


def test_backfill_pacer_spaces_calls_at_the_rate() -> None:
    from consumer_lib.spark.backfill import Pacer

    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    pacer = Pacer(4.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(9):
        pacer.wait()
    assert now[0] == pytest.approx(102.0)  # 9 calls at 4/s: the last one 2 s after the first
    assert len(slept) == 8
    now[0] += 10.0  # idle time is not saved up as a burst
    pacer.wait()
    pacer.wait()
    assert slept[-1] == pytest.approx(0.25)
    unlimited = Pacer(0, clock=lambda: now[0], sleep=sleep)
    unlimited.wait()
    assert len(slept) == 9
