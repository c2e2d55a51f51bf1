"""``.option("substream", NAME)``: a substream's results for an epoch range, as rows.

    df = (spark.read.format("riak-events").option("nodes", url).option("dc", "ams4")
          .option("start", 1700000000).option("end", 1700000300)
          .option("substream", "web_5xx").load())
    load_substream(spark, substream="web_5xx", nodes=url, dc="ams4", start=..., end=...)  # view.py

One row per chunk the substream reads (its declared types/subtypes, and the ``types``
option), resolved exactly as :meth:`consumer_lib.EventsClient.substream` resolves it:
the stored result when it is ``ok`` and of the local plugin's version, else the chunk is
read and the same plugin runs on the executor (``fallback``) in the companion's sandbox
(:mod:`consumer_lib.fallback`: a forked child with the plugin's declared limits, so a
slow or greedy plugin costs the task at most its deadline and memory limit, never the
executor; a query plugin is evaluated natively in the task instead, one walk of the
stored chunk, no fork: ``consumer_lib.fallback.run_native``), and the row says how it
was served. Schema (:data:`SUBSTREAM_SCHEMA`):

=============  ==========  =======================================================
column         type        meaning
=============  ==========  =======================================================
epoch, dc,     long,       the chunk the result was computed from
type, subtype, string,
chunk          long
served         string      ``server``, ``fallback`` or ``gap``
reason         string      why not ``server`` (``missing``, ``shed``, ``timeout``,
                           ``error``, ``killed``, ``version_mismatch``,
                           ``unreadable``, ``disabled``, ``forced``); null when
                           served
version        string      the plugin version that computed it
error          string      for a gap: the server's error (``disabled: ...`` for a
                           plugin the server disabled: not run here), or why the
                           fallback failed: ``fallback <status>: <kind>: ...``
                           (status ``timeout``, ``killed`` or ``error``)
result_json    string      the result as JSON text (null for a gap); byte strings
                           become text (UTF-8, invalid bytes replaced)
=============  ==========  =======================================================

:func:`consumer_lib.spark.view.load_substream` adds ``result`` as VARIANT
(``parse_json``). Options on top of the batch source's (``nodes``, ``dc``, ``start``,
``end``, ``types``, ``epochs_per_partition``, ``timeout_s``, the namespace options:
``substreams_bucket_type`` is where the results are read): ``substream`` (the name),
``fallback`` (``auto`` default, ``off``, ``always``), ``plugin_dirs`` (comma-separated
directories holding the plugin, as the companions' ``plugin_dirs``; they must exist on
every executor), ``entry_points`` (``true``: also installed ``riak_events.substreams``
plugins), ``accept_other_versions`` (``false``). The full stream's ``where`` and ``select`` are
refused here (filter the rows in Spark).

Failure semantics: those of :mod:`consumer_lib.substream`: a plugin failing in the
fallback (an exception, its deadline, its memory limit, a crash) gives a ``gap`` row
naming the failure within its deadline plus the kill grace; a chunk that cannot be read
fails the Spark task (and so the query) with a ConsumerError naming its key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from consumer_lib import defaults
from consumer_lib.forkserver import fallback_server
from consumer_lib.plugins import PluginCatalog
from consumer_lib.ranges import EpochRange
from consumer_lib.spark.source import EpochSlice, SourceOptions, SparkSourceError
from consumer_lib.store import Store
from consumer_lib.substream import FallbackMode, SubstreamReader, load_plugin, results
from consumer_lib.types import ChunkFilter, SubstreamResult
from eventstore.errors import InvalidName
from eventstore.names import ChunkRef, check_bucket_name

__all__ = [
    "SUBSTREAM_SCHEMA",
    "SubstreamOptions",
    "SubstreamSourceReader",
    "result_json",
]

SUBSTREAM_SCHEMA = StructType(
    [
        StructField("epoch", LongType(), nullable=False),
        StructField("dc", StringType(), nullable=False),
        StructField("type", StringType(), nullable=False),
        StructField("subtype", StringType(), nullable=False),
        StructField("chunk", LongType(), nullable=False),
        StructField("served", StringType(), nullable=False),
        StructField("reason", StringType(), nullable=True),
        StructField("version", StringType(), nullable=False),
        StructField("error", StringType(), nullable=True),
        StructField("result_json", StringType(), nullable=True),
    ]
)

#: Results resolved per Arrow batch (a batch is also cut at the end of a partition).
_BATCH_ROWS = 512


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = str(options.get(name, "true" if default else "false")).strip().lower()
    if raw not in ("true", "false"):
        raise SparkSourceError(f"option {name!r} must be true or false: {raw!r}")
    return raw == "true"


@dataclass(frozen=True)
class SubstreamOptions:
    """The batch source's options plus the substream's (see the module docstring)."""

    source: SourceOptions
    name: str
    fallback: FallbackMode
    plugin_dirs: tuple[str, ...]
    entry_points: bool
    accept_other_versions: bool

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SubstreamOptions:
        """Raises: SparkSourceError naming the option."""
        source = SourceOptions.parse(options)
        if source.pushdown is not None:
            raise SparkSourceError(
                "options 'where' and 'select' read the full stream, not a substream: "
                "filter the substream's rows in Spark"
            )
        name = str(options.get("substream", "")).strip()
        try:
            check_bucket_name(name, "substream")
        except InvalidName as e:
            raise SparkSourceError(f"option 'substream' is not a valid name: {e}") from e
        fallback = str(options.get("fallback", "auto")).strip()
        if fallback not in ("auto", "off", "always"):
            raise SparkSourceError(f"option 'fallback' must be auto, off or always: {fallback!r}")
        dirs = tuple(d.strip() for d in str(options.get("plugin_dirs", "")).split(",") if d.strip())
        return cls(
            source,
            name,
            fallback,  # type: ignore[arg-type]  # checked above
            dirs,
            _flag(options, "entry_points", True),
            _flag(options, "accept_other_versions", False),
        )


class _Wanted(ChunkFilter):
    """The source's ``types`` option (exact ``type`` / ``type:subtype``) as a filter."""

    _options: SourceOptions

    def __init__(self, options: SourceOptions) -> None:
        super().__init__()
        object.__setattr__(self, "_options", options)  # a frozen dataclass underneath

    def keeps(self, type_: str, subtype: str) -> bool:
        return self._options.wants(ChunkRef(type_, subtype, 0))


