"""Issue 21: the Spark source is registered once per session, so Spark does not warn
"data source riak-events replaced" on every load. Needs a local SparkSession (the
session of the Spark tests when they run in the same process: ``getOrCreate``)."""

from __future__ import annotations

import os
import sys
from typing import Any


def test_the_source_is_registered_once_per_session(
    session_devnode: Any, riak: Any, dc: str
) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource

    from consumer_lib.spark import load_events, register
    from consumer_lib.spark.datasource import RiakEventsDataSource

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    existing = SparkSession.getActiveSession()
    spark = existing or (  # as tests/integration/consumer_lib/spark/conftest.py builds it
        SparkSession.builder.master("local[2]")
        .appName("riak-events-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    if existing is None:
        spark.sparkContext.setLogLevel("ERROR")
    manager = spark._jsparkSession.sessionState().dataSourceManager()
    register(spark)
    assert manager.dataSourceExists(RiakEventsDataSource.name())

    class Marker(DataSource):
        """Stands where a second registration would put a new source: it must stay."""

        @classmethod
        def name(cls) -> str:
            return "riak-events"

        def schema(self) -> str:
            return "marker string"

    spark.dataSource.register(Marker)
    try:
        register(spark)  # already there: not replaced
        load_events(spark, nodes=session_devnode.url, dc=dc, start=0, end=1)
        columns = spark.read.format("riak-events").load().columns
        assert columns == ["marker"]
    finally:
        spark.dataSource.register(RiakEventsDataSource)  # as the other tests expect it
        if existing is None:
            spark.stop()  # the Spark tests build theirs
