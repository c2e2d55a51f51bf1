"""TCP intake: a stream of length-prefixed frames, acknowledged once durable.

One thread per connection reads whatever has arrived, cuts it into frames, checks each
header and groups the frames by header (``wire.scan_stream``: compiled, one pass, no
Python code per frame), and submits them to the journal writer (blocking when its queue is full:
back-pressure to the producer). After the group commit the writer's callback sends the
connection's cumulative count of handled frames (u64 BE): durable ones, plus rejected
ones, so the producer can free them. Rejected (counted by reason, logged rate-limited,
never journaled): a malformed header, a frame above ``max_event_bytes``, a compressed
document whose body claims more than ``max_event_bytes`` (nothing is decompressed), an
uncompressed event that is not a hash. A producer that loses the connection resends
everything not yet acknowledged (at-least-once).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import socketserver
import threading

from relocator.errors import MalformedFrame
from relocator.journal import JournalWriter
from relocator.metrics import Metrics
from relocator.rejects import Rejections, count_rejected
from relocator.wire import ACK, FrameParser, scan_stream

log = logging.getLogger(__name__)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    intake: TcpIntake


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.server.intake.serve(self.request)


class TcpIntake:
    """The TCP listener."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        writer: JournalWriter,
        metrics: Metrics,
        max_event_bytes: int,
    ) -> None:
        _Server.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._server = _Server((host, port), _Handler, bind_and_activate=True)
        self._server.intake = self
        self.port: int = self._server.server_address[1]
        self._writer = writer
        self._metrics = metrics
        self._rejections = Rejections(metrics, "tcp")
        self._max = max_event_bytes
        self._connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        self._stopping = False
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="tcp-intake",
            daemon=True,
        )

    def start(self) -> None:
        """Start accepting connections."""
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting and close every open connection (producers resend what was not
        acknowledged to the next relocator process)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        with self._conn_lock:
            self._stopping = True
            for sock in self._connections:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def serve(self, sock: socket.socket) -> None:
        """Read frames from one connection until it closes."""
        with self._conn_lock:
            if self._stopping:
                return
            self._connections.add(sock)
        try:
            self._serve(sock)
        finally:
            with self._conn_lock:
                self._connections.discard(sock)

    def _serve(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            host, port = sock.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        received_total = self._metrics.received.labels("tcp")
        lock = threading.Lock()
        handled = 0

        def ack(n: int, extra: int = 0) -> None:
            nonlocal handled
            with lock:
                handled += n + extra
                # the producer may have gone away; it resends what it did not see acked
                with contextlib.suppress(OSError):
                    sock.sendall(ACK.pack(handled))

        parser = FrameParser()
        buffer = bytearray()
        while True:
            try:
                data = sock.recv(1024 * 1024)
            except OSError:
                return
            if not data:
                return
            buffer += data
            try:
                # C (when built): frames cut, headers checked and grouped, GIL released
                received, used = scan_stream(buffer, self._max, parser)
            except MalformedFrame as e:
                log.warning("tcp: closing connection: %s", e)
                self._metrics.dropped.labels("malformed").inc()
                return
            if not used:
                continue
            del buffer[:used]
            rejected = received.rejected
            if rejected:
                count_rejected(self._rejections, received, f"from {peer}")
            # Rejected frames are acknowledged with the good ones after the group commit,
            # so the cumulative count never runs ahead of what is durable.
            with self._conn_lock:
                if self._stopping:
                    return
            self._writer.submit(received, functools.partial(ack, extra=rejected), block=True)
            received_total.inc(received.events)
