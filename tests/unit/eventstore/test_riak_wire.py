"""The Riak client's HTTP/1.1 wire (``eventstore/riak/wire.py``): the bytes of a request,
and answers read back as ``http.client`` read them, whatever pieces they arrive in.

The answers come from :class:`Feed`, a stand-in for the connected socket that hands
out given bytes in pieces of a given size (no socket: the lane's rule), and are parsed
by ``httptools`` (llhttp) as in production. The same client against a real server:
``tests/contract/test_store_contract.py``.
"""

from __future__ import annotations

import http.client

import pytest

from eventstore.riak.wire import Connection, host_header, request_head


class Feed:
    """What a connected socket gives ``Connection``: ``data`` in pieces of ``piece``
    bytes, then the end of the stream; what was sent is kept in ``sent``."""

    def __init__(self, data: bytes, piece: int = 1 << 20) -> None:
        self.data, self.piece, self.sent = data, piece, bytearray()
        self.timeouts: list[float] = []

    def settimeout(self, timeout_s: float) -> None:
        self.timeouts.append(timeout_s)

    def sendall(self, data: bytes) -> None:
        self.sent += data

    def sendmsg(self, buffers: list[bytes]) -> int:
        first = buffers[0][:100]  # a short write: the rest must follow
        self.sent += first
        return len(first)

    def recv_into(self, view: memoryview) -> int:
        n = min(len(view), self.piece, len(self.data))
        view[:n] = self.data[:n]
        self.data = self.data[n:]
        return n

    def close(self) -> None:
        pass


def answer(feed: Feed, method: str = "GET") -> tuple[int, dict[str, str], bytes, bool]:
    connection = Connection(feed)  # type: ignore[arg-type]
    return connection.exchange(b"GET / HTTP/1.1\r\n\r\n", None, method, 5.0)


RIAK_204 = (
    b"HTTP/1.1 204 No Content\r\nVary: Accept-Encoding\r\n"
    b"Server: MochiWeb/1.1 WebMachine/1.11.1 (greased slide to failure)\r\n"
    b"Date: Sat, 28 Nov 2026 12:00:00 GMT\r\nContent-Type: application/octet-stream\r\n"
    b"Content-Length: 0\r\n\r\n"
)


def test_a_put_is_one_head_with_host_length_and_the_given_headers() -> None:
    head = request_head(
        "PUT",
        "/types/substreams/buckets/web_5xx/keys/1%3Adc1",
        host_header("127.0.0.1", 8098),
        {"User-Agent": "riak-events", "Content-Type": "application/octet-stream",
         "X-Riak-Vclock": "a85hYGBgzGDKBVI="},
        1200,
    )  # fmt: skip
    assert head == (
        b"PUT /types/substreams/buckets/web_5xx/keys/1%3Adc1 HTTP/1.1\r\n"
        b"Host: 127.0.0.1:8098\r\nAccept-Encoding: identity\r\nContent-Length: 1200\r\n"
        b"User-Agent: riak-events\r\nContent-Type: application/octet-stream\r\n"
        b"X-Riak-Vclock: a85hYGBgzGDKBVI=\r\n\r\n"
    )


def test_content_length_is_zero_on_a_put_without_body_and_absent_on_a_get() -> None:
    assert b"Content-Length: 0\r\n" in request_head("PUT", "/p", "h", {}, None)
    assert b"Content-Length" not in request_head("GET", "/p", "h", {}, None)
    assert b"Content-Length" not in request_head("DELETE", "/p", "h", {}, None)


def test_the_host_header_is_http_clients() -> None:
    assert host_header("riak1", 80) == "riak1"
    assert host_header("riak1", 8098) == "riak1:8098"
    assert host_header("::1", 8098) == "[::1]:8098"


@pytest.mark.parametrize(
    ("target", "headers", "error"),
    [
        ("/keys/a b", {}, http.client.InvalidURL),
        ("/keys/a\r\nX: 1", {}, http.client.InvalidURL),
        ("/keys/é", {}, UnicodeEncodeError),
        ("/keys/a", {"X-Riak-Meta-a": "v\r\nInjected: 1"}, ValueError),
        ("/keys/a", {"Bad Name": "v"}, ValueError),
        ("/keys/a", {"": "v"}, ValueError),
    ],
)
def test_a_request_that_cannot_be_sent_as_given_is_refused(
    target: str, headers: dict[str, str], error: type[Exception]
) -> None:
    with pytest.raises(error):
        request_head("PUT", target, "h", headers, 1)


@pytest.mark.parametrize("piece", [1, 7, 1 << 20])
def test_riaks_204_is_read_whatever_pieces_it_arrives_in(piece: int) -> None:
    status, headers, body, close = answer(Feed(RIAK_204, piece))
    assert (status, body, close) == (204, b"", False)
    assert headers["content-type"] == "application/octet-stream"
    assert headers["server"].startswith("MochiWeb")


