"""The batch reader of the ``riak-events`` data source (Spark 4's Python data source
API; :mod:`consumer_lib.spark.datasource` hands it out).

    spark.dataSource.register(RiakEventsDataSource)
    df = (spark.read.format("riak-events")
          .option("nodes", "http://10.0.0.1:8098,http://10.0.0.2:8098")
          .option("dc", "ams1,ams4").option("start", 1700000000).option("end", 1700000300)
          .option("types", "web,cron:daily")
          .load())

Rows: ``epoch, dc, type, subtype, chunk, event``, one per event; ``event`` is the event
as VARIANT (users query ``event:user.country::string``), made by the compiled Sereal core
straight from the stored bytes without a Python object per event
(``sereal_codec.decode_variant_packed``: Sereal straight to Variant's binary
encoding, byte for byte what ``parse_json`` makes of the event's JSON text) and handed to Spark as
Arrow batches (a struct of ``value`` and ``metadata`` binaries, the shape pyspark maps to
VARIANT). With ``event=json`` the last column is ``event_json`` instead: the compact JSON
text (``decode_json_packed``).

The range ``[start, end)`` (epochs, unix seconds; ``end`` exclusive) is cut into Spark
partitions of consecutive epochs, as even as epochs allow: as few as keep each within
``epochs_per_partition`` epochs (default 300: fat partitions, as every Spark task costs
~30 ms of CPU), rounded up to a multiple of ``parallelism`` (so that no core idles while
another reads a last partition; :func:`consumer_lib.spark.load_events` passes the
session's default parallelism). Each is read on an executor: the metadata of all its
epochs and dcs (one ``multi_get``), then its chunks, fetched and checked against their
checksum postfix on a few threads up to 32 chunks ahead of the one being transcoded
(the transcoder holds the GIL; the fetches wait on Riak meanwhile). The chunks' rows are
joined into Arrow batches of ``batch_rows``: one Arrow call per column and batch, not
per chunk. Filters are options only (``types``): no ``pushFilters``, which returns wrong
results in pyspark 4.3.0 when a DataFrame is queried again (issue 8).

Options: ``nodes`` (comma-separated Riak HTTP URLs, required), ``dc`` (comma-separated,
required), ``start`` / ``end`` (the range ``[start, end)``, required: epochs, ISO-8601
datetimes, UTC when they name no zone, or ``now`` / ``now-5m`` taken against the clock
when Spark plans the read; an ``end`` inside an epoch includes that epoch), ``types``
(comma-separated ``type`` or ``type:subtype``; default all), ``epochs_per_partition``
(most epochs per Spark partition, default 300), ``parallelism`` (default 1), ``event``
(``variant``, the default, or ``json``), ``batch_rows`` (least rows per Arrow batch,
chunks joined; default 10,000), ``binary`` (``utf8`` / ``latin1`` / ``bytes``, see
sereal_codec/DESIGN.md "JSON transcoding"), ``timeout_s`` (default 30); where the
data is (:class:`eventstore.names.Namespaces`, the ``[namespaces]`` keys of the daemons'
config files): ``events_bucket_type``, ``events_bucket`` (default ``events``),
``epochs_bucket_type``, ``epochs_bucket`` (default ``epochs``) and, for the substream
source, ``substreams_bucket_type`` (default ``substreams``); ``where`` (a condition)
and ``select`` (a select list), in the SQL of query plugins, evaluated in the walk of
each chunk (:mod:`consumer_lib.spark.pushdown`): only the matching events are rows,
and with ``select`` the rows are ``epoch, dc, type, subtype, chunk`` and the selected
columns (VARIANT) instead of the event.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType, VariantType

import sereal_codec as sereal
from consumer_lib.errors import SparkSourceError
from consumer_lib.ranges import epoch_of
from consumer_lib.spark.fetch import get_all
from consumer_lib.spark.pushdown import ChunkQuery, Pushdown, parse_pushdown, variant_column
from eventstore.blob import verify_postfix
from eventstore.errors import InvalidName
from eventstore.names import (
    DEFAULT_NAMESPACES,
    ChunkKey,
    ChunkRef,
    MetadataKey,
    Namespaces,
    parse_metadata,
)
from eventstore.riak import RiakClient

__all__ = [
    "DEFAULT_EPOCHS_PER_PARTITION",
    "FULL_STREAM_EPOCHS_PER_PARTITION",
    "JSON_SCHEMA",
    "NAMESPACE_OPTIONS",
    "SCHEMA",
    "EpochSlice",
    "RiakEventsReader",
    "SourceOptions",
    "SparkSourceError",
    "namespaces_of",
    "source_schema",
]

#: most epochs per Spark partition of the substream source and of the streaming source's
#: micro-batches
DEFAULT_EPOCHS_PER_PARTITION = 60
#: most epochs per Spark partition of the batch full-stream source, which cuts its range
#: by ``parallelism``: every Spark task costs ~30 ms of CPU (JVM and Python worker,
#: bench/README.md "spark_bench.py"), 2% of a 300-epoch partition of 1,000 events each
FULL_STREAM_EPOCHS_PER_PARTITION = 300
DEFAULT_TIMEOUT_S = 30.0
#: rows per Arrow batch handed to Spark (chunks joined; Spark's own Arrow default)
DEFAULT_BATCH_ROWS = 10_000
#: requests sent ahead of the answers on a task's connection (chunks of at most ~500 KB
#: as relocators cut them)
PIPELINE_DEPTH = 32

_KEY_FIELDS = [
    StructField("epoch", LongType(), nullable=False),
    StructField("dc", StringType(), nullable=False),
    StructField("type", StringType(), nullable=False),
    StructField("subtype", StringType(), nullable=False),
    StructField("chunk", LongType(), nullable=False),
]
#: the rows (option ``event=variant``, the default)
SCHEMA = StructType([*_KEY_FIELDS, StructField("event", VariantType(), nullable=False)])
#: the rows with option ``event=json``
JSON_SCHEMA = StructType([*_KEY_FIELDS, StructField("event_json", StringType(), nullable=False)])
_EVENT_FORMATS = {"variant": SCHEMA, "json": JSON_SCHEMA}

_INT_RE = re.compile(r"0|[1-9][0-9]*")

#: The options naming where the data is: the fields of :class:`Namespaces`, which are
#: also the ``[namespaces]`` keys of the daemons' config files.
NAMESPACE_OPTIONS = tuple(f.name for f in dataclasses.fields(Namespaces))


def namespaces_of(options: Mapping[str, str]) -> Namespaces:
    """The bucket types and buckets the options name (:data:`NAMESPACE_OPTIONS`; the
    defaults for those not given).

    Raises:
        SparkSourceError: a name outside ``[A-Za-z0-9_][A-Za-z0-9_.-]*``, naming the option.
    """
    given = {n: str(options[n]).strip() for n in NAMESPACE_OPTIONS if options.get(n) is not None}
    try:
        return Namespaces(**given)
    except InvalidName as e:
        raise SparkSourceError(f"option {e.part!r}: {e.text} {e.reason}") from None


def source_schema(options: Mapping[str, str]) -> StructType:
    """The rows' schema for these options (``event``: ``variant`` or ``json``; with
    ``select``, the key columns and each selected column as VARIANT, nullable).

    Raises:
        SparkSourceError: another ``event``; ``select`` with ``event=json``; bad
            ``where`` or ``select`` (:func:`~consumer_lib.spark.pushdown.parse_pushdown`).
    """
    event = str(options.get("event", "variant"))
    if event not in _EVENT_FORMATS:
        raise SparkSourceError(f"option 'event' must be variant or json: {event!r}")
    return rows_schema(event, pushdown_of(options))


def rows_schema(event: str, pushdown: Pushdown | None) -> StructType:
    """The rows' schema: the key columns and the event (``event``: ``variant`` or
    ``json``), or with ``select`` each selected column as VARIANT (nullable).

    Raises:
        SparkSourceError: ``select`` with ``event=json``.
    """
    if pushdown is None or not pushdown.select:
        return _EVENT_FORMATS[event]
    if event != "variant":
        raise SparkSourceError("option 'event' does not apply with 'select' (columns are VARIANT)")
    columns = [StructField(name, VariantType(), nullable=True) for name in pushdown.columns]
    return StructType([*_KEY_FIELDS, *columns])


def pushdown_of(options: Mapping[str, str]) -> Pushdown | None:
    """The ``where`` and ``select`` options' plan, or None.

    Raises:
        SparkSourceError: naming the option and the construct.
    """
    where, select = options.get("where"), options.get("select")
    return parse_pushdown(
        None if where is None else str(where), None if select is None else str(select)
    )


@dataclass(frozen=True)
class SourceOptions:
    """The parsed options (see the module docstring)."""

    nodes: tuple[str, ...]
    dcs: tuple[str, ...]
    start: int
    end: int
    types: tuple[tuple[str, str | None], ...]  # (type, subtype or None for any)
    epochs_per_partition: int
    binary: str
    timeout_s: float
    parallelism: int = 1
    event: str = "variant"
    batch_rows: int = DEFAULT_BATCH_ROWS
    namespaces: Namespaces = DEFAULT_NAMESPACES
    pushdown: Pushdown | None = None

    @classmethod
    def parse(
        cls,
        options: Mapping[str, str],
        *,
        epochs_per_partition: int = DEFAULT_EPOCHS_PER_PARTITION,
    ) -> SourceOptions:
        """The options; ``epochs_per_partition`` is the default of that option.

        Raises:
            SparkSourceError: naming the option.
        """

        def required(name: str) -> str:
            value = options.get(name)
            if value is None or not str(value).strip():
                raise SparkSourceError(f"option {name!r} is required")
            return str(value).strip()

        def integer(name: str, value: str) -> int:
            if not _INT_RE.fullmatch(value):
                raise SparkSourceError(f"option {name!r} must be a non-negative integer: {value!r}")
            return int(value)

        def bound(name: str, value: str) -> int:
            # The forms of every other range bound (consumer_lib.ranges); an end inside
            # an epoch rounds up so that epoch is read, as EventsClient does.
            try:
                return epoch_of(value, end=name == "end")
            except ValueError as e:  # InvalidArgument is one
                raise SparkSourceError(f"option {name!r}: {e}") from None

        nodes = tuple(n.strip().rstrip("/") for n in required("nodes").split(",") if n.strip())
        dcs = tuple(d.strip() for d in required("dc").split(",") if d.strip())
        for dc in dcs:
            MetadataKey(0, dc)  # validates the name (InvalidKey is a ValueError)
        start = bound("start", required("start"))
        end = bound("end", required("end"))
        if end < start:
            raise SparkSourceError(
                f"option 'end' {end} is before start {start}: ranges are [start, end)"
            )
        types: list[tuple[str, str | None]] = []
        for raw in str(options.get("types") or "").split(","):
            entry = raw.strip()
            if entry:
                kind, sep, subtype = entry.partition(":")
                ChunkRef(kind, subtype if sep else "", 0)  # validates the names
                types.append((kind, subtype if sep else None))
        per = integer(
            "epochs_per_partition", str(options.get("epochs_per_partition", epochs_per_partition))
        )
        if per < 1:
            raise SparkSourceError("option 'epochs_per_partition' must be at least 1")
        parallelism = integer("parallelism", str(options.get("parallelism", "1")))
        if parallelism < 1:
            raise SparkSourceError("option 'parallelism' must be at least 1")
        event = str(options.get("event", "variant"))
        if event not in _EVENT_FORMATS:
            raise SparkSourceError(f"option 'event' must be variant or json: {event!r}")
        pushdown = pushdown_of(options)
        rows_schema(event, pushdown)  # checks event and select together
        batch_rows = integer("batch_rows", str(options.get("batch_rows", DEFAULT_BATCH_ROWS)))
        if batch_rows < 1:
            raise SparkSourceError("option 'batch_rows' must be at least 1")
        binary = str(options.get("binary", "utf8"))
        if binary not in ("utf8", "latin1", "bytes"):
            raise SparkSourceError(f"option 'binary' must be utf8, latin1 or bytes: {binary!r}")
        try:
            timeout_s = float(options.get("timeout_s", DEFAULT_TIMEOUT_S))
        except ValueError:
            raise SparkSourceError("option 'timeout_s' must be a number") from None
        return cls(
            nodes,
            dcs,
            start,
            end,
            tuple(types),
            per,
            binary,
            timeout_s,
            parallelism,
            event,
            batch_rows,
            namespaces_of(options),
            pushdown,
        )

    def wants(self, ref: ChunkRef) -> bool:
        """Whether a chunk of this type and subtype is read."""
        if not self.types:
            return True
        return any(t == ref.type and s in (None, ref.subtype) for t, s in self.types)


class EpochSlice(InputPartition):
    """One partition: epochs ``[start, stop)`` of every dc."""

    def __init__(self, start: int, stop: int) -> None:
        super().__init__((start, stop))
        self.start = start
        self.stop = stop


class RiakEventsReader(DataSourceReader):
    """Reads the epochs of one partition on an executor."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        return [
            EpochSlice(a, b)
            for a, b in epoch_slices(o.start, o.end, o.epochs_per_partition, o.parallelism)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, EpochSlice)
        o = self.options
        schema = to_arrow_schema(rows_schema(o.event, o.pushdown), timezone="UTC")
        client = RiakClient(list(self.options.nodes), timeout_s=self.options.timeout_s)
        try:
            yield from read_slice(client, self.options, partition.start, partition.stop, schema)
        finally:
            client.close()