def result_json(value: Any) -> str:
    """A result as compact JSON text; byte strings as UTF-8 text (bad bytes replaced).

    Raises:
        ValueError: a value JSON cannot hold (NaN or infinity, a cycle).
    """

    def other(obj: Any) -> Any:
        if isinstance(obj, (bytes, bytearray)):
            return bytes(obj).decode("utf-8", "replace")
        if isinstance(obj, (set, frozenset, tuple)):
            return list(obj)
        raise TypeError(f"{type(obj).__name__} is not JSON serializable")

    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), default=other, allow_nan=False
    )


class SubstreamSourceReader(DataSourceReader):
    """Resolves the results of one partition's epochs on an executor."""

    def __init__(self, options: SubstreamOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options.source
        return [
            EpochSlice(s, min(s + o.epochs_per_partition, o.end))
            for s in range(o.start, o.end, o.epochs_per_partition)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, EpochSlice)
        yield from read_results(self.options, partition.start, partition.stop)


def read_results(options: SubstreamOptions, start: int, stop: int) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the results of epochs ``[start, stop)``, dc by dc, in order.

    Raises:
        PluginNotFound: fallback is on and no source declares the substream.
        ChunkMissing, ChunkCorrupt, StoreUnavailable: as consumer_lib's substream read.
    """
    o = options.source
    schema = to_arrow_schema(SUBSTREAM_SCHEMA, timezone="UTC")
    store = Store(o.nodes, namespaces=o.namespaces, timeout_s=o.timeout_s)
    catalog = PluginCatalog(
        [Path(d) for d in options.plugin_dirs], use_entry_points=options.entry_points
    )
    executor = ThreadPoolExecutor(defaults.CONCURRENCY, thread_name_prefix="spark-substream")
    # The task's fallbacks fork from it, not from the executor's Python worker; it ends
    # with the task (finally below), or with the worker if the worker dies.
    server = fallback_server(max_connections=defaults.CONCURRENCY)
    try:
        plugin = load_plugin(catalog, options.name, options.fallback)
        reader = SubstreamReader(
            store,
            options.name,
            plugin,
            fallback=options.fallback,
            accept_other_versions=options.accept_other_versions,
            server=server,
        )
        keep = _Wanted(o)
        for dc in o.dcs:
            found = results(
                store,
                executor,
                reader,
                dc=dc,
                epoch_range=EpochRange(start, stop),
                keep=keep,
                prefetch_chunks=defaults.PREFETCH_CHUNKS,
                metadata_depth=defaults.METADATA_DEPTH,
            )
            rows: list[SubstreamResult] = []
            for result in found:
                rows.append(result)
                if len(rows) >= _BATCH_ROWS:
                    yield _batch(rows, schema)
                    rows = []
            if rows:
                yield _batch(rows, schema)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        server.close()
        store.close()
        catalog.close()


def _batch(rows: list[SubstreamResult], schema: pa.Schema) -> pa.RecordBatch:
    columns = [
        [r.epoch for r in rows],
        [r.dc for r in rows],
        [r.type for r in rows],
        [r.subtype for r in rows],
        [r.chunk for r in rows],
        [r.served for r in rows],
        [r.reason for r in rows],
        [r.version for r in rows],
        [r.error for r in rows],
        [None if r.served == "gap" else result_json(r.result) for r in rows],
    ]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )
