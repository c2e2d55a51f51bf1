"""The export job: an epoch range of one dc to Parquet, hour by hour, each hour
replaced as a whole and marked complete.

Layout (Hive-style partitions, all in UTC)::

    OUT/date=2026-11-22/hour=10/dc=ams4/type=web/part-00000.parquet
    OUT/date=2026-11-22/hour=10/dc=ams4/_COMPLETE        # JSON: what was written
    OUT/_staging/, OUT/_trash/                           # the job's own, transient

Columns of the files: ``epoch`` (long), ``ts`` (the epoch's start, TIMESTAMP_MICROS,
UTC), ``subtype``, ``chunk`` (long), ``event_json`` (the event as JSON text); ``date``,
``hour``, ``dc`` and ``type`` are the directories. The event is JSON text, not VARIANT:
Spark 4 writes VARIANT as Parquet's new variant encoding, which other readers of the
data lake (pyarrow, DuckDB, Trino, Hive) read, if at all, as two opaque binary columns;
JSON text every tool reads, and Spark turns it back with ``parse_json``.

Per hour H of the range, in order (the range is widened to whole hours)::

    rows    = the batch source's rows of [H, H + 1 h) of dc, types
    write rows.coalesce(files_per_hour) partitioned by type  -> OUT/_staging/<H>-<dc>-<uuid>
    rename the part files to part-<n>.parquet (n in Spark's task order), drop Spark's
        _SUCCESS and checksum files                       # same names every run
    remove OUT/.../hour=H/dc=D/_COMPLETE                  # from here on H is not complete
    rename OUT/.../hour=H/dc=D -> OUT/_trash/...          # the previous export, if any
    rename the staging directory -> OUT/.../hour=H/dc=D
    write _COMPLETE if H has landed (now >= H + 1 h + settle_s), then empty the trash

Committed when: the hour's rows are in place at the second rename; the marker follows
it, only for an hour that has landed (an hour still being written is exported without
a marker and replaced by a later run). Readers that must not see partial hours read
the hours with a marker.

Failure scenarios:

1. **Job dies while writing an hour**: the staging directory is left under _staging
   (ignored by readers: ``_`` prefix); the previous export of the hour is intact with
   its marker. The next run of that hour replaces it.
2. **Job dies between the renames**: the hour has no marker (removed first); its
   directory is the old or the new export, or absent; the next run replaces it.
3. **Same hour exported twice**: the second replaces the first; never duplicated.
4. **A chunk listed but missing, Riak down**: the Spark job of that hour fails with the
   error naming the key; earlier hours are complete, that one is untouched.
5. **Object stores**: renames are copies there; a reader may see a half-renamed hour,
   but never with a marker.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, timestamp_seconds

from consumer_lib import defaults
from consumer_lib.spark.files import HadoopFiles
from consumer_lib.spark.source import NAMESPACE_OPTIONS, SourceOptions
from consumer_lib.spark.view import register
from eventstore.names import DEFAULT_NAMESPACES, MetadataKey, Namespaces, parse_metadata
from eventstore.riak import RiakClient
from eventstore.riak.defaults import CONFIRMED_ABSENCE

__all__ = [
    "HOUR_S",
    "HourExported",
    "chunks_per_epoch",
    "export_range",
    "hour_dir",
    "hours_of",
    "split_by_chunks",
]

HOUR_S = 3600
MARKER = "_COMPLETE"
#: An hour is finished (gets its marker) this long after its end: tail's lag plus its
#: wait for late metadata.
DEFAULT_SETTLE_S = defaults.TAIL_LAG_S + defaults.TAIL_LATE_WAIT_S
DEFAULT_FILES_PER_HOUR = 2
#: Parquet files a task keeps open at once (one per type), see export_range.
MAX_OPEN_FILES = 64


@dataclass(frozen=True)
class HourExported:
    """What one hour's export wrote."""

    hour: int
    dc: str
    events: int
    files: int
    size_bytes: int
    complete: bool
    seconds: float


