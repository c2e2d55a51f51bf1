"""A TCP proxy that loses a relocator's acknowledgements, for tests and benches only.

:class:`AckCutProxy` stands between producers and a relocator. A swallowed
acknowledgement (sent by the relocator after its fdatasync) leaves frames durable at the
relocator that the producer never heard of: the producer resends them, the duplicate case
idempotent producers exist for (issue 24). Nothing on the relocator's own path imports
this module.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from relocator.wire import HELLO_REPLY

__all__ = ["AckCutProxy"]


class AckCutProxy:
    """Forwards producer connections to ``127.0.0.1:upstream``.

    The producer's bytes always go through, and so does the hello's answer. Each later
    read of acknowledgements is:

    - swallowed, the connection kept, while :attr:`hold` is set;
    - else swallowed and both connections cut, when a cut is armed (:meth:`cut_next`) or,
      while ``cuts`` remain, on every ``every``-th read of a connection;
    - else forwarded.

    :attr:`cuts` counts the cuts made.

    Args:
        upstream: the relocator's TCP port.
        cuts: how many cuts to make by itself (every ``every``-th read); 0: only armed ones.
        every: see ``cuts``.
        refused_close_s: when the relocator is down, a producer's connection is closed
            after this many seconds (closed at once, a producer may connect again at once:
            an emitter backs off after a refused connect only, not after a connection
            that ends at once).
    """

    def __init__(
        self, upstream: int, *, cuts: int = 0, every: int = 2, refused_close_s: float = 0.0
    ) -> None:
        self._upstream = upstream
        self._auto_cuts = cuts
        self._every = every
        self._refused_close_s = refused_close_s
        self.hold = False
        self.cuts = 0
        self._armed = 0
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name=f"proxy-{upstream}", daemon=True).start()

    def cut_next(self) -> None:
        """Swallow the next acknowledgement and cut the connection."""
        with self._lock:
            self._armed += 1

    def disarm(self) -> None:
        """Forget cuts asked for and not made yet."""
        with self._lock:
            self._armed = 0

    @property
    def armed(self) -> int:
        """Cuts asked for and not made yet."""
        with self._lock:
            return self._armed

    def cut_all(self) -> None:
        """Cut every open connection."""
        with self._lock:
            socks, self._open = self._open, []
        self._close(*socks)

    def close(self) -> None:
        """Stop accepting and cut every open connection."""
        self._listener.close()
        self.cut_all()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self._listener.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(("127.0.0.1", self._upstream), timeout=5)
            except OSError:
                if self._refused_close_s > 0:
                    threading.Timer(self._refused_close_s, down.close).start()
                else:
                    down.close()
                continue
            up.settimeout(None)
            with self._lock:
                self._open += [down, up]
            threading.Thread(target=self._pump, args=(down, up), daemon=True).start()
            threading.Thread(target=self._acks, args=(up, down), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        self._close(src, dst)

    def _acks(self, up: socket.socket, down: socket.socket) -> None:
        reads = 0
        first = True
        with contextlib.suppress(OSError):
            while data := up.recv(65536):
                if first and data.startswith(HELLO_REPLY):
                    down.sendall(HELLO_REPLY)
                    data = data[len(HELLO_REPLY) :]
                first = False
                if not data:
                    continue
                reads += 1
                if self.hold:
                    continue
                if self._cut_now(reads):
                    break  # swallowed: durable at the relocator, never heard of here
                down.sendall(data)
        self._close(up, down)

    def _cut_now(self, reads: int) -> bool:
        with self._lock:
            if self._armed > 0:
                self._armed -= 1
            elif self._auto_cuts > 0 and reads % self._every == 0:
                self._auto_cuts -= 1
            else:
                return False
            self.cuts += 1
            return True

    def _close(self, *socks: socket.socket) -> None:
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        with self._lock:
            self._open = [s for s in self._open if s not in socks]
