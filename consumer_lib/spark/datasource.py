"""``spark.read.format("riak-events")`` / ``spark.readStream.format("riak-events")``: the
one Spark data source, handing out the reader its options ask for.

    spark.dataSource.register(RiakEventsDataSource)     # consumer_lib.spark.register

=====================  =========================================================
options                reader
=====================  =========================================================
(batch)                :class:`~consumer_lib.spark.source.RiakEventsReader`
``substream=NAME``     :class:`~consumer_lib.spark.substream_source.SubstreamSourceReader`
(streaming)            :class:`~consumer_lib.spark.stream.RiakEventsStreamReader`
=====================  =========================================================

It sits above the three readers (each imports only what is below it), so none of them
imports it back.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from consumer_lib.spark.source import (
    FULL_STREAM_EPOCHS_PER_PARTITION,
    RiakEventsReader,
    SourceOptions,
    source_schema,
)
from consumer_lib.spark.stream import RiakEventsStreamReader
from consumer_lib.spark.substream_source import (
    SUBSTREAM_SCHEMA,
    SubstreamOptions,
    SubstreamSourceReader,
)

__all__ = ["RiakEventsDataSource"]


class RiakEventsDataSource(DataSource):
    """``spark.read.format("riak-events")``: the options of
    :mod:`consumer_lib.spark.source`, plus those of
    :mod:`consumer_lib.spark.substream_source` with ``substream``, and of
    :mod:`consumer_lib.spark.stream` when read as a stream."""

    @classmethod
    def name(cls) -> str:
        return "riak-events"

    def schema(self) -> StructType:
        if self.options.get("substream"):
            return SUBSTREAM_SCHEMA
        return source_schema(self.options)

    def reader(self, schema: StructType) -> DataSourceReader:
        """The full stream's reader, or a substream's with the ``substream`` option.

        Raises:
            SparkSourceError: bad options.
        """
        if self.options.get("substream"):
            return SubstreamSourceReader(SubstreamOptions.parse(self.options))
        return RiakEventsReader(
            SourceOptions.parse(self.options, epochs_per_partition=FULL_STREAM_EPOCHS_PER_PARTITION)
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        """The streaming reader (:mod:`consumer_lib.spark.stream`).

        Raises:
            SparkSourceError: bad options.
        """
        return RiakEventsStreamReader(self.options)
