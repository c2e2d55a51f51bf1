"""A local SparkSession for tests and benches (never used by the Spark jobs themselves).

The session runs ``local[2]`` with its UI off and logs at ERROR only; its Python workers
run this interpreter, the one :mod:`consumer_lib.spark` is installed in (executors import
it to read chunks).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["TEST_CONFIG", "local_session"]

#: The settings of the tests' session: small shuffles, a small driver.
TEST_CONFIG = {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"}


def local_session(app_name: str, config: Mapping[str, str] | None = None) -> Any:
    """Start (or get, ``getOrCreate``) the local SparkSession.

    Args:
        app_name: the application's name.
        config: further Spark settings, e.g. ``{"spark.driver.memory": "1g"}``.

    Returns:
        The ``pyspark.sql.SparkSession``.
    """
    from pyspark.sql import SparkSession  # noqa: PLC0415 (the spark extra, optional)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in {"spark.ui.enabled": "false", **(config or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
