"""Spark: epoch ranges of the event store as DataFrames (issue 8).

    from consumer_lib.spark import load_events
    df = load_events(spark, nodes="http://127.0.0.1:8098", dc="ams1",
                     start=1700000000, end=1700000300)
    df.selectExpr("event:user.country::string").show()
    load_substream(spark, substream="web_5xx", nodes=..., dc=..., start=..., end=...)
    spark.readStream.format("riak-events").option(...)...     # stream.py
    riak-events spark export / backfill                       # export.py, backfill.py

Needs the ``spark`` extra (pyspark 4.3, pyarrow). Executors must import this package:
run Spark's Python workers with the interpreter it is installed in (``PYSPARK_PYTHON``).
"""

from __future__ import annotations

from consumer_lib.errors import SparkSourceError
from consumer_lib.spark.datasource import RiakEventsDataSource
from consumer_lib.spark.source import SCHEMA, RiakEventsReader, SourceOptions
from consumer_lib.spark.stream import RiakEventsStreamReader
from consumer_lib.spark.substream_source import SUBSTREAM_SCHEMA
from consumer_lib.spark.view import load_events, load_substream, register

__all__ = [
    "SCHEMA",
    "SUBSTREAM_SCHEMA",
    "RiakEventsDataSource",
    "RiakEventsReader",
    "RiakEventsStreamReader",
    "SourceOptions",
    "SparkSourceError",
    "load_events",
    "load_substream",
    "register",
]
