"""Producers and intake over real sockets: UDP and acked TCP end up in Riak; the emitter
never blocks or raises, counts what it could not send, and resends after a restart."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from devnode.testing import DevnodeProcess, free_port
from eventstore.riak import RiakClient
from relocator.daemon import Relocator
from relocator.producer import TcpEmitter, UdpEmitter
from relocator.settings import RelocatorSettings, load, parse_cluster_option
from relocator.testing import stored_events
from relocator.wire import ACK, LENGTH


def _settings(tmp_path: Path, url: str, tcp: int = 0) -> RelocatorSettings:
    return load(
        None,
        data_dir=tmp_path / "data",
        tcp_listen=f"127.0.0.1:{tcp}",
        udp_listen="127.0.0.1:0",
        metrics_listen="",
        grace_s=0.2,
        tick_s=0.05,
        clusters=(parse_cluster_option(f"a={url}"),),
    )


@pytest.fixture
def relocator(tmp_path: Path, session_devnode: DevnodeProcess) -> Iterator[Relocator]:
    r = Relocator(_settings(tmp_path, session_devnode.url))
    r.start()
    yield r
    r.request_stop()
    r.shutdown()


def _run_until(r: Relocator, pred: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, r.status()
        r.tick()
        time.sleep(0.05)


def test_udp_and_tcp_events_are_stored(relocator: Relocator, riak: RiakClient, dc: str) -> None:
    assert relocator.udp is not None and relocator.tcp is not None
    udp = UdpEmitter("127.0.0.1", relocator.udp.port, dc=dc)
    tcp = TcpEmitter("127.0.0.1", relocator.tcp.port, dc=dc)
    epoch = int(time.time())
    for i in range(200):
        assert udp.emit({"id": i, "via": "udp"}, "web", "www", epoch=epoch)
        assert tcp.emit(
            {"id": 1000 + i, "via": "tcp", "nested": {"l": [1, 2.5, None]}}, "lb", epoch=epoch
        )
    assert tcp.flush(10)
    assert tcp.acked == 200
    want = set(range(200)) | set(range(1000, 1200))
    _run_until(
        relocator,
        lambda: {e["id"] for e in stored_events(riak, dc, range(epoch, epoch + 1))[0]} >= want,
    )
    udp.close()
    tcp.close()
    assert relocator.metrics.received.labels("tcp")._value.get() == 200


def test_emit_counts_what_it_cannot_send_and_never_raises(dc: str) -> None:
    port = free_port()  # nobody listens
    udp = UdpEmitter("127.0.0.1", port, dc=dc, max_event_bytes=1000)
    tcp = TcpEmitter("127.0.0.1", port, dc=dc, queue_max=3, max_event_bytes=1000)
    t0 = time.monotonic()
    assert not udp.emit({"x": object()}, "web")  # unencodable
    assert not udp.emit({"x": "y" * 5000}, "web")  # oversized
    assert not udp.emit({"x": 1}, "bad type!")  # not a token
    for i in range(5):
        tcp.emit({"i": i}, "web")
    assert time.monotonic() - t0 < 5  # never blocked on the missing listener
    assert udp.counts["unencodable"] == 2 and udp.counts["oversized"] == 1
    assert tcp.counts["queue_full"] == 2 and tcp.pending() == 3
    assert not tcp.flush(0.2)
    tcp.close(timeout_s=0.1)
    udp.close()


def test_tcp_emitter_resends_unacked_after_the_relocator_restarts(
    tmp_path: Path, session_devnode: DevnodeProcess, riak: RiakClient, dc: str
) -> None:
    tcp_port = free_port()
    settings = _settings(tmp_path, session_devnode.url, tcp=tcp_port)
    emitter = TcpEmitter("127.0.0.1", tcp_port, dc=dc)
    epoch = int(time.time())
    for i in range(50):
        emitter.emit({"id": i}, "web", epoch=epoch)  # relocator not running yet: queued
    r = Relocator(settings)
    r.start()
    for i in range(50, 100):
        emitter.emit({"id": i}, "web", epoch=epoch)
    assert emitter.flush(10)
    r.request_stop()
    r.shutdown()
    for i in range(100, 150):
        emitter.emit({"id": i}, "web", epoch=epoch)
    r = Relocator(settings)
    r.start()
    assert emitter.flush(10)
    _run_until(
        r,
        lambda: (
            {e["id"] for e in stored_events(riak, dc, range(epoch, epoch + 1))[0]}
            >= set(range(150))
        ),
    )
    emitter.close()
    r.request_stop()
    r.shutdown()


def test_malformed_tcp_frames_are_acked_rejected_and_counted(relocator: Relocator) -> None:
    assert relocator.tcp is not None
    with socket.create_connection(("127.0.0.1", relocator.tcp.port), timeout=5) as s:
        s.sendall(LENGTH.pack(3) + b"bad" + LENGTH.pack(4) + b"RE\x01x")
        assert ACK.unpack(s.recv(8)) == (2,)
    assert relocator.metrics.dropped.labels("malformed")._value.get() == 2


def test_late_events_become_extra_chunks_merged_into_the_epoch(
    relocator: Relocator, riak: RiakClient, dc: str
) -> None:
    assert relocator.tcp is not None
    tcp = TcpEmitter("127.0.0.1", relocator.tcp.port, dc=dc)
    epoch = int(time.time()) - 100  # closed long ago: every event is late
    for i in range(10):
        tcp.emit({"id": i}, "web", epoch=epoch)
    assert tcp.flush(10)

    def ids() -> list[int]:
        return sorted(e["id"] for e in stored_events(riak, dc, range(epoch, epoch + 1))[0])

    _run_until(relocator, lambda: ids() == list(range(10)))
    first = riak.get("epochs", "epochs", f"{epoch}-{dc}").value
    for i in range(10, 20):
        tcp.emit({"id": i}, "web", epoch=epoch)
    assert tcp.flush(10)
    _run_until(relocator, lambda: ids() == list(range(20)))
    second = riak.get("epochs", "epochs", f"{epoch}-{dc}").value
    assert set(first.split(b"|")) < set(second.split(b"|"))  # merged, nothing dropped
    assert relocator.metrics.late._value.get() == 20
    tcp.close()


def test_intake_waits_while_sealing_is_behind(
    tmp_path: Path, session_devnode: DevnodeProcess, riak: RiakClient, dc: str
) -> None:
    settings = replace(
        _settings(tmp_path, session_devnode.url),
        max_open_events=10,
        grace_s=600.0,
        max_hold_s=600.0,
    )
    r = Relocator(settings)
    r.start()
    assert r.tcp is not None
    emitter = TcpEmitter("127.0.0.1", r.tcp.port, dc=dc)
    epoch = int(time.time())
    for i in range(200):
        emitter.emit({"id": i}, "web", epoch=epoch)
        if i % 20 == 19:
            time.sleep(0.05)  # several submissions, not one
    time.sleep(1.0)
    held = r.aggregator.open_positions()
    assert held <= 10 + 200 and emitter.acked < 200, (held, emitter.acked)
    assert not emitter.flush(0.5)  # producers wait: nothing is dropped
    deadline = time.monotonic() + 15
    while emitter.pending() and time.monotonic() < deadline:
        r.tick(now=float("inf"))  # sealing catches up; intake resumes
        time.sleep(0.05)
    assert emitter.flush(5)
    r.tick(now=float("inf"))
    _run_until(
        r,
        lambda: (
            sorted(e["id"] for e in stored_events(riak, dc, range(epoch, epoch + 1))[0])
            == list(range(200))
        ),
    )
    emitter.close()
    r.request_stop()
    r.shutdown()
