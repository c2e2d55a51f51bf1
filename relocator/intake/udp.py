"""UDP intake: fire-and-forget datagrams, each one or more length-prefixed frames.

A thread receives datagrams, takes as many as are waiting (up to ``batch_max``), checks
each frame's header and document as TCP intake does (``wire.scan_stream``) and hands
the good ones to the journal writer without blocking: a full journal queue drops them
(counted, ``reason="overload"``), as UDP would anyway.
Nothing is acknowledged over UDP; frames are durable after the next group commit.
"""

from __future__ import annotations

import logging
import socket
import threading

from relocator.errors import MalformedFrame
from relocator.journal import JournalWriter
from relocator.metrics import Metrics
from relocator.rejects import Rejections, count_rejected
from relocator.wire import LENGTH, FrameParser, scan_stream

log = logging.getLogger(__name__)


class UdpIntake:
    """One UDP socket and its receiving thread."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        writer: JournalWriter,
        metrics: Metrics,
        max_event_bytes: int,
        batch_max: int = 2048,
    ) -> None:
        self._sock = socket.socket(
            socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM
        )
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
        self._sock.bind((host, port))
        self._sock.settimeout(0.2)
        self.port: int = self._sock.getsockname()[1]
        self._writer = writer
        self._metrics = metrics
        self._rejections = Rejections(metrics, "udp")
        self._max = max_event_bytes
        self._batch_max = batch_max
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="udp-intake", daemon=True)

    def start(self) -> None:
        """Start receiving."""
        self._thread.start()

    def stop(self) -> None:
        """Stop receiving and close the socket."""
        self._stopping.set()
        self._thread.join()
        self._sock.close()

    def _run(self) -> None:
        counter = self._metrics.received.labels("udp")
        parser = FrameParser()
        while not self._stopping.is_set():
            try:
                datagrams = [self._sock.recv(65536)]
            except TimeoutError:
                continue
            self._sock.setblocking(False)
            try:
                while len(datagrams) < self._batch_max:
                    datagrams.append(self._sock.recv(65536))
            except BlockingIOError:
                pass
            finally:
                self._sock.settimeout(0.2)
            whole = [d for d in datagrams if _whole_frames(d)]
            if len(whole) < len(datagrams):
                self._metrics.dropped.labels("malformed").inc(len(datagrams) - len(whole))
            try:  # whole datagrams back to back are a stream of frames
                received, _ = scan_stream(b"".join(whole), self._max, parser)
            except MalformedFrame:
                self._metrics.dropped.labels("malformed").inc(len(whole))
                continue
            if received.rejected:
                count_rejected(self._rejections, received, "in datagrams")
            if not received.events:
                continue
            if not self._writer.submit(received, None, block=False):
                self._metrics.dropped.labels("overload").inc(received.events)
                continue
            counter.inc(received.events)


def _whole_frames(datagram: bytes) -> bool:
    """Whether the datagram is length-prefixed frames with nothing left over."""
    pos = 0
    while pos + LENGTH.size <= len(datagram):
        (n,) = LENGTH.unpack_from(datagram, pos)
        pos += LENGTH.size + n
    return pos == len(datagram)
