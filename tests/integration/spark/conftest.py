"""Fixtures of the Spark data source tests: one local[2] SparkSession for the whole
run (about 10 s to start) whose Python workers run this interpreter."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

# The spark extra is part of the test setup (make test installs it): a missing pyspark,
# pyarrow or JVM is a broken setup and fails, rather than skipping the Spark tests.
try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - a broken setup
    raise RuntimeError(f"the spark extra is not installed ({exc}): run make test") from exc


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("no Java: Spark needs a JVM (make test installs default-jre-headless)")
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
