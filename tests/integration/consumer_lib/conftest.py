"""Fixtures of the consumer library's integration tests: a real devnode and clients."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from consumer_lib import EventsClient
from devnode.testing import DevnodeProcess
from eventstore.riak import RiakClient


@pytest.fixture
def riak(session_devnode: DevnodeProcess) -> Iterator[RiakClient]:
    client = RiakClient([session_devnode.url])
    yield client
    client.close()


@pytest.fixture
def client(session_devnode: DevnodeProcess) -> Iterator[EventsClient]:
    with EventsClient([session_devnode.url], concurrency=4, prefetch=4) as c:
        yield c
