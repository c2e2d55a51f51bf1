"""Issue 21: the Spark source is registered once per session, so Spark does not warn
"data source riak-events replaced" on every load. Needs a local SparkSession (the
session of the Spark tests when they run in the same process: ``getOrCreate``)."""

from __future__ import annotations

from typing import Any


def test_the_source_is_registered_once_per_session(
    session_devnode: Any, riak: Any, dc: str
) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource

    from consumer_lib.spark import load_events, register
    from consumer_lib.spark.datasource import RiakEventsDataSource
    from consumer_lib.spark.testing import TEST_CONFIG, local_session

    existing = SparkSession.getActiveSession()  # the Spark tests' session, if they ran
    spark = existing or local_session("riak-events-tests", TEST_CONFIG)
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
