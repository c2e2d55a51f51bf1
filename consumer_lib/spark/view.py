"""The user-facing DataFrame: the source's rows with the event as VARIANT."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from consumer_lib.spark.source import RiakEventsDataSource, SparkSourceError

__all__ = ["load_events", "register"]


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("riak-events")`` available in this session."""
    spark.dataSource.register(RiakEventsDataSource)


def load_events(spark: SparkSession, **options: object) -> DataFrame:
    """``epoch, dc, type, subtype, chunk, event``: ``event`` is the event as VARIANT,
    made on the executors straight from the stored bytes (no ``parse_json``).

    The range is split into a multiple of the session's default parallelism of Spark
    partitions (option ``parallelism``, unless given), so every core reads.

    Args:
        spark: the session (the source is registered in it).
        options: the source's options (``nodes``, ``dc``, ``start``, ``end``, ...; see
            :mod:`consumer_lib.spark.source`); values are passed as strings.

    Returns:
        The DataFrame (lazy: nothing is read until an action runs).

    Raises:
        SparkSourceError: ``event`` other than ``variant`` (this view's contract).
    """
    if str(options.get("event", "variant")) != "variant":
        raise SparkSourceError("load_events gives the event as VARIANT: drop option 'event'")
    register(spark)
    reader = spark.read.format(RiakEventsDataSource.name())
    options.setdefault("parallelism", spark.sparkContext.defaultParallelism)
    for name, value in options.items():
        reader = reader.option(name, str(value))
    return reader.load()