@pytest.mark.parametrize("piece", [1, 5, 1 << 20])
def test_a_body_by_content_length_a_chunked_one_and_one_to_the_end(piece: int) -> None:
    value = bytes(range(256)) * 3 + b"\r\n\r\n"
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(value), value)
    assert answer(Feed(sized, piece)) == (200, {"content-length": str(len(value))}, value, False)
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
    )
    status, headers, body, close = answer(Feed(chunked, piece))
    assert (status, body, close) == (200, b"hello world", False)
    assert "x-trailer" not in headers  # trailers are dropped
    to_the_end = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end"
    status, _, body, close = answer(Feed(to_the_end, piece))
    assert (status, body, close) == (200, b"until the end", True)


def test_no_body_after_head_204_304_and_interim_answers_are_skipped() -> None:
    # httptools cannot be told an answer is to a HEAD: its parse stops after the head,
    # and the connection is not reused (what followed the head cannot be placed).
    head_answer = answer(Feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"), "HEAD")
    assert head_answer == (200, {"content-length": "9"}, b"", True)
    assert answer(Feed(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n"))[2] == b""
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    assert answer(Feed(interim, 3))[:3] == (200, {"content-length": "2"}, b"ok")


@pytest.mark.parametrize(
    ("head", "close"),
    [
        (b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", True),
        (b"HTTP/1.1 204 No Content\r\nConnection: Keep-Alive, Close\r\n\r\n", True),
        (b"HTTP/1.0 204 No Content\r\n\r\n", True),
        (b"HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n", False),
        (b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\n", True),  # bytes left over
    ],
)
def test_the_connection_is_kept_only_when_the_answer_allows(head: bytes, close: bool) -> None:
    assert answer(Feed(head))[3] is close


def test_repeated_headers_are_joined_and_folded_lines_continue() -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nX-Riak-Meta-A: 1\r\nx-riak-meta-a: 2\r\n"
        b'Link: </buckets/b>;\r\n rel="up"\r\nContent-Length: 0\r\n\r\n'
    )
    headers = answer(Feed(raw))[1]
    assert headers["x-riak-meta-a"] == "1, 2"
    assert headers["link"] == '</buckets/b>; rel="up"'


def test_bare_line_feeds_are_tolerated() -> None:
    assert answer(Feed(b"HTTP/1.1 404 Object Not Found\nContent-Length: 10\n\nnot found\n"))[
        :3
    ] == (404, {"content-length": "10"}, b"not found\n")


def test_a_closed_connection_before_any_answer_is_remote_disconnected() -> None:
    # the stale keep-alive case the transport answers with one fresh connection
    with pytest.raises(http.client.RemoteDisconnected):
        answer(Feed(b""))
    assert issubclass(http.client.RemoteDisconnected, ConnectionResetError)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", http.client.IncompleteRead),
        (b"HTTP/1.1 200 OK\r\nContent-", http.client.IncompleteRead),
        (b"SSH-2.0-OpenSSH\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", http.client.HTTPException),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            http.client.IncompleteRead,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
            http.client.IncompleteRead,
        ),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n", http.client.HTTPException),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
            http.client.HTTPException,
        ),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000, http.client.LineTooLong),
    ],
)
def test_a_malformed_answer_raises_what_http_client_raises(raw: bytes, error: type) -> None:
    with pytest.raises(error):
        answer(Feed(raw, 4096))


def test_bodies_stay_whole_after_the_next_answer_on_the_connection() -> None:
    first, second = b"a" * 300_000, b"b" * 100_000
    feed = Feed(b"HTTP/1.1 200 OK\r\nContent-Length: 300000\r\n\r\n" + first, piece=20_000)
    connection = Connection(feed)  # type: ignore[arg-type]
    one = connection.exchange(b"GET /1 HTTP/1.1\r\n\r\n", None, "GET", 5.0)[2]
    feed.data = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + second
    two = connection.exchange(b"GET /2 HTTP/1.1\r\n\r\n", None, "GET", 5.0)[2]
    assert (one, two) == (first, second)
    big = 2**20 + 1  # many times the receive buffer
    feed.data = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % big + b"c" * big
    assert connection.exchange(b"GET /3 HTTP/1.1\r\n\r\n", None, "GET", 5.0)[2] == b"c" * big
    assert feed.timeouts == [5.0]  # set once while it does not change


def test_a_large_body_goes_out_whole_after_a_short_write() -> None:
    feed = Feed(RIAK_204)
    body = bytes(range(256)) * 1000
    head = request_head("PUT", "/k", "h", {}, len(body))
    Connection(feed).exchange(head, body, "PUT", 5.0)  # type: ignore[arg-type]
    assert bytes(feed.sent) == head + body
    small = b"x" * 10
    feed.data, feed.sent = RIAK_204, bytearray()
    Connection(feed).exchange(head, small, "PUT", 5.0)  # type: ignore[arg-type]
    assert bytes(feed.sent) == head + small
