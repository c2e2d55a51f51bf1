"""One retry layer per result write (issue 22, item 5; companion/DESIGN.md "Result
writes"): the companion's writer makes one ``RiakClient.put`` per result and the
client's retry policy (``[riak] retry_max_tries``) is the only one. Before, the writer
tried 4 times around the client's 4 tries: up to 16 PUTs per result.

A real devnode behind a small proxy that answers the first PUTs of substream results
with a chosen status, and counts every PUT that reaches it.
"""

from __future__ import annotations

from typing import Any

from companion.settings import CompanionSettings
from companion.signals import EngineSignals
from companion.writer import ResultWriter
from devnode.testing import DevnodeProcess, StoreProxy
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient
from eventstore.riak.settings import RiakSettings
from substreams.api import Substream


class FailingProxy(StoreProxy):
    """HTTP proxy to a store: the first ``fail`` PUTs of substream results get
    ``status`` (nothing forwarded), later ones are forwarded; ``puts`` counts them all."""

    def __init__(self, upstream: str, *, fail: int, status: int = 503) -> None:
        self.fail = fail
        self.status = status
        self.puts = 0
        super().__init__(upstream)

    def refuse(self, method: str, path: str) -> int | None:
        if method == "PUT" and "/types/substreams/" in path:
            with self.lock:
                self.puts += 1
                if self.puts <= self.fail:
                    return self.status
        return None


def _ignore(events: list[Any], ctx: Any) -> None:
    return None


SUB = Substream("writer_retries", _ignore)
KEY = ChunkKey(1_700_000_000, "ams4", "web", "app", 0)
TRIES = 3  # the client's retry_max_tries: not the default 4, so the count is the config's


class Sent:
    """The writer's signals as sent: the keyword arguments of each send."""

    def __init__(self) -> None:
        self.signals = EngineSignals()
        self.stored: list[dict[str, Any]] = []
        self.not_stored: list[dict[str, Any]] = []
        self.signals.result_stored.connect(lambda **kw: self.stored.append(kw))
        self.signals.result_not_stored.connect(lambda **kw: self.not_stored.append(kw))


def _write(proxy: FailingProxy, value: bytes) -> Sent:
    """One result written through the proxy by a writer on the companion's settings."""
    settings = CompanionSettings(
        riak=RiakSettings(nodes=(proxy.url,), retry_max_tries=TRIES, retry_deadline_s=10.0)
    )
    sent = Sent()
    riak = settings.riak.client()
    writer = ResultWriter(settings, riak, sent.signals)
    try:
        writer.store_all(KEY, [(SUB, value, "ok")])
    finally:
        writer.shutdown()
        riak.close()
        proxy.close()
    return sent


def test_a_store_that_keeps_failing_gets_the_clients_tries_only(
    session_devnode: DevnodeProcess,
) -> None:
    proxy = FailingProxy(session_devnode.url, fail=1_000)
    sent = _write(proxy, b"never stored")
    assert proxy.puts == TRIES  # was TRIES * 4 (the writer's own 4 tries around them)
    assert [s["substream"] for s in sent.not_stored] == [SUB.name]
    assert "HTTP 503" in sent.not_stored[0]["error"]
    assert sent.stored == []


def test_a_store_that_recovers_within_the_clients_tries_stores_the_result(
    session_devnode: DevnodeProcess,
) -> None:
    proxy = FailingProxy(session_devnode.url, fail=TRIES - 1)
    value = b"stored on the last try"
    sent = _write(proxy, value)
    assert proxy.puts == TRIES
    assert [s["status"] for s in sent.stored] == ["ok"]
    assert sent.not_stored == []
    with RiakClient([session_devnode.url]) as riak:
        assert riak.get("substreams", SUB.name, KEY.format()).value == value


def test_an_answer_that_cannot_change_is_not_tried_again(
    session_devnode: DevnodeProcess,
) -> None:
    proxy = FailingProxy(session_devnode.url, fail=1_000, status=400)
    sent = _write(proxy, b"refused")
    assert proxy.puts == 1  # was 4: the writer tried every RiakError again
    assert "HTTP 400" in sent.not_stored[0]["error"]
