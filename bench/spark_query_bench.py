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
from typing import Any

from report import emit, figure
from spark_bench import (
    DC,
    FIRST_EPOCH,
    Measurement,
    best_of_rounds,
    machine_line,
    print_table,
    range_parser,
    start_spark,
    stored_range,
)

import sereal_codec as sereal

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
    args = range_parser(__doc__.splitlines()[0]).parse_args()

    from pyspark.sql.functions import col, parse_json

    from consumer_lib.spark import load_events

    with stored_range("spark-query-bench-", args.epochs, args.events) as data:
        json_dir, n_events = data.json_dir, data.events
        print(
            f"wrote {args.epochs} epochs, {n_events} events, "
            f"{data.stored_bytes / 1e6:.1f} MB stored "
            f"in {data.write_s:.1f}s (codec: {sereal.IMPLEMENTATION})"
        )
        print(machine_line())
        spark = start_spark(args.driver_memory)
        options = {"nodes": data.url, "dc": DC, "start": FIRST_EPOCH}
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


def report(
    results: dict[str, Measurement],
    rounds: list[dict[str, tuple[float, float]]],
    n_events: int,
    args: argparse.Namespace,
) -> None:
    title = (
        f"\n{n_events} events, {args.epochs}-epoch range, local[2], noop write, "
        f"best of {args.repeat}; WHERE {WHERE}; SELECT {', '.join(SELECT)}"
    )
    print_table(title, results, rounds, LABELS, n_events, width=26)


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
