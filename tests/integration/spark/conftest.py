"""Fixtures of the Spark data source tests: one local[2] SparkSession for the whole
run (about 10 s to start) whose Python workers run this interpreter."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the spark extra (pyspark, pyarrow) is not installed")
pytest.importorskip("pyarrow", reason="the spark extra (pyspark, pyarrow) is not installed")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java: Spark needs a JVM")
    from pyspark.sql import SparkSession

    # Executors import consumer_lib.spark: they must run the interpreter it is in.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("riak-events-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
