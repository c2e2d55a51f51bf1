"""Streaming: ``spark.readStream.format("riak-events")``: the epochs of one or more dcs
as they land, micro-batch by micro-batch, with checkpointed progress.

    q = (spark.readStream.format("riak-events").option("nodes", url).option("dc", "ams4")
         .option("lag_s", 5).load()
         .writeStream.format("parquet").option("checkpointLocation", ckpt).start(out))

Same rows as the batch source (and, with ``substream``, as the substream source). The
offset is ``{"next_epoch": E}``: every epoch before E has been handed to Spark. An epoch
**lands** with :mod:`consumer_lib.tail`'s rule, for every dc of the ``dc`` option::

    due(e)     = e + 1 + lag_s                 # the epoch ended, plus the writers' grace
    give_up(e) = due(e) + late_wait_s          # late metadata is awaited until then
    e landed  <=> now >= due(e) and (metadata of e exists in every dc or now >= give_up(e))

    latestOffset(start):  end = start
        while end < target and end landed: end += 1        # stops at the first not landed
        (capped at start + max_epochs_per_batch under the default read limit)
    partitions(start, end): EpochSlices of epochs_per_partition over [start, end)
    read(slice): the batch source's read of the slice (metadata, chunks, checksums)

Only the epochs still inside their late wait are probed (one ``multi_get`` of their
metadata per trigger); older epochs are past their wait and land unprobed (an epoch
without metadata then is empty, as in a batch read: tail's "skipped").

Committed when: Spark writes the batch's end offset to the checkpoint's offset log
before running it and marks it done in the commit log after the sink has it. A query
restarted from its checkpoint re-runs an uncommitted batch with the same offsets (so
the same epochs), then goes on from the committed end: no epoch is skipped or handed
to two batches. With ``trigger(availableNow=True)`` the target is what has landed when
the query starts (``prepareForTriggerAvailableNow``); the query stops there.

Failure scenarios:

1. **Query process killed between or during batches**: restarted from the checkpoint as
   above (exactly-once with an idempotent or transactional sink, e.g. file sinks).
2. **Writer late by less than late_wait_s**: the offset stops before the late epoch
   until its metadata appears; later epochs wait too (order is kept).
3. **Writer later than late_wait_s**: the epoch is read as it is then (empty, or the
   chunks listed so far); chunks merged into its metadata afterwards are not
   re-delivered (raise ``lag_s`` above the writers' grace window).
4. **Riak unavailable while probing**: ``latestOffset`` raises, the query fails with
   the error; restart resumes from the checkpoint.
5. **Chunk listed but missing**: the batch fails as a batch read does (ChunkMissing
   naming the key); nothing of that batch is committed.

Options on top of the batch source's (its namespace options too: the probes read the
metadata where the slices do; ``start`` is the first epoch of a new query,
default the newest due epoch; ``end``, optional, the epoch it stops before, as tail's
``until``; both in the batch source's forms: epochs, ISO-8601, ``now-5m``, a relative
one taken each time the query starts or restarts): ``lag_s`` (default 5),
``late_wait_s`` (default 30), ``max_epochs_per_batch`` (default 0: no cap).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from consumer_lib import defaults
from consumer_lib.spark.source import EpochSlice, RiakEventsReader, SourceOptions, SparkSourceError
from consumer_lib.spark.substream_source import SubstreamOptions, SubstreamSourceReader
from eventstore.names import MetadataKey, Namespaces
from eventstore.riak import RiakClient
from eventstore.riak.defaults import CONFIRMED_ABSENCE

__all__ = ["RiakEventsStreamReader", "StreamOptions", "landed_end"]

Offset = dict[str, int]

#: Epochs whose metadata one probe asks for at once (a probe stops at the first epoch
#: that has not landed).
_PROBE_EPOCHS = 32


def _seconds(options: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(options.get(name, default))
    except ValueError:
        raise SparkSourceError(f"option {name!r} must be a number of seconds") from None
    if not value >= 0 or math.isinf(value):
        raise SparkSourceError(f"option {name!r} must be >= 0 seconds: {value}")
    return value


@dataclass(frozen=True)
class StreamOptions:
    """The streaming options (see the module docstring)."""

    start: int | None
    end: int | None
    lag_s: float
    late_wait_s: float
    max_epochs_per_batch: int
    dcs: tuple[str, ...]
    nodes: tuple[str, ...]
    timeout_s: float
    epochs_per_partition: int
    namespaces: Namespaces

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> tuple[StreamOptions, dict[str, str]]:
        """The streaming options, and the batch options each slice is read with.

        Raises:
            SparkSourceError: naming the bad option.
        """
        raw_start = str(options.get("start", "")).strip()
        raw_end = str(options.get("end", "")).strip()
        # The batch parsers want a range; each slice sets its own, so any range checks
        # the other options.
        batch = {str(k): str(v) for k, v in options.items()}
        batch.update(start=raw_start or "0", end=raw_end or raw_start or "0")
        parsed = SourceOptions.parse(batch)
        # Bounds as epochs from here on: a relative one (now-5m) is read once, when the
        # query starts, not again by each slice reader.
        batch.update(start=str(parsed.start), end=str(parsed.end))
        cap = str(options.get("max_epochs_per_batch", "0")).strip()
        if not cap.isdigit():
            raise SparkSourceError(
                f"option 'max_epochs_per_batch' must be a non-negative integer: {cap!r}"
            )
        stream = cls(
            parsed.start if raw_start else None,
            parsed.end if raw_end else None,
            _seconds(options, "lag_s", defaults.TAIL_LAG_S),
            _seconds(options, "late_wait_s", defaults.TAIL_LATE_WAIT_S),
            int(cap),
            parsed.dcs,
            parsed.nodes,
            parsed.timeout_s,
            parsed.epochs_per_partition,
            parsed.namespaces,
        )
        return stream, batch


def landed_end(
    start: int,
    target: int,
    now: float,
    options: StreamOptions,
    has_metadata: Callable[[list[MetadataKey]], set[str]],
) -> int:
    """The first epoch at or after ``start`` (at most ``target``) that has not landed.

    Args:
        has_metadata: given metadata keys, the formatted ones that exist.
    """
    due_end = max(start, min(target, math.floor(now - options.lag_s)))  # e < due_end: due
    # Epochs before this one are past their late wait: they land without a probe.
    waiting_from = max(start, math.floor(now - options.lag_s - options.late_wait_s))
    for first in range(waiting_from, due_end, _PROBE_EPOCHS):
        epochs = range(first, min(first + _PROBE_EPOCHS, due_end))
        present = has_metadata([MetadataKey(e, dc) for e in epochs for dc in options.dcs])
        for epoch in epochs:
            if now < epoch + 1 + options.lag_s + options.late_wait_s and any(
                MetadataKey(epoch, dc).format() not in present for dc in options.dcs
            ):
                return epoch
    return due_end


class RiakEventsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming reader (see the module docstring).

    Args:
        options: the source's options.
        clock: wall clock, unix seconds (injected for tests).

    Raises:
        SparkSourceError: bad options.
    """

    def __init__(self, options: Mapping[str, str], clock: Callable[[], float] = time.time) -> None:
        self.stream, batch = StreamOptions.parse(options)
        self._batch = batch
        self._clock = clock
        self._target: int | None = None
        # The slice reader (validates the substream options now, on the driver).
        self._reader = self._slice_reader()

    def _slice_reader(self) -> DataSourceReader:
        if self._batch.get("substream"):
            return SubstreamSourceReader(SubstreamOptions.parse(self._batch))
        return RiakEventsReader(SourceOptions.parse(self._batch))

    def initialOffset(self) -> Offset:  # noqa: N802
        """``start``, or the newest due epoch (as :class:`consumer_lib.tail.Tail`)."""
        if self.stream.start is not None:
            return {"next_epoch": self.stream.start}
        return {"next_epoch": max(0, math.floor(self._clock() - self.stream.lag_s) - 1)}

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        """``max_epochs_per_batch`` as Spark's ReadMaxFiles (a "file" is an epoch here:
        Spark's read limits count rows, files or bytes, none of them epochs)."""
        if self.stream.max_epochs_per_batch:
            return ReadMaxFiles(self.stream.max_epochs_per_batch)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        """Fix the target: what has landed now."""
        self._target = self._landed(self.stream.start or 0, self._end())

    def _end(self) -> float:
        return math.inf if self.stream.end is None else self.stream.end

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> Offset:  # noqa: N802
        """The end of the next micro-batch: the landed epochs after ``start``."""
        first = _next_epoch(start)
        target = self._end() if self._target is None else self._target
        if isinstance(limit, ReadMaxFiles):
            target = min(target, first + limit.max_files)
        return {"next_epoch": max(first, self._landed(first, target))}

    def _landed(self, start: int, target: float) -> int:
        now = self._clock()
        bound = int(min(target, math.floor(now)))

        def has_metadata(keys: list[MetadataKey]) -> set[str]:
            ns = self.stream.namespaces
            with RiakClient(list(self.stream.nodes), timeout_s=self.stream.timeout_s) as riak:
                found = riak.multi_get(
                    ns.epochs_bucket_type,
                    ns.epochs_bucket,
                    [k.format() for k in keys],
                    **CONFIRMED_ABSENCE,
                )
            return {k for k, v in found.items() if v is not None}

        return landed_end(start, bound, now, self.stream, has_metadata)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """EpochSlices of ``epochs_per_partition`` over ``[start, end)``."""
        first, stop = _next_epoch(start), _next_epoch(end)
        per = self.stream.epochs_per_partition
        return [EpochSlice(s, min(s + per, stop)) for s in range(first, stop, per)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The slice's rows, read as the batch source reads them."""
        result = self._reader.read(partition)
        assert isinstance(result, Iterator)
        yield from result

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: offsets are epochs, Spark's checkpoint holds them."""


def _next_epoch(offset: Mapping[str, Any]) -> int:
    value = offset.get("next_epoch")
    if not isinstance(value, int) or value < 0:
        raise SparkSourceError(f"not an offset of the riak-events source: {dict(offset)!r}")
    return value
