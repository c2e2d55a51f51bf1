"""The user-facing DataFrames: the source's rows with the event as VARIANT
(:func:`load_events`), a substream's with the result as VARIANT (:func:`load_substream`)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, parse_json

from consumer_lib.errors import SparkSourceError
from consumer_lib.spark.datasource import RiakEventsDataSource
from consumer_lib.spark.pushdown import parse_pushdown

__all__ = ["load_events", "load_substream", "register"]


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("riak-events")`` available in this session, once: a
    session that has it already keeps it (registering again makes Spark warn "data
    source riak-events replaced" on every load)."""
    if not _registered(spark):
        spark.dataSource.register(RiakEventsDataSource)


def _registered(spark: SparkSession) -> bool:
    """Whether the session's data source manager knows ``riak-events`` already (False
    where it cannot be asked, e.g. Spark Connect: then it is registered again)."""
    from py4j.protocol import Py4JError  # noqa: PLC0415 (pyspark's own dependency)

    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        return bool(manager.dataSourceExists(RiakEventsDataSource.name()))
    except (AttributeError, Py4JError):
        return False


def load_events(
    spark: SparkSession,
    *,
    where: str | None = None,
    select: str | Sequence[str] | None = None,
    **options: object,
) -> DataFrame:
    """``epoch, dc, type, subtype, chunk, event``: ``event`` is the event as VARIANT,
    made on the executors straight from the stored bytes (no ``parse_json``).

    The range is split into a multiple of the session's default parallelism of Spark
    partitions (option ``parallelism``, unless given), so every core reads.

    ``where`` and ``select`` are pushed into the executors' walk of each chunk
    (:mod:`consumer_lib.spark.pushdown`): the SQL of query plugins, evaluated by the
    same plan, so events the condition drops never become rows.

        load_events(spark, ..., where="status >= 500", select=["url", '"search.city" AS city'])

    Args:
        spark: the session (the source is registered in it).
        where: a condition over the event's paths (a nested path in double quotes:
            ``"search.city" = 'Berlin'``); only the events it holds for are rows.
        select: the columns instead of ``event``: paths, ``path AS name`` or
            ``literal AS name``, as a list or one comma-separated text; each column is
            VARIANT, SQL NULL where the path is missing or null.
        options: the source's options (``nodes``, ``dc``, ``start``, ``end``, ...; see
            :mod:`consumer_lib.spark.source`); values are passed as strings.

    Returns:
        The DataFrame (lazy: nothing is read until an action runs).

    Raises:
        SparkSourceError: ``event`` other than ``variant`` (this view's contract); SQL
            in ``where`` or ``select`` outside the query plugins' subset (one line
            naming the construct), raised here, before anything is read.
    """
    if str(options.get("event", "variant")) != "variant":
        raise SparkSourceError("load_events gives the event as VARIANT: drop option 'event'")
    if select is not None and not isinstance(select, str):
        select = ", ".join(select)
    parse_pushdown(where, select)  # bad SQL fails here, on the driver, in this process
    if where is not None:
        options["where"] = where
    if select is not None:
        options["select"] = select
    register(spark)
    reader = spark.read.format(RiakEventsDataSource.name())
    options.setdefault("parallelism", spark.sparkContext.defaultParallelism)
    for name, value in options.items():
        reader = reader.option(name, str(value))
    return reader.load()


def load_substream(spark: SparkSession, **options: object) -> DataFrame:
    """The results of a substream with ``result`` as VARIANT (``parse_json`` of
    ``result_json``).

    Args:
        spark: the session (the source is registered in it).
        options: the options of :mod:`consumer_lib.spark.substream_source`
            (``substream`` required); values are passed as strings.

    Returns:
        The DataFrame (lazy: nothing is read until an action runs).

    Raises:
        SparkSourceError: bad options (when the DataFrame is created).
    """
    register(spark)
    reader = spark.read.format(RiakEventsDataSource.name())
    for name, value in options.items():
        reader = reader.option(name, str(value))
    raw = reader.load()
    return raw.select(
        *[c for c in raw.columns if c != "result_json"],
        parse_json(col("result_json")).alias("result"),
    )
