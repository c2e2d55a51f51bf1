"""Idempotent TCP producers over real sockets (issue 24).

A proxy between a ``TcpEmitter`` and a relocator process swallows acknowledgements and
cuts the connection: the producer resends what it did not see acknowledged, and with
producer ids nothing is stored twice (without them, the same run stores events twice:
the control that shows the test can fail). A producer whose frames were journaled but
not acknowledged when the relocator was killed -9 resends them to the restarted
relocator, which recognises them from its journal. And both directions of the stream
version change: a producer without ids to this relocator, and a producer with ids to a
relocator of stream version 1 (downgraded to at-least-once).
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time

import pytest
from relocator_rig import Rig

from relocator.ack_proxy import AckCutProxy
from relocator.producer import TcpEmitter
from relocator.testing import RelocatorProcess, with_sitecustomize
from relocator.wire import ACK, FrameParser, scan_stream


def _metric(proc: RelocatorProcess, name: str) -> float:
    m = re.search(rf"^{re.escape(name)} (\S+)$", proc.metrics(), re.MULTILINE)
    return float(m.group(1)) if m else 0.0


def _count(rig: Rig, first_epoch: int) -> tuple[set[int], int]:
    ids = rig.stored_ids(range(first_epoch, int(time.time()) + 2))
    return set(ids), len(ids) - len(set(ids))


def _emit_paced(emitter: TcpEmitter, ids: range, *, rounds: int) -> None:
    per = max(1, len(ids) // rounds)
    for k, i in enumerate(ids):
        assert emitter.emit({"id": i, "pad": "p" * (i % 200)}, "web", "www")
        if k % per == per - 1:
            time.sleep(0.02)


EVENTS = 4000


@pytest.mark.parametrize("idempotent", [True, False], ids=["with-ids", "control-without-ids"])
def test_swallowed_acks_and_cut_connections_store_each_event_once(
    rig: Rig,
    idempotent: bool,
) -> None:
    proc, tcp = rig.relocator()
    proc.start()
    proxy = AckCutProxy(tcp, cuts=16, every=2)
    first_epoch = int(time.time()) - 1
    emitter = TcpEmitter("127.0.0.1", proxy.port, dc=rig.dc, idempotent=idempotent)
    try:
        _emit_paced(emitter, range(EVENTS), rounds=80)
        assert emitter.flush(60), f"{emitter.pending()} never acknowledged"
    finally:
        emitter.close()
        proxy.close()
    assert proxy.cuts == 16, f"only {proxy.cuts} acknowledgements swallowed"
    proc.wait_drained()
    ids, twice = _count(rig, first_epoch)
    lost = EVENTS - len(ids)
    print(f"{EVENTS} events, {proxy.cuts} acks swallowed: {lost} lost, {twice} extra copies")
    assert ids == set(range(EVENTS)), f"{EVENTS - len(ids)} acknowledged events lost"
    if idempotent:
        assert twice == 0, f"{twice} events stored twice"
        assert _metric(proc, "relocator_events_deduplicated_total") > 0
        assert _metric(proc, 'relocator_tcp_events_total{producer="idempotent"}') == EVENTS
    else:  # the same run without ids: the test sees the duplicates it exists to catch
        assert twice > 0
        assert _metric(proc, 'relocator_tcp_events_total{producer="legacy"}') > EVENTS


#: Recovery without the producers' high marks (the journal's producer frames ignored):
#: what this relocator does without the mechanism under test.
_FORGETFUL = """
import relocator.daemon
relocator.daemon.Relocator._recover_producers = lambda self, frame: None
"""


@pytest.mark.parametrize("recover", [True, False], ids=["recovered", "control-forgetful"])
def test_frames_journaled_but_unacknowledged_at_a_kill9_are_recognised_after_restart(
    rig: Rig,
    recover: bool,
) -> None:
    env = None if recover else with_sitecustomize(rig.tmp_path / "site", _FORGETFUL)
    proc, tcp = rig.relocator(env=env)
    proc.start()
    proxy = AckCutProxy(tcp)
    proxy.hold = True  # the relocator journals and acknowledges; the producer never hears
    first_epoch = int(time.time()) - 1
    emitter = TcpEmitter("127.0.0.1", proxy.port, dc=rig.dc)
    try:
        for i in range(500):
            assert emitter.emit({"id": i}, "web", "www")
        deadline = time.monotonic() + 20
        while _metric(proc, 'relocator_events_received_total{intake="tcp"}') < 500:
            assert time.monotonic() < deadline, "the relocator never journaled the 500 events"
            time.sleep(0.05)
        assert emitter.acked == 0
        proc.kill()
        proc.start()
        proxy.hold = False
        proxy.cut_all()  # the producer reconnects to the new process and resends all 500
        assert emitter.flush(30)
    finally:
        emitter.close()
        proxy.close()
    proc.wait_drained()
    ids, twice = _count(rig, first_epoch)
    assert ids == set(range(500))
    if recover:
        assert twice == 0, f"{twice} events stored twice"
        # 500, or a multiple: the producer may have resent once more to the new
        # process while the proxy still held its acknowledgements
        assert _metric(proc, "relocator_events_deduplicated_total") >= 500
    else:
        assert twice == 500  # the first resend to the new process is stored again


def test_a_producer_without_ids_is_served_at_least_once_and_counted(
    rig: Rig,
) -> None:
    """Old producer -> new relocator: the stream version 1 bytes (``idempotent=False``
    sends exactly what the emitter sent before ids)."""
    proc, tcp = rig.relocator()
    proc.start()
    first_epoch = int(time.time()) - 1
    emitter = TcpEmitter("127.0.0.1", tcp, dc=rig.dc, idempotent=False)
    for i in range(300):
        assert emitter.emit({"id": i}, "lb", "haproxy")
    assert emitter.flush(20)
    emitter.close()
    proc.wait_drained()
    ids, twice = _count(rig, first_epoch)
    assert ids == set(range(300)) and twice == 0
    assert _metric(proc, 'relocator_tcp_events_total{producer="legacy"}') == 300
    assert _metric(proc, 'relocator_tcp_events_total{producer="idempotent"}') == 0


class StreamV1Relocator:
    """The TCP intake of a relocator of stream version 1, as it was: frames cut and
    checked by ``wire.scan_stream`` (unchanged by stream version 2), rejected frames
    acknowledged as handled with the good ones, a cumulative count per connection. It
    journals nothing; it keeps the documents it accepted."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.documents: list[bytes] = []
        self.malformed = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                sock, _ = self._listener.accept()
                threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        buffer = bytearray()
        handled = 0
        parser = FrameParser()
        with contextlib.suppress(OSError), sock:
            while data := sock.recv(1 << 20):
                buffer += data
                received, used = scan_stream(buffer, 450_000, parser)
                if not used:
                    continue
                del buffer[:used]
                self.documents += [d for g in received.groups for d in g.documents]
                self.malformed += received.malformed
                handled += received.events + received.rejected
                sock.sendall(ACK.pack(handled))

    def close(self) -> None:
        self._listener.close()


def test_a_producer_with_ids_to_a_stream_v1_relocator_is_downgraded(dc: str) -> None:
    """New producer -> old relocator: downgraded to at-least-once, not refused. What this
    proves: the emitter reads the answer a version 1 intake gives its hello (the hello
    acknowledged as one rejected frame) as "no ids here" and delivers every event. The
    old intake is simulated with the parser it used, not run from the old tree."""
    old = StreamV1Relocator()
    emitter = TcpEmitter("127.0.0.1", old.port, dc=dc)
    try:
        for i in range(200):
            assert emitter.emit({"id": i}, "web", "api")
        assert emitter.flush(10)
    finally:
        emitter.close()
        old.close()
    assert len(old.documents) == 200
    assert old.malformed == 1  # the hello
    assert emitter.counts["downgraded"] == 1
    assert emitter.acked == 200
