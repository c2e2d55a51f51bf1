"""TcpEmitter against peers that misbehave: one that never acknowledges, one that accepts
and closes at once (found by the chaos campaign, issue 24)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from relocator.producer import TcpEmitter

pytestmark = pytest.mark.integration


@pytest.fixture
def server() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as s:
        yield s


def test_close_gives_up_after_its_timeout_when_nothing_is_acknowledged(
    server: socket.socket,
) -> None:
    def sink() -> None:
        conn, _ = server.accept()
        with conn:
            while conn.recv(65536):
                pass

    threading.Thread(target=sink, daemon=True).start()
    emitter = TcpEmitter("127.0.0.1", server.getsockname()[1], dc="ams1", idempotent=False)
    emitter.emit({"a": 1}, "web", "www")
    started = time.monotonic()
    closing = threading.Thread(target=emitter.close, args=(0.5,), daemon=True)
    closing.start()
    closing.join(10)
    assert not closing.is_alive(), "close(0.5) never returned with a frame unacknowledged"
    assert time.monotonic() - started < 5


def test_a_peer_that_closes_at_once_is_retried_with_back_off(server: socket.socket) -> None:
    accepted = [0]

    def closer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted[0] += 1
            conn.close()

    threading.Thread(target=closer, daemon=True).start()
    emitter = TcpEmitter("127.0.0.1", server.getsockname()[1], dc="ams1")
    emitter.emit({"a": 1}, "web", "www")
    time.sleep(2.0)
    emitter.close(0.1)
    # 0.05 s doubling to 2 s: a handful in 2 s (it was ~22,000, a hot loop).
    assert accepted[0] in range(1, 11)
