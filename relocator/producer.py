"""The producer helper: ``Emitter.emit(event, type, subtype="", dc=None)``.

Applications call ``emit`` on their hot path, so it **never blocks and never raises**:

- :class:`UdpEmitter`: one datagram per event, fire and forget (as at Booking). A send
  error (no listener, buffer full) is counted, not raised.
- :class:`TcpEmitter`: a background thread keeps a connection to the relocator, sends
  queued frames and keeps each one until the relocator acknowledges it as durable; on
  a broken connection it reconnects with back-off and resends everything unacked.
  ``emit`` only puts the frame on a bounded queue (full: counted drop).
  ``flush(timeout_s)`` waits until everything emitted so far is acknowledged.

  **Exactly once into the store**: the emitter has a producer id (``producer_id``, 128
  random bits drawn when it is made) and opens each connection with a hello naming it
  and the number of its first unacknowledged frame (``wire.py``); the relocator
  recognises a resent frame it already holds and acknowledges it without storing it
  again (``producers.py``). What exactly-once does not cover: frames still
  unacknowledged when the *producer* process ends are lost unless the application
  resends them, and then they come from a new id and may be stored twice. A relocator
  that does not know hellos (stream version 1) acknowledges the hello as a rejected
  frame: the emitter then goes on without ids (**downgraded**, at-least-once), counts
  ``counts["downgraded"]`` once per connection and logs a warning.
  ``idempotent=False`` never sends a hello (the version 1 stream).

Events that cannot be encoded (a value Sereal has no form for) or that are larger than
``max_event_bytes`` encoded are counted in ``counts`` (``unencodable``, ``oversized``)
and logged at most once per second, never silently lost.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import sereal_codec as sereal
from relocator import defaults
from relocator.errors import MalformedFrame
from relocator.wire import ACK, HELLO_REPLY, LENGTH, encode_frame, encode_hello
from sereal_codec.errors import SerealError

log = logging.getLogger(__name__)


class Emitter:
    """Common part: encode one event into a length-prefixed frame, count failures."""

    def __init__(
        self,
        *,
        dc: str,
        max_event_bytes: int = defaults.MAX_EVENT_BYTES,
        compress: str | None = None,
    ) -> None:
        self.dc = dc
        self._max = max_event_bytes
        self._compress = compress
        self.counts: collections.Counter[str] = collections.Counter()
        self._last_log = 0.0

    def _frame(
        self, event: Mapping[str, Any], type: str, subtype: str, dc: str | None, epoch: int | None
    ) -> bytes | None:
        try:
            doc = sereal.encode(dict(event), compress=self._compress)
            frame = encode_frame(
                int(time.time()) if epoch is None else epoch, dc or self.dc, type, subtype, doc
            )
        except (SerealError, MalformedFrame, TypeError, ValueError) as e:
            self._count("unencodable", e)
            return None
        if len(frame) > self._max:
            self._count("oversized", f"{len(frame)} bytes")
            return None
        return LENGTH.pack(len(frame)) + frame

    def _count(self, reason: str, detail: object) -> None:
        self.counts[reason] += 1
        now = time.monotonic()
        if now - self._last_log >= 1.0:
            self._last_log = now
            log.warning(
                "emit: event not sent (%s): %s; counts=%s", reason, detail, dict(self.counts)
            )

    def emit(
        self,
        event: Mapping[str, Any],
        type: str,
        subtype: str = "",
        dc: str | None = None,
        *,
        epoch: int | None = None,
    ) -> bool:
        """Send one event; returns whether it was handed over (never raises).

        Unencodable, oversized and undeliverable events are counted in ``counts`` by
        reason and logged (rate-limited), never raised into the application.
        """
        try:
            frame = self._frame(event, type, subtype, dc, epoch)
            if frame is None or not self._deliver(frame):
                return False
        except Exception as e:  # the contract: never raise into the app
            self._count("unexpected", e)
            return False
        self.counts["sent"] += 1
        return True

    def _deliver(self, frame: bytes) -> bool:
        """Hand one frame to the transport; False (after counting why) when it cannot."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the socket."""


