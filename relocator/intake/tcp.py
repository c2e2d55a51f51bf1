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
everything not yet acknowledged.

Idempotent producers (``producers.py``, ``wire.py``): a stream that opens with a hello
gets ``HELLO_REPLY`` at once, and its frames are numbered from the hello's first seq.
Each read's frames are one range ``[first, first + n)``; under one lock for all
connections, the range is checked against the producer's high mark and queued for the
journal (the lock spans both, so anything that relies on a range queued by another
connection, a resend racing the original, is queued after it and acknowledged only
after its fdatasync):

- new frames: journaled with the range as the record's trailer;
- frames already held (a resend after a lost acknowledgement): not journaled again;
  an empty submission acknowledges them once what they duplicate is durable
  (``relocator_events_deduplicated_total``);
- a resend that overlaps a prefix: that prefix is cut off the read (its frames walked,
  the rest scanned again; only on resends) and the rest checked again.

A stream that starts with a frame is a producer without an id: at-least-once, as
before, counted in ``relocator_tcp_events_total{producer="legacy"}``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import socketserver
import threading
from collections.abc import Callable

from relocator.errors import MalformedFrame
from relocator.journal import JournalWriter
from relocator.metrics import Metrics
from relocator.producers import ProducerTable
from relocator.rejects import Rejections, count_rejected
from relocator.wire import (
    ACK,
    HELLO_REPLY,
    FrameParser,
    Received,
    scan_stream,
    skip_frames,
    take_hello,
)

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
        producers: ProducerTable | None = None,
    ) -> None:
        """Args:
        producers: the high marks of producers with ids (intake's own table); None
            treats every stream as a producer without id (hellos are refused).
        """
        _Server.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._server = _Server((host, port), _Handler, bind_and_activate=True)
        self._server.intake = self
        self.port: int = self._server.server_address[1]
        self._writer = writer
        self._metrics = metrics
        self._rejections = Rejections(metrics, "tcp")
        self._max = max_event_bytes
        self._producers = producers
        self._sequencing = threading.Lock()  # check a range + queue it, atomically
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
        started = False
        producer: bytes | None = None  # None: a producer without id
        seq = 0  # the number of the next frame of this stream (producers with ids)
        while True:
            try:
                data = sock.recv(1024 * 1024)
            except OSError:
                return
            if not data:
                return
            buffer += data
            if not started:
                try:
                    opening = take_hello(buffer)
                    if opening is not None and opening[0] is not None and self._producers is None:
                        raise MalformedFrame("producer ids are not accepted here")
                except MalformedFrame as e:
                    log.warning("tcp: closing connection from %s: %s", peer, e)
                    self._metrics.dropped.labels("malformed").inc()
                    return
                if opening is None:
                    continue
                started = True
                hello, size = opening
                if hello is not None:
                    producer, seq = hello.producer_id, hello.first_seq
                    del buffer[:size]
                    with lock, contextlib.suppress(OSError):
                        sock.sendall(HELLO_REPLY)
                kind = "legacy" if producer is None else "idempotent"
                kind_total = self._metrics.tcp_events.labels(kind)
            try:
                # C (when built): frames cut, headers checked and grouped, GIL released
                received, used = scan_stream(buffer, self._max, parser)
            except MalformedFrame as e:
                log.warning("tcp: closing connection: %s", e)
                self._metrics.dropped.labels("malformed").inc()
                return
            if not used:
                continue
            rejected = received.rejected
            if rejected:
                count_rejected(self._rejections, received, f"from {peer}")
            with self._conn_lock:
                if self._stopping:
                    return
            # Rejected frames are acknowledged with the good ones after the group commit,
            # so the cumulative count never runs ahead of what is durable.
            if producer is None:
                self._writer.submit(received, functools.partial(ack, extra=rejected), block=True)
            else:
                n = received.events + rejected
                received = self._submit_numbered(
                    producer, seq, received, stream=buffer, used=used, ack=ack
                )
                seq += n
            del buffer[:used]
            received_total.inc(received.events)
            kind_total.inc(received.events)

    def _submit_numbered(
        self,
        producer: bytes,
        first: int,
        received: Received,
        *,
        stream: bytearray,
        used: int,
        ack: Callable[..., None],
    ) -> Received:
        """Queue the frames of ``stream[:used]`` (scanned as ``received``) numbered from
        ``first``, minus those the producer's high mark says are held.

        Returns:
            What was queued for the journal (events already held are left out).
        """
        assert self._producers is not None
        count = received.events + received.rejected
        start = 0  # bytes of stream cut off as already held
        held = 0
        while True:
            with self._sequencing:
                dup = self._producers.admit(producer, first, count)
                if dup == 0:
                    done = functools.partial(ack, extra=received.rejected + held)
                    self._writer.submit(
                        received, done, block=True, producer=(producer, first, count)
                    )
                    break
                if dup == count:  # acknowledged after what it duplicates is durable
                    held += count
                    received = _NOTHING
                    self._writer.submit(received, functools.partial(ack, extra=held), block=True)
                    break
            # A prefix is held: cut it off and look at the rest again (resends only).
            start = skip_frames(stream, start, dup)
            received, _ = scan_stream(bytes(stream[start:used]), self._max, FrameParser())
            first += dup
            count -= dup
            held += dup
        if held:
            self._metrics.deduplicated.inc(held)
        return received


_NOTHING = Received(b"", [], 0, 0, 0)
