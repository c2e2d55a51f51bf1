"""Spark jobs: export throughput to Parquet, and streaming lag into a memory sink.

1. **Export**: a devnode receives ``--epochs`` epochs (default 300) of ``--events``
   realistic events each (one dc, chunked at 500 KB as relocators do), starting on an
   hour boundary; ``consumer_lib.spark.export.export_range`` exports that hour on
   ``local[2]`` (``--files-per-hour``, default 2), ``--repeat`` times (each run replaces
   the hour: the idempotent path). Prints events/s and MB/s of Parquet written for the
   best run, with the CPU seconds of the JVM, Spark's Python workers and the devnode
   during it, and the load average.
2. **Streaming lag**: a streaming query (``lag_s=0``, default trigger) into a memory
   sink, while a writer stores ``--live-epochs`` epochs of ``--live-events`` events each
   right after each epoch ends (chunks, then metadata). A StreamingQueryListener notes
   when each micro-batch commits (its rows are then in the sink) and its end offset;
   an epoch's lag is that time minus the epoch's end. Prints p50 / p99 / max, and
   checks the sink holds every event written.

    .venv/bin/python bench/spark_jobs_bench.py [--epochs 300] [--events 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from events import generate_events, store_epoch
from report import emit, figure
from spark_bench import cpu_seconds, start_spark

from devnode.testing import DevnodeProcess
from eventstore.riak import RiakClient

HOUR = 3600
FIRST_EPOCH = 1_700_002_800  # an hour boundary


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def write_epoch(riak: RiakClient, dc: str, epoch: int, events: list[dict[str, Any]]) -> int:
    """Chunks, then metadata, as a relocator writes; returns stored bytes."""
    return sum(map(len, store_epoch(riak, epoch, dc, events)))


def bench_export(spark: Any, url: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from consumer_lib.spark.export import export_range

    riak = RiakClient([url])
    pool = generate_events(args.events * 4, seed=8)
    stored = 0
    for i in range(args.epochs):
        start = (i * args.events) % (len(pool) - args.events)
        stored += write_epoch(riak, "exp", FIRST_EPOCH + i, pool[start : start + args.events])
    riak.close()
    n_events = args.epochs * args.events
    print(f"export: {args.epochs} epochs, {n_events} events, {stored / 1e6:.1f} MB stored")
    best: tuple[float, dict[str, float], str, int, int] | None = None
    for _ in range(args.repeat):
        before = cpu_seconds(os.getpid())
        t0 = time.perf_counter()
        (hour,) = export_range(
            spark,
            nodes=[url],
            dc="exp",
            start=FIRST_EPOCH,
            end=FIRST_EPOCH + args.epochs,
            out=str(tmp / "out"),
            files_per_hour=args.files_per_hour,
        )
        seconds = time.perf_counter() - t0
        after = cpu_seconds(os.getpid())
        assert hour.events == n_events, (hour.events, n_events)
        cpu: dict[str, float] = defaultdict(float)
        for (role, pid), seconds_so_far in after.items():  # by process: new ones count whole
            cpu[role] += seconds_so_far - before.get((role, pid), 0.0)
        if best is None or seconds < best[0]:
            best = (seconds, cpu, load(), hour.size_bytes, hour.files)
    assert best is not None
    seconds, cpu, avg, size, files = best
    print(
        f"export best of {args.repeat}: {seconds:.2f}s, {n_events / seconds:,.0f} events/s, "
        f"{size / 1e6 / seconds:.1f} MB/s of Parquet ({size / 1e6:.1f} MB, {files} files); "
        f"cpu s: jvm {cpu.get('jvm', 0):.2f}, python workers "
        f"{cpu.get('python workers', 0):.2f}, devnode {cpu.get('devnode', 0):.2f}; load {avg}"
    )
    return {"events_per_s": n_events / seconds, "cpu_s": dict(cpu)}


def bench_stream(spark: Any, url: str, args: argparse.Namespace, tmp: Path) -> float:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    commits: list[tuple[float, int]] = []  # (time, end offset) per committed batch

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            now = time.time()
            for source in event.progress.sources:
                end = source.endOffset
                offset = json.loads(end) if isinstance(end, str) else end
                if offset:
                    commits.append((now, int(offset["next_epoch"])))

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            pass

    listener = Listener()
    spark.streams.addListener(listener)
    first = int(time.time()) + 3
    pool = generate_events(args.live_events * 4, seed=9)
    stream = (
        spark.readStream.format("riak-events")
        .option("nodes", url)
        .option("dc", "live")
        .option("start", first)
        .option("lag_s", 0)
        .option("late_wait_s", 5)
        .load()
        .select("epoch", "type")
    )
    query = (
        stream.writeStream.format("memory")
        .queryName("lag")
        .option("checkpointLocation", str(tmp / "ckpt"))
        .start()
    )
    riak = RiakClient([url])
    written = 0

    def writer() -> None:
        nonlocal written
        for i in range(args.live_epochs):
            epoch = first + i
            time.sleep(max(0.0, epoch + 1 - time.time()))
            start = (i * args.live_events) % (len(pool) - args.live_events)
            write_epoch(riak, "live", epoch, pool[start : start + args.live_events])
            written += args.live_events

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join()
    last = first + args.live_epochs
    deadline = time.time() + 30
    while not any(end >= last for _, end in commits) and time.time() < deadline:
        time.sleep(0.05)
    query.stop()
    spark.streams.removeListener(listener)
    riak.close()
    lags = []
    for epoch in range(first, last):
        seen = min((t for t, end in commits if end > epoch), default=None)
        if seen is not None:
            lags.append(seen - (epoch + 1))
    rows = spark.sql("SELECT count(*) AS n FROM lag").first()
    assert rows is not None and rows.n == written, (rows, written)
    assert len(lags) == args.live_epochs, (len(lags), args.live_epochs)
    lags.sort()
    p99 = lags[min(len(lags) - 1, round(0.99 * (len(lags) - 1)))]
    print(
        f"streaming lag, {args.live_epochs} epochs x {args.live_events} events written live: "
        f"p50 {statistics.median(lags):.2f}s, p99 {p99:.2f}s, max {lags[-1]:.2f}s "
        f"({len(commits)} batches); load {load()}"
    )
    return p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--events", type=int, default=1000, help="events per epoch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--files-per-hour", type=int, default=2)
    parser.add_argument("--live-epochs", type=int, default=40)
    parser.add_argument("--live-events", type=int, default=500)
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--only", choices=["export", "stream"], default=None)
    parser.add_argument("--json", action="store_true", help="headline figures as JSON, last")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, load {load()}")
    with tempfile.TemporaryDirectory(prefix="spark-jobs-bench-") as name:
        tmp = Path(name)
        node = DevnodeProcess(tmp / "devnode").start()
        try:
            spark = start_spark(args.driver_memory)
            figures, cpu_s = [], None
            if args.only in (None, "export"):
                export = bench_export(spark, node.url, args, tmp)
                figures.append(
                    figure(
                        f"Spark export to Parquet, {args.epochs * args.events} events",
                        export["events_per_s"],
                        "events/s",
                        # the README's figure is for the default size only
                        anchor="quiet machine (bench/README.md)" if args.epochs == 300 else "",
                        anchor_value=74_522 if args.epochs == 300 else None,
                    )
                )
                cpu_s = export["cpu_s"]
            if args.only in (None, "stream"):
                p99 = bench_stream(spark, node.url, args, tmp)
                figures.append(
                    figure(
                        "Spark streaming, epoch end -> rows in the sink",
                        p99,
                        "s p99",
                        anchor="quiet machine (bench/README.md)" if args.live_epochs == 40 else "",
                        anchor_value=0.46 if args.live_epochs == 40 else None,
                    )
                )
            if args.json:
                emit(figures, cpu_s)
            spark.stop()
        finally:
            node.stop()


if __name__ == "__main__":
    main()
