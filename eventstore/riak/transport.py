"""HTTP/1.1 to Riak nodes over pooled keep-alive connections (``wire.py``).

Chosen by measurement (``bench/http_client_bench.py``): against the devnode, a 400 KB
GET took 0.49 ms with http.client pooled by hand, 0.87 ms with urllib3 and 1.6 ms with
httpx; PUTs are bound by the server's fsync with every library; a 100-key multi-get of
400 KB values was within noise across libraries (the server is the bound). The
standard library's road was then the fastest; ``wire.py`` (the request built as one
``bytes``, the answer parsed by ``httptools``/llhttp from the bytes ``recv_into``
brought) costs a small PUT less than half of http.client's CPU, which a companion pays
6-7 times a chunk. ``TCP_NODELAY`` is set so that a large body, sent after its head, is
not held back by Nagle's algorithm until the peer's delayed ACK.

A connection is returned to its node's pool only after its response was read to the
end. A reused connection that the server had closed fails before any answer; that one
try is repeated once on a fresh connection (the methods we send are idempotent).
Everything raised here is ``OSError`` or ``http.client.HTTPException``: the client
translates them (``client.py``).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

from eventstore.riak.wire import Connection, host_header, request_head


class HttpResponse(NamedTuple):
    """A complete answer: status, headers (lower-case names), body."""

    status: int
    headers: dict[str, str]
    body: bytes


class NodePool:
    """Idle keep-alive connections to one node."""

    def __init__(self, base_url: str, *, max_idle: int, connect_timeout_s: float) -> None:
        """Raises:
        ValueError: ``base_url`` is not ``http://host:port``.
        """
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"node URL must be http://host[:port], got {base_url!r}")
        self.base_url = base_url
        self.host = parts.hostname
        self.port = parts.port or 8098
        self.prefix = parts.path.rstrip("/")
        self._host_header = host_header(self.host, self.port)
        self._max_idle = max_idle
        self._connect_timeout_s = connect_timeout_s
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    def request(
        self,
        method: str,
        target: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout_s: float,
    ) -> HttpResponse:
        """Send one request and read the whole answer.

        Raises:
            OSError, http.client.HTTPException: see ``wire.py``.
            ValueError: a header or the target cannot be sent as given.
        """
        head = request_head(
            method,
            self.prefix + target,
            self._host_header,
            headers,
            None if body is None else len(body),
        )
        connection, reused = self._take()
        try:
            return self._exchange(connection, head, body, method, timeout_s)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
        # The server closed an idle keep-alive connection: one fresh try.
        return self._exchange(self._connect(), head, body, method, timeout_s)

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _exchange(
        self,
        connection: Connection,
        head: bytes,
        body: bytes | None,
        method: str,
        timeout_s: float,
    ) -> HttpResponse:
        """One exchange; the connection is closed if it fails or may not be reused."""
        try:
            status, headers, data, close = connection.exchange(head, body, method, timeout_s)
        except BaseException:
            connection.close()
            raise
        if close:
            connection.close()
        else:
            self._give_back(connection)
        return HttpResponse(status, headers, data)

    def _take(self) -> tuple[Connection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._connect(), False

    def _connect(self) -> Connection:
        return Connection.open(self.host, self.port, connect_timeout_s=self._connect_timeout_s)

    def _give_back(self, connection: Connection) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(connection)
                return
        connection.close()


class Transport:
    """One :class:`NodePool` per node URL."""

    def __init__(self, nodes: tuple[str, ...], *, max_idle: int, connect_timeout_s: float) -> None:
        self._pools = {
            node: NodePool(node, max_idle=max_idle, connect_timeout_s=connect_timeout_s)
            for node in nodes
        }

    def request(
        self,
        node: str,
        method: str,
        target: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None = None,
        timeout_s: float,
    ) -> HttpResponse:
        """Send one request to ``node`` (a configured base URL)."""
        return self._pools[node].request(
            method, target, headers=headers, body=body, timeout_s=timeout_s
        )

    def close(self) -> None:
        """Close all idle connections."""
        for pool in self._pools.values():
            pool.close()
