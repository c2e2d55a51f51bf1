"""Fixtures of the Spark data source tests: one local[2] SparkSession for the whole
run (about 10 s to start) whose Python workers run this interpreter."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from consumer_lib.spark.testing import TEST_CONFIG, local_session

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
    session = local_session("riak-events-tests", TEST_CONFIG)
    yield session
    session.stop()


EpochWriter = Callable[..., list[Any]]


@pytest.fixture
def epoch_writer(session_devnode: Any) -> Iterator[EpochWriter]:
    """``write(dc, start, end, seed=..., web_chunks=2)``: epochs ``[start, end)`` of one
    dc written as relocators write them (chunks first, metadata last): web:app in
    ``web_chunks`` chunks and cron: (empty subtype) in one, 1-20 events each. Returns
    the chunk keys written."""
    import random

    from eventstore.riak import RiakClient
    from eventstore.testing import write_epoch

    riak = RiakClient([session_devnode.url])

    def write(dc: str, start: int, end: int, *, seed: int = 0, web_chunks: int = 2) -> list[Any]:
        rnd = random.Random(seed)
        written = []
        groups = {("web", "app"): web_chunks, ("cron", ""): 1}
        for epoch in range(start, end):
            spec = {
                (type_, subtype): [
                    [
                        {
                            "epoch": epoch,
                            "i": i,
                            "host": f"web-{rnd.randrange(5)}",
                            "status": rnd.choice([200, 404, 503]),
                            "city": rnd.choice(["Amsterdam", "K\u00f8benhavn", "\u6771\u4eac"]),
                        }
                        for i in range(rnd.randint(1, 20))
                    ]
                    for _ in range(chunks)
                ]
                for (type_, subtype), chunks in groups.items()
            }
            written.extend(write_epoch([riak], epoch, dc, spec))
        return written

    yield write
    riak.close()
