"""Spark, a filtered and projected read: ``load_events(where=, select=)`` (the query
plugins' plan in the executors' walk of each chunk) against ``text`` + ``parse_json`` +
the same filter and projection in Spark SQL (the anchor), in one run (issue 23, item 5).

A devnode receives ``--epochs`` epochs (default 300) of ``--events`` events each (the
shared generator's; one dc, chunked at 500 KB as relocators do), and the same events
are written as JSON Lines (``spark_bench.write_range``: the same events on both sides).
Then, on ``local[2]``, each row materializes its result with a noop write, in rounds
(each row once per round, so that a change of load hits every row alike; best run
kept), after a check that every row gives the same number of rows (untimed):

- **text + parse_json + Spark SQL (anchor)**: ``spark.read.text(dir)``, ``parse_json``,
  ``WHERE`` and the selected paths in Spark SQL;
- **source + Spark SQL**: ``load_events`` (the event as VARIANT, made on the
  executors) and the same filter and projection in Spark SQL;
- **source, pushdown**: ``load_events(where=WHERE, select=SELECT)``.

The filter is ``web_5xx_q``'s (the 5xx answers, web and lb: 14% of the events), the projection
five of its paths. Each row prints events/s, the ratio to the anchor and the CPU seconds
by process (JVM, Python workers, devnode) of its best run, with the load average; then
each row's ratio to the anchor of the same round (min / median / max) and the median
CPU ratio. Target (issue 23): pushdown >= 3x the anchor.

    .venv/bin/python bench/spark_query_bench.py [--epochs 300] [--events 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from report import emit, figure
from spark_bench import (
    DC,
    FIRST_EPOCH,
    Measurement,
    best_of_rounds,
    machine_line,
    start_spark,
    write_range,
)

import sereal_codec as sereal
from devnode.testing import DevnodeProcess
from eventstore.riak import RiakClient

#: The filter and projection, in the query plugins' SQL (``load_events``) ...
WHERE = "typeof(status) = 'integer' AND status BETWEEN 500 AND 599"
SELECT = ["url", "status", "duration_ms AS ms", "host", "request_id"]
#: ... and in Spark SQL over the event as VARIANT (the generator's statuses are integers).
SPARK_WHERE = "event:status::bigint BETWEEN 500 AND 599"
SPARK_SELECT = [
    "event:url AS url",
    "event:status AS status",
    "event:duration_ms AS ms",
    "event:host AS host",
    "event:request_id AS request_id",
]
KEYS = ["epoch", "dc", "type", "subtype", "chunk"]
LABELS = {
    "anchor": "text + parse_json + SQL",
    "sql": "source + Spark SQL",
    "pushdown": "source, pushdown",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--events", type=int, default=1000, help="events per epoch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--json", action="store_true", help="headline figures as JSON, last")
    args = parser.parse_args()

    from pyspark.sql.functions import col, parse_json

    from consumer_lib.spark import load_events

    with tempfile.TemporaryDirectory(prefix="spark-query-bench-") as tmp:
        json_dir = Path(tmp) / "json"
        json_dir.mkdir()
        node = DevnodeProcess(Path(tmp) / "devnode").start()
        riak = RiakClient([node.url])
        try:
            t0 = time.perf_counter()
            n_events, stored = write_range(riak, args.epochs, args.events, json_dir)
            print(
                f"wrote {args.epochs} epochs, {n_events} events, {stored / 1e6:.1f} MB stored "
                f"in {time.perf_counter() - t0:.1f}s (codec: {sereal.IMPLEMENTATION})"
            )
            print(machine_line())
            spark = start_spark(args.driver_memory)
            options = {"nodes": node.url, "dc": DC, "start": FIRST_EPOCH}
            options["end"] = FIRST_EPOCH + args.epochs
            text = spark.read.text(str(json_dir))
            frames: dict[str, Any] = {
                "anchor": text.select(parse_json(col("value")).alias("event"))
                .where(SPARK_WHERE)
                .selectExpr(*SPARK_SELECT),
                "sql": load_events(spark, **options)
                .where(SPARK_WHERE)
                .selectExpr(*KEYS, *SPARK_SELECT),
                "pushdown": load_events(spark, where=WHERE, select=SELECT, **options),
            }
            counts = {row: df.count() for row, df in frames.items()}
            assert len(set(counts.values())) == 1 and counts["anchor"] > 0, counts
            print(f"rows kept: {counts['anchor']} of {n_events} events")
            results, rounds = best_of_rounds(frames, args.repeat)
            report(results, rounds, n_events, args)
            if args.json:
                headline(results, n_events, args.epochs, args.events)
            spark.stop()
        finally:
            riak.close()
            node.stop()


def report(
    results: dict[str, Measurement],
    rounds: list[dict[str, tuple[float, float]]],
    n_events: int,
    args: argparse.Namespace,
) -> None:
    print(
        f"\n{n_events} events, {args.epochs}-epoch range, local[2], noop write, "
        f"best of {args.repeat}; WHERE {WHERE}; SELECT {', '.join(SELECT)}"
    )
    print(
        f"{'':26} {'events/s':>10} {'x anchor':>8} {'s':>7} {'jvm cpu':>8} "
        f"{'py cpu':>7} {'devnode':>8}  load"
    )
    anchor = results["anchor"]
    for row, (secs, cpu, load) in results.items():
        print(
            f"{LABELS[row]:26} {n_events / secs:10,.0f} {anchor[0] / secs:8.2f} {secs:7.2f} "
            f"{cpu.get('jvm', 0):8.2f} {cpu.get('python workers', 0):7.2f} "
            f"{cpu.get('devnode', 0):8.2f}  {load}"
        )
    print("\nx anchor of the same round: wall min / median / max (each round); CPU median")
    for row in results:
        ratios = [r["anchor"][0] / r[row][0] for r in rounds]
        cpu_ratio = statistics.median(r["anchor"][1] / r[row][1] for r in rounds)
        print(
            f"{LABELS[row]:26} {min(ratios):.2f} / {statistics.median(ratios):.2f} / "
            f"{max(ratios):.2f}  ({' '.join(f'{x:.2f}' for x in ratios)}); CPU {cpu_ratio:.2f}"
        )


def headline(results: dict[str, Measurement], n_events: int, epochs: int, per_epoch: int) -> None:
    """The figures bench/report.py shows: each source row against the anchor, same run.
    Target (issue 23): pushdown >= 3x ``text`` + ``parse_json`` + the same filter."""
    anchor = results["anchor"][0]
    figures = [
        figure(
            f"Spark filtered read, {LABELS[row]}, {epochs} epochs x {per_epoch:,} events",
            n_events / secs,
            "events/s",
            anchor="text + parse_json + the same filter, same run",
            anchor_value=n_events / anchor,
            target=">= 3x" if row == "pushdown" else "",
        )
        for row, (secs, _cpu, _load) in results.items()
        if row != "anchor"
    ]
    emit(figures, dict(results["pushdown"][1]))


if __name__ == "__main__":
    main()