def epoch_slices(start: int, end: int, most: int, parallelism: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut into consecutive ``(first, stop)`` slices whose sizes differ
    by at most one epoch: as few as keep each within ``most`` epochs, rounded up to a
    multiple of ``parallelism`` (never more slices than epochs)."""
    epochs = end - start
    if epochs <= 0:
        return []
    count = -(-epochs // most)
    count = min(epochs, -(-count // parallelism) * parallelism)
    bounds = [start + epochs * i // count for i in range(count + 1)]
    return list(itertools.pairwise(bounds))


def read_slice(
    client: RiakClient, options: SourceOptions, start: int, stop: int, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of epochs ``[start, stop)``, epoch by epoch, dc by dc, chunks in
    metadata order, in Arrow batches of at least ``options.batch_rows`` rows (chunks
    joined; the last may have fewer). The slice's metadata and then its chunks are
    fetched pipelined (:func:`consumer_lib.spark.fetch.get_all`: up to
    :data:`PIPELINE_DEPTH` requests ahead, so the node answers while this transcodes),
    from one node chosen by the slice's first epoch (the Riak client behind it), in
    ``options.namespaces``.

    Raises:
        SparkSourceError: a chunk the metadata names is missing.
        eventstore errors: unreadable metadata, checksum or Sereal errors, Riak errors.
    """
    ns = options.namespaces
    # Slices spread over the nodes, each slice always on the same one.
    node = random.Random(start).choice(options.nodes)
    fetch = partial(get_all, client, node, depth=PIPELINE_DEPTH, timeout_s=options.timeout_s)
    keys = list(slice_chunks(fetch, options, start, stop, ns))
    query = None if options.pushdown is None else ChunkQuery(options.pushdown, options.binary)
    builder = BatchBuilder(schema, options.event, query)
    names = [k.format() for k in keys]
    for key, (name, value) in zip(
        keys, fetch(ns.events_bucket_type, ns.events_bucket, names), strict=True
    ):
        if value is None:
            meta_key = MetadataKey(key.epoch, key.dc)
            raise SparkSourceError(f"chunk {key} named by metadata {meta_key} is missing")
        builder.add(key, verify_postfix(value, name), options.binary)
        if builder.rows >= options.batch_rows:
            yield builder.flush()
    if builder.rows:
        yield builder.flush()


def slice_chunks(
    fetch: Callable[[str | None, str, list[str]], Iterator[tuple[str, bytes | None]]],
    options: SourceOptions,
    start: int,
    stop: int,
    ns: Namespaces,
) -> Iterator[ChunkKey]:
    """The keys of the chunks to read in epochs ``[start, stop)``, in row order, from
    the slice's metadata (``fetch``: keys -> (key, value or None), in order)."""
    meta_keys = [MetadataKey(e, dc) for e in range(start, stop) for dc in options.dcs]
    names = [k.format() for k in meta_keys]
    for meta_key, (name, value) in zip(
        meta_keys, fetch(ns.epochs_bucket_type, ns.epochs_bucket, names), strict=True
    ):
        if value is None:
            continue  # nothing stored for this epoch and dc
        for ref in parse_metadata(value, key=name):
            if options.wants(ref):
                yield meta_key.chunk_key(ref)


class BatchBuilder:
    """Chunks' rows joined into one Arrow batch without Python objects per event: the
    events as the codec packs them (Variant or JSON text), the key columns as runs (one
    per chunk) decoded once per batch. With a pushdown (``query``): only the events its
    WHERE keeps, and with ``select`` their selected columns instead of the event
    (:mod:`consumer_lib.spark.pushdown`)."""

    def __init__(
        self, schema: pa.Schema, event: str = "variant", query: ChunkQuery | None = None
    ) -> None:
        self.schema = schema
        self.event = event
        self.query = query
        self.rows = 0
        self._run_ends: list[int] = []
        self._keys: list[ChunkKey] = []
        self._events: list[list[pa.Array]] = []  # per chunk: its event column(s)
        self._selected: list[list[Any]] = []  # with select: each column's values
        self._binary = "utf8"

    def add(self, key: ChunkKey, document: memoryview, binary: str) -> None:
        """Append the rows of one chunk's verified Sereal ``document``."""
        if self.query is not None and self.query.pushdown.select:
            self._add_selected(key, self.query.rows(document), binary)
            return
        keep = None if self.query is None else self.query.matching(document)
        if keep is not None and not keep:
            return  # nothing to transcode
        if self.event == "variant":
            values, value_offsets, metadata, metadata_offsets = sereal.decode_variant_packed(
                document, binary=binary
            )
            n = len(value_offsets) // 4 - 1
            # Two binary columns as the codec packed them (int32 offsets, no copy).
            arrays = [
                pa.Array.from_buffers(
                    pa.binary(), n, [None, pa.py_buffer(value_offsets), pa.py_buffer(values)]
                ),
                pa.Array.from_buffers(
                    pa.binary(), n, [None, pa.py_buffer(metadata_offsets), pa.py_buffer(metadata)]
                ),
            ]
        else:
            text, offsets = sereal.decode_json_packed(document, binary=binary)
            n = len(offsets) // 8 - 1
            # The packed texts are an Arrow large_string column as they are (no copy).
            arrays = [
                pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text))
            ]
        if keep is not None and len(keep) < n:
            taken = pa.array(keep, pa.int32())
            arrays, n = [a.take(taken) for a in arrays], len(keep)
        self._note(key, n)
        self._events.append(arrays)

    def _add_selected(self, key: ChunkKey, rows: list[dict[str, Any]], binary: str) -> None:
        if not rows:
            return
        assert self.query is not None
        columns = self.query.pushdown.columns
        if not self._selected:
            self._selected = [[] for _ in columns]
        for name, values in zip(columns, self._selected, strict=True):
            values.extend([row[name] for row in rows])
        self._binary = binary
        self._note(key, len(rows))

    def _note(self, key: ChunkKey, n: int) -> None:
        if n == 0:
            return
        self.rows += n
        self._run_ends.append(self.rows)
        self._keys.append(key)

    def flush(self) -> pa.RecordBatch:
        """The batch of every chunk added since the last flush (at least one row)."""
        keys, run_ends = self._keys, pa.array(self._run_ends, pa.int32())

        def runs(values: list[Any], type_: pa.DataType) -> pa.Array:
            # Array.from_buffers, not RunEndEncodedArray.from_arrays: pyarrow 26's
            # from_arrays tries to import dateutil on every call, and a failed import
            # scans sys.path again each time (~0.1 ms, 5 calls per batch).
            encoded = pa.Array.from_buffers(
                pa.run_end_encoded(pa.int32(), type_),
                self.rows,
                [None],
                children=[run_ends, pa.array(values, type_)],
            )
            return pc.run_end_decode(encoded)

        def joined(i: int) -> pa.Array:
            parts = [arrays[i] for arrays in self._events]
            return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)

        events: list[pa.Array]
        if self._selected:
            # One VARIANT column per selected column, in the schema's order.
            events = [
                variant_column(values, self._binary, self.schema.field(5 + i).type)
                for i, values in enumerate(self._selected)
            ]
        elif self.event == "variant":
            # The struct pyspark maps to VARIANT (its fields carry the schema's annotations).
            events = [
                pa.StructArray.from_arrays(
                    [joined(0), joined(1)], fields=list(self.schema.field(5).type)
                )
            ]
        else:
            # Spark wants string (32-bit offsets): a cast of the offsets only (a batch of
            # chunks is far below 2 GiB).
            events = [joined(0).cast(pa.string())]
        columns = [
            runs([k.epoch for k in keys], pa.int64()),
            runs([k.dc for k in keys], pa.string()),
            runs([k.type for k in keys], pa.string()),
            runs([k.subtype for k in keys], pa.string()),
            runs([k.chunk for k in keys], pa.int64()),
            *events,
        ]
        self.rows, self._run_ends, self._keys, self._events = 0, [], [], []
        self._selected = []
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)