def hours_of(start: int, end: int) -> list[int]:
    """The hours (their first epoch) that ``[start, end)`` touches."""
    first = start // HOUR_S * HOUR_S
    return list(range(first, math.ceil(end / HOUR_S) * HOUR_S, HOUR_S))


def hour_dir(hour: int, dc: str) -> str:
    """``date=YYYY-MM-DD/hour=HH/dc=DC`` of an hour (UTC)."""
    when = datetime.fromtimestamp(hour, tz=timezone.utc)
    return f"date={when:%Y-%m-%d}/hour={when:%H}/dc={dc}"


def export_range(
    spark: SparkSession,
    *,
    nodes: Sequence[str],
    dc: str,
    start: int,
    end: int,
    out: str,
    types: str = "",
    files_per_hour: int = DEFAULT_FILES_PER_HOUR,
    settle_s: float = DEFAULT_SETTLE_S,
    progress: Callable[[str], None] = lambda line: None,
    clock: Callable[[], float] = time.time,
    namespaces: Namespaces = DEFAULT_NAMESPACES,
) -> list[HourExported]:
    """Export the hours of ``[start, end)`` of ``dc`` (see the module docstring).

    Args:
        spark: the session.
        nodes: Riak HTTP URLs.
        dc: one dc.
        start, end: epochs; widened to whole hours.
        out: the output directory (path or URI).
        types: the source's ``types`` option (default all).
        files_per_hour: Spark tasks per hour, each writing one file per type.
        settle_s: seconds after an hour's end before it gets its marker.
        progress: receives one line per hour.
        clock: wall clock (unix seconds).
        namespaces: where the chunks and the metadata are.

    Returns:
        One record per hour, in order.

    Raises:
        SparkSourceError: bad options (naming the option).
        ValueError: ``files_per_hour`` < 1.
        Py4JJavaError: the Spark job of an hour failed (its cause names the key).
    """
    if files_per_hour < 1:
        raise ValueError(f"files_per_hour must be >= 1: {files_per_hour}")
    base = {"nodes": ",".join(nodes), "dc": dc, "types": types, "event": "json"}
    base.update({name: getattr(namespaces, name) for name in NAMESPACE_OPTIONS})
    SourceOptions.parse({**base, "start": str(start), "end": str(end)})  # check them now
    if "," in dc:
        raise ValueError(f"export writes one dc at a time: {dc!r}")
    register(spark)
    files = HadoopFiles(spark, out)
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    # One open file per type in each task instead of sorting the rows by type first
    # (Spark falls back to sorting beyond this many types in a task).
    spark.conf.set("spark.sql.maxConcurrentOutputFileWriters", str(MAX_OPEN_FILES))
    hours = hours_of(start, end)
    done = []
    for n, hour in enumerate(hours, 1):
        began = time.monotonic()
        result = _export_hour(spark, files, base, hour, dc, files_per_hour, settle_s, clock)
        result = HourExported(**{**result.__dict__, "seconds": time.monotonic() - began})
        done.append(result)
        progress(
            f"export dc={dc} hour={datetime.fromtimestamp(hour, tz=timezone.utc):%Y-%m-%dT%H} "
            f"({n}/{len(hours)}): "
            f"{result.events} events, {result.files} files, "
            f"{result.size_bytes / 1e6:.1f} MB in {result.seconds:.1f}s"
            + ("" if result.complete else "; not finished yet: no marker")
        )
    return done