class UdpEmitter(Emitter):
    """Fire-and-forget datagrams to ``host:port``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 5140, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._addr = (host, port)
        self._sock = socket.socket(
            socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM
        )
        self._sock.setblocking(False)
        self._max = min(self._max, 65507)

    def _deliver(self, frame: bytes) -> bool:
        try:
            self._sock.sendto(frame, self._addr)
        except OSError as e:
            self._count("send_error", e)
            return False
        return True

    def close(self) -> None:
        self._sock.close()


class TcpEmitter(Emitter):
    """Acknowledged delivery over TCP with a bounded in-memory queue."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 5141,
        *,
        queue_max: int = 100_000,
        connect_timeout_s: float = 2.0,
        idempotent: bool = True,
        **kwargs: Any,
    ) -> None:
        """Args:
        idempotent: open each connection with a hello (producer id, frame numbers):
            exactly once into the store. False: the version 1 stream, at-least-once.
        """
        super().__init__(**kwargs)
        #: 128 random bits: a new emitter (a restarted producer) is a new producer.
        self.producer_id = os.urandom(16)
        self._idempotent = idempotent
        self._addr = (host, port)
        self._queue_max = queue_max
        self._connect_timeout_s = connect_timeout_s
        self._queue: collections.deque[bytes] = collections.deque()
        self._unacked: collections.deque[bytes] = collections.deque()
        self._cv = threading.Condition()
        self._closing = False
        self.acked = 0
        self._thread = threading.Thread(target=self._run, name="relocator-emitter", daemon=True)
        self._thread.start()

    def _deliver(self, frame: bytes) -> bool:
        with self._cv:
            if len(self._queue) + len(self._unacked) >= self._queue_max:
                self._count("queue_full", self._queue_max)
                return False
            self._queue.append(frame)
            self._cv.notify()
        return True

    def pending(self) -> int:
        """Frames emitted but not yet acknowledged."""
        with self._cv:
            return len(self._queue) + len(self._unacked)

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until everything emitted so far is acknowledged; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self._queue or self._unacked:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.1))
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Flush for up to ``timeout_s``, then stop the thread: frames still not
        acknowledged then are given up (``flush`` said so)."""
        self.flush(timeout_s)
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        self._thread.join()

    def _run(self) -> None:
        delay = 0.05
        while True:
            with self._cv:
                if self._closing:
                    return
            try:
                sock = socket.create_connection(self._addr, timeout=self._connect_timeout_s)
            except OSError:
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            acked = self.acked
            try:
                self._session(sock)
            except OSError as e:
                # A connection that ends before any acknowledgement (a relocator that
                # accepts and closes at once) backs off like a refused one: without it
                # the emitter reconnected in a hot loop, logging each time.
                if self.acked > acked:
                    delay = 0.05
                (log.info if delay <= 0.05 else log.debug)(
                    "emit: connection to %s:%d lost (%s); resending unacked", *self._addr, e
                )
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
            finally:
                sock.close()
            with self._cv:  # everything unacked goes out again first, in order
                self._queue.extendleft(reversed(self._unacked))
                self._unacked.clear()

    def _session(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        base = self._hello(sock) if self._idempotent else 0  # the server counts per connection
        sock.settimeout(0.05)
        buf = b""
        while True:
            with self._cv:
                if self._closing:  # set once close()'s flush is over: done or given up
                    return
                batch = []
                size = 0
                while self._queue and size < 1024 * 1024:
                    f = self._queue.popleft()
                    batch.append(f)
                    size += len(f)
                self._unacked.extend(batch)
            if batch:
                sock.sendall(b"".join(batch))
            try:
                data = sock.recv(65536)
            except TimeoutError:
                data = None
            if data == b"":
                raise ConnectionResetError("relocator closed the connection")
            if data:
                buf += data
                count = base
                while len(buf) >= ACK.size:
                    (count,) = ACK.unpack_from(buf)
                    buf = buf[ACK.size :]
                with self._cv:
                    for _ in range(count - base):
                        self._unacked.popleft()
                    self.acked += count - base
                    base = count
                    self._cv.notify_all()
            elif not batch:
                with self._cv:
                    if not self._queue and not self._closing:
                        self._cv.wait(0.05)

    def _hello(self, sock: socket.socket) -> int:
        """Send the hello (our id, the number of our first unacknowledged frame, which
        is the next one sent) and read the answer.

        Returns:
            The acknowledgement count the connection starts from: 0, or 1 when the
            relocator counted the hello as a rejected frame (stream version 1: we go on
            at-least-once).

        Raises:
            OSError: no answer within ``connect_timeout_s``, or not one a relocator gives.
        """
        sock.settimeout(self._connect_timeout_s)
        sock.sendall(encode_hello(self.producer_id, self.acked))
        reply = b""
        while len(reply) < ACK.size:
            data = sock.recv(ACK.size - len(reply))
            if not data:
                raise ConnectionResetError("relocator closed the connection after the hello")
            reply += data
        if reply == HELLO_REPLY:
            return 0
        if ACK.unpack(reply)[0] == 1:
            self.counts["downgraded"] += 1
            if self.counts["downgraded"] == 1:
                log.warning(
                    "emit: the relocator at %s:%d does not know producer ids (stream version"
                    " 1): delivery is at-least-once (a resent event may be stored twice)",
                    *self._addr,
                )
            return 1
        raise ConnectionError(f"answer {reply!r} to the hello is not a relocator's")
