"""The user-facing DataFrame: the source's rows with the event as VARIANT."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, parse_json

from consumer_lib.spark.source import RiakEventsDataSource

__all__ = ["load_events", "register"]


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("riak-events")`` available in this session."""
    spark.dataSource.register(RiakEventsDataSource)


def load_events(spark: SparkSession, **options: object) -> DataFrame:
    """``epoch, dc, type, subtype, chunk, event``: ``event`` is the event as VARIANT,
    parsed from the source's JSON text by ``parse_json`` in the JVM.

    Args:
        spark: the session (the source is registered in it).
        options: the source's options (``nodes``, ``dc``, ``start``, ``end``, ...; see
            :mod:`consumer_lib.spark.source`); values are passed as strings.

    Returns:
        The DataFrame (lazy: nothing is read until an action runs).
    """
    register(spark)
    reader = spark.read.format(RiakEventsDataSource.name())
    for name, value in options.items():
        reader = reader.option(name, str(value))
    raw = reader.load()
    return raw.select(
        "epoch", "dc", "type", "subtype", "chunk", parse_json(col("event_json")).alias("event")
    )