def _export_hour(  # noqa: PLR0917
    spark: SparkSession,
    files: HadoopFiles,
    base: dict[str, str],
    hour: int,
    dc: str,
    files_per_hour: int,
    settle_s: float,
    clock: Callable[[], float],
) -> HourExported:
    staging = files.path("_staging", f"{hour}-{dc}-{uuid.uuid4().hex}")
    options = SourceOptions.parse({**base, "start": str(hour), "end": str(hour + HOUR_S)})
    rows: DataFrame | None = None
    for first, stop in split_by_chunks(chunks_per_epoch(options), files_per_hour):
        reader = spark.read.format("riak-events")
        bounds = {"start": str(first), "end": str(stop), "epochs_per_partition": str(stop - first)}
        for name, value in {**base, **bounds}.items():
            reader = reader.option(name, value)
        frame = reader.load()  # one Spark partition: [first, stop)
        rows = frame if rows is None else rows.union(frame)
    if rows is not None:
        ts = timestamp_seconds(col("epoch")).alias("ts")
        rows = rows.select("epoch", ts, "type", "subtype", "chunk", "event_json")
        rows.write.partitionBy("type").parquet(staging)
    target = hour_dir(hour, dc)
    events, count, size = _tidy(spark, files, staging)
    final = files.path(target)
    files.delete(f"{final}/{MARKER}")
    trash = None
    if files.exists(final):
        trash = files.path("_trash", f"{hour}-{dc}-{uuid.uuid4().hex}")
        files.mkdirs(files.path("_trash"))
        files.rename(final, trash)
    files.mkdirs(final.rsplit("/", 1)[0])
    files.rename(staging, final)
    complete = clock() >= hour + HOUR_S + settle_s
    if complete:
        marker = {
            "dc": dc,
            "hour": hour,
            "start": hour,
            "end": hour + HOUR_S,
            "events": events,
            "files": count,
            "bytes": size,
        }
        files.write_bytes(f"{final}/{MARKER}", json.dumps(marker, sort_keys=True).encode())
    if trash is not None:
        files.delete(trash)
    return HourExported(hour, dc, events, count, size, complete, 0.0)


def chunks_per_epoch(options: SourceOptions) -> dict[int, int]:
    """Chunks to read per epoch of ``[options.start, options.end)`` (every dc), from
    the metadata (one ``multi_get``); epochs without any are left out."""
    ns = options.namespaces
    keys = [MetadataKey(e, dc) for e in range(options.start, options.end) for dc in options.dcs]
    with RiakClient(list(options.nodes), timeout_s=options.timeout_s) as riak:
        found = riak.multi_get(
            ns.epochs_bucket_type, ns.epochs_bucket, [k.format() for k in keys], **CONFIRMED_ABSENCE
        )
    counts: dict[int, int] = {}
    for key in keys:
        obj = found.get(key.format())
        if obj is not None:
            n = sum(1 for r in parse_metadata(obj.value, key=key.format()) if options.wants(r))
            if n:
                counts[key.epoch] = counts.get(key.epoch, 0) + n
    return counts


def split_by_chunks(counts: dict[int, int], parts: int) -> list[tuple[int, int]]:
    """At most ``parts`` consecutive ranges ``[first, stop)`` covering the epochs of
    ``counts`` in order, cut where the running chunk count crosses ``total * i / parts``
    (so each Spark task reads about as many chunks; deterministic)."""
    if not counts:
        return []
    epochs = sorted(counts)
    total = sum(counts.values())
    ranges, first, seen, part = [], epochs[0], 0, 1
    for epoch in epochs:
        seen += counts[epoch]
        if part < parts and seen * parts >= total * part:
            ranges.append((first, epoch + 1))
            first = epoch + 1
            while part < parts and seen * parts >= total * part:
                part += 1  # one huge epoch: no empty ranges
    if first <= epochs[-1]:
        ranges.append((first, epochs[-1] + 1))
    return ranges


def _tidy(spark: SparkSession, files: HadoopFiles, staging: str) -> tuple[int, int, int]:
    """Deterministic names in a staging directory; returns (events, files, bytes)."""
    files.mkdirs(staging)  # an hour without rows still gets its (empty) directory
    count = size = 0
    for entry in files.list(staging):
        if entry.is_dir:
            parts = [e for e in files.list(entry.path) if e.name.startswith("part-")]
            for n, part in enumerate(parts):
                files.rename(part.path, f"{entry.path}/part-{n:05d}.parquet")
                size += part.size_bytes
            count += len(parts)
            for other in files.list(entry.path):
                if not other.name.startswith("part-"):
                    files.delete(other.path)
        else:
            files.delete(entry.path)  # _SUCCESS, checksum files
    events = spark.read.parquet(staging).count() if count else 0
    return events, count, size
