"""The Spark source's pipelined GETs (consumer_lib.spark.fetch): against a devnode every
answer comes back in order, a missing key as None; against real HTTP servers that
misbehave (close keep-alive connections, answer 503 or 300, refuse connections) no
answer is lost, repeated or reordered: the pipeline reopens while it makes progress,
then the rest goes through the Riak client with its errors."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

import pytest

from consumer_lib.spark.fetch import PipelineBroken, get_all, pipelined_get
from devnode.testing import DevnodeProcess, free_port
from eventstore.riak import RiakClient
from eventstore.riak.errors import RiakError
from eventstore.riak.retry import Retry

BUCKET_TYPE, BUCKET = "events", "events"


def test_answers_in_order_and_missing_keys_as_none(session_devnode: DevnodeProcess) -> None:
    """More keys than the pipeline's depth, some missing, keys that need escaping."""
    riak = RiakClient([session_devnode.url])
    try:
        keys = [f"fetch-test:{i}:a b/%:{'x' * (i % 5)}" for i in range(40)]
        for i, key in enumerate(keys):
            if i % 7 != 3:
                riak.put(BUCKET_TYPE, BUCKET, key, bytes([i]) * (1000 * i + 1))
        got = list(pipelined_get(session_devnode.url, BUCKET_TYPE, BUCKET, keys, depth=4))
        want = [
            (k, None if i % 7 == 3 else bytes([i]) * (1000 * i + 1)) for i, k in enumerate(keys)
        ]
        assert got == want
        assert list(get_all(riak, session_devnode.url, BUCKET_TYPE, BUCKET, keys, depth=4)) == want
    finally:
        riak.close()


Answer = Callable[
    [int, str], tuple[int, bytes, bool]
]  # (request number, key) -> status, body, close


@pytest.fixture
def http_node() -> Iterator[Callable[[Answer], str]]:
    """``start(answer)``: a real HTTP/1.1 server (http.server in threads) answering
    ``GET /types/T/buckets/B/keys/K`` by ``answer(n, key)`` (``n``: requests answered
    before on the same connection); returns its URL."""
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Answer) -> str:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            served = 0  # requests answered on this connection

            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                # Every GET asks for a quorum's "not found" (CONFIRMED_ABSENCE), pipelined or not.
                assert query == "notfound_ok=false&basic_quorum=true", self.path
                status, body, close = answer(self.served, unquote(path.rsplit("/", 1)[1]))
                self.served += 1
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                if close:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


KEYS = [f"k{i}" for i in range(20)]


def value(key: str) -> bytes:
    return key.encode() * 3


def dead_client() -> RiakClient:
    """A client whose every request fails (nothing listens): using it fails a test."""
    return RiakClient([f"http://127.0.0.1:{free_port()}"], retry=Retry(max_tries=1))


def get_all_without_client(url: str, depth: int) -> list[tuple[str, bytes | None]]:
    """``get_all`` of KEYS from ``url`` with a :func:`dead_client` to fall back on."""
    client = dead_client()
    try:
        return list(get_all(client, url, BUCKET_TYPE, BUCKET, KEYS, depth=depth))
    finally:
        client.close()


def test_a_server_closing_connections_is_reopened(http_node: Any) -> None:
    """Every third answer closes the connection (requests sent after it are lost): the
    pipeline reopens from the first unanswered key; the client is never needed."""
    url = http_node(lambda n, key: (200, value(key), n % 3 == 2))
    assert get_all_without_client(url, depth=8) == [(k, value(k)) for k in KEYS]
    handed: list[tuple[str, bytes | None]] = []
    with pytest.raises(PipelineBroken, match=url) as broken:
        handed.extend(pipelined_get(url, BUCKET_TYPE, BUCKET, KEYS, depth=8))
    # The three answers before the close, unless a reset lost some of them.
    assert broken.value.answered in range(1, 4)
    assert handed == [(k, value(k)) for k in KEYS[: broken.value.answered]]


def test_a_503_is_fetched_again_on_a_reopened_pipeline(http_node: Any) -> None:
    """k5 answers 503 once: the pipeline reopens from k5 and gets everything; the client
    (which would fail) is never needed."""
    tries: list[str] = []

    def answer(n: int, key: str) -> tuple[int, bytes, bool]:
        tries.append(key)
        if key == "k5" and tries.count("k5") == 1:
            return 503, b"busy", False
        return 200, value(key), False

    url = http_node(answer)
    assert get_all_without_client(url, depth=4) == [(k, value(k)) for k in KEYS]
    assert tries.count("k5") == 2


def test_siblings_go_to_the_client_after_every_earlier_key(http_node: Any) -> None:
    """k12 always answers 300 (as Riak does for siblings): the pipeline stops there,
    reopened it stops again before answering anything, and the client raises for k12,
    after every earlier key was handed out once, in order."""

    def answer(n: int, key: str) -> tuple[int, bytes, bool]:
        if key == "k12":
            return 300, b"Siblings:\nabc\n", False
        return 200, value(key), False

    url = http_node(answer)
    client = RiakClient([url], retry=Retry(max_tries=1))
    got: list[tuple[str, bytes | None]] = []
    try:
        with pytest.raises(RiakError):
            got.extend(get_all(client, url, BUCKET_TYPE, BUCKET, KEYS, depth=4))
    finally:
        client.close()
    assert got == [(k, value(k)) for k in KEYS[:12]]


def test_a_node_refusing_connections_leaves_everything_to_the_client(
    session_devnode: DevnodeProcess,
) -> None:
    riak = RiakClient([session_devnode.url])
    try:
        for key in KEYS[:10]:
            riak.put(BUCKET_TYPE, BUCKET, f"fetch-refused-{key}", value(key))
        keys = [f"fetch-refused-{k}" for k in KEYS]
        dead = f"http://127.0.0.1:{free_port()}"
        got = list(get_all(riak, dead, BUCKET_TYPE, BUCKET, keys, depth=4))
    finally:
        riak.close()
    assert got == [(f"fetch-refused-{k}", value(k) if i < 10 else None) for i, k in enumerate(KEYS)]
