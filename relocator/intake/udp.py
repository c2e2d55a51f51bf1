"""UDP intake: fire-and-forget datagrams, each one or more length-prefixed frames.

A thread receives datagrams, takes as many as are waiting (up to ``batch_max``), checks
each frame's header and hands the good ones to the journal writer without blocking: a
full journal queue drops them (counted, ``reason="overload"``), as UDP would anyway.
Nothing is acknowledged over UDP; frames are durable after the next group commit.
"""

from __future__ import annotations

import logging
import socket
import threading

from relocator.errors import MalformedFrame
from relocator.journal import JournalWriter
from relocator.metrics import Metrics
from relocator.wire import Frame, FrameParser, split_stream

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
        received = self._metrics.received.labels("udp")
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
            frames: list[bytes] = []
            parsed: list[Frame] = []
            for d in datagrams:
                try:
                    parts, used = split_stream(bytearray(d), self._max)
                    if used != len(d):
                        raise MalformedFrame("datagram has trailing bytes")
                except MalformedFrame:
                    self._metrics.dropped.labels("malformed").inc()
                    continue
                for p in parts:
                    if not p:
                        self._metrics.dropped.labels("oversized").inc()
                        continue
                    try:
                        parsed.append(parser.parse(p))
                    except MalformedFrame:
                        self._metrics.dropped.labels("malformed").inc()
                        continue
                    frames.append(p)
            if frames and not self._writer.submit(frames, parsed, None, block=False):
                self._metrics.dropped.labels("overload").inc(len(frames))
                continue
            received.inc(len(frames))
