"""A harness that runs a real devnode process, for tests and benchmarks.

It picks a free loopback port, starts ``python -m devnode`` as a subprocess
with its log in a file, waits until ``/ping`` answers, and stops it with SIGTERM (then
SIGKILL); see :mod:`fleet.harness`. ``log_text()`` returns the log so a
failing test can show it. :class:`StoreProxy` stands in front of a store (a devnode or
Riak) to refuse chosen requests.
"""

from __future__ import annotations

import http.client
import socket
import sys
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from fleet.harness import ServerProcess, environment_without


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class RawResponse(NamedTuple):
    """What a server answered to :func:`raw_request`."""

    status: int
    #: Header names in lower case.
    headers: dict[str, str]
    body: bytes


def raw_request(
    url: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    timeout_s: float = 10.0,
) -> RawResponse:
    """One HTTP request to the server at ``url`` (a devnode or a Riak node) without our
    client, to check what the server itself answers, error statuses included.

    Raises:
        OSError: no connection, or no answer within ``timeout_s`` seconds.
    """
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout_s)
    try:
        connection.request(method, path, body=body, headers=dict(headers or {}))
        response = connection.getresponse()
        answered = {k.lower(): v for k, v in response.getheaders()}
        return RawResponse(response.status, answered, response.read())
    finally:
        connection.close()


class StoreProxy:
    """An HTTP proxy on a free loopback port (``url``) in front of the store at
    ``upstream``, for fault injection: each request is first shown to :meth:`refuse`
    (from the proxy's threads); a status it returns is answered with nothing forwarded,
    else the request goes to the store and its answer comes back. ``lock`` is for a
    subclass's counters.
    """

    def __init__(self, upstream: str) -> None:
        self.lock = threading.Lock()
        up = urlsplit(upstream)
        self._upstream = (up.hostname or "127.0.0.1", up.port)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _forward(self) -> None:
                proxy._forward(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def refuse(self, method: str, path: str) -> int | None:
        """The status to answer ``method path`` with instead of forwarding it, or None
        to forward it (this proxy forwards everything)."""
        return None

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _forward(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else None
        status = self.refuse(request.command, request.path)
        if status is not None:
            _answer(request, status, [], b"refused by the test proxy")
            return
        conn = http.client.HTTPConnection(*self._upstream, timeout=30)
        skip = {"host", "connection", "content-length", "transfer-encoding"}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in skip}
        conn.request(request.command, request.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        drop = skip | {"server", "date"}  # send_response writes its own
        kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in drop]
        _answer(request, resp.status, kept, data)


def _answer(
    request: BaseHTTPRequestHandler, status: int, headers: list[tuple[str, str]], body: bytes
) -> None:
    request.send_response(status)
    for k, v in headers:
        request.send_header(k, v)
    request.send_header("Content-Length", str(len(body)))
    request.end_headers()
    if request.command != "HEAD":
        request.wfile.write(body)


class DevnodeProcess(ServerProcess):
    """One devnode subprocess serving ``data_dir`` on a free loopback port."""

    def __init__(
        self,
        data_dir: Path,
        *,
        config: Path | None = None,
        port: int | None = None,
        start_timeout_s: float = 20.0,
        python: str = sys.executable,
        host: str = "127.0.0.1",
        wrapper: Sequence[str] = (),
    ) -> None:
        self.data_dir = data_dir
        self.config = config
        self.port = port or free_port()
        # host and wrapper: the chaos campaign runs the devnode in a network namespace of
        # its own (wrapper ``ip netns exec NAME``) on that namespace's address.
        self.host = host
        self.url = f"http://{host}:{self.port}"
        self._wrapper = tuple(wrapper)
        super().__init__("devnode", data_dir.parent / f"devnode-{self.port}.log")
        self._start_timeout_s = start_timeout_s
        self._python = python

    def start(self) -> DevnodeProcess:
        """Start the process and wait for ``/ping``.

        Raises:
            RuntimeError: it exited or did not answer in time; the message holds its log.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = [*self._wrapper, self._python, "-m", "devnode"]
        argv += ["--data-dir", str(self.data_dir), "--listen", f"{self.host}:{self.port}"]
        if self.config is not None:
            argv += ["--config", str(self.config)]
        self._launch(
            argv,
            healthy=self.ping,
            timeout_s=self._start_timeout_s,
            env=environment_without(),
            what="answering /ping",
        )
        return self

    def ping(self) -> bool:
        """Whether ``/ping`` answers 200 now."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=1.0)
        try:
            connection.request("GET", "/ping")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()
