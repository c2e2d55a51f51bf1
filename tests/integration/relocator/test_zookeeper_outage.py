"""ZooKeeper outages are survived by the relocator (issue 12.3; relocator/DESIGN.md,
failure scenarios 17 and 18), against a real ZooKeeper and devnode.

- ZooKeeper stopped for longer than the session timeout under a relocator process with
  events flowing: the process stays up, keeps acknowledging, owns no unit and takes no
  spool file while ZooKeeper is away, answers ``/readyz`` 503; when ZooKeeper is back it
  owns its units again and everything acknowledged is stored, once.
- ZooKeeper down when the relocator starts: it starts anyway (intake, journal, acks),
  pushes nothing until ZooKeeper answers and its writer id is registered, then catches
  up.
- The relocator's session expired under it (a second client attached to the same
  session id and password closes it): it registers its writer id again in a new
  session, claims its units again and keeps going, losing nothing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from relocator_rig import Rig

from devnode.testing import DevnodeProcess, free_port
from eventstore.riak import RiakClient
from relocator.daemon import Relocator
from relocator.settings import load
from relocator.testing import (
    AckedSender,
    RelocatorProcess,
    ZooKeeperProcess,
    drained,
    drop_spool_file,
    relocator_process,
    stored_events,
    write_config,
    writer_session,
)

UNITS = 16
WRITER = 5


def _until(check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _drained(status: dict[str, Any], spool: Path) -> bool:
    return drained(status) and not any(p.suffix == ".srl" for p in spool.iterdir())


def _evidence(riak: RiakClient, dc: str, epochs: range, status: dict[str, Any]) -> str:
    """The relocator's status and each epoch's metadata entries, for a failure message."""
    lines = [f"status: {json.dumps(status, default=str)}"]
    for epoch in epochs:
        try:
            value = riak.get("epochs", "epochs", f"{epoch}-{dc}").value.decode()
        except Exception as e:  # the evidence of a failure: report whatever happens
            value = f"<{e!r}>"
        lines.append(f"metadata {epoch}-{dc}: {value}")
    return "\n".join(lines)


def _check_stored(riak: RiakClient, dc: str, epochs: range, want: set[int]) -> None:
    events, unreadable = stored_events(riak, dc, epochs)
    assert not unreadable
    ids = [e["id"] for e in events]
    assert set(ids) == want, f"lost {len(want - set(ids))}, unexpected {len(set(ids) - want)}"
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} events stored twice"


def test_zookeeper_stopped_under_a_running_relocator(rig: Rig) -> None:
    zk = ZooKeeperProcess(rig.tmp_path / "zk").start()  # our own: this test stops it
    try:
        spool = rig.spool()
        proc, tcp = rig.relocator(
            spool_dir=spool,
            writer_id=WRITER,
            zookeeper=(zk.hosts, "/outage"),
            # many units: rebalance is in ZooKeeper calls most of each tick, so the
            # outage starts in the middle of one
            extra=f"spool_units = {UNITS}",
        )
        proc.start()
        _until(lambda: len(proc.status()["owned_units"]) == UNITS, "all units owned")
        first_epoch = int(time.time())
        sender = AckedSender(tcp, rig.dc, first_id=0).start()
        _until(lambda: len(sender.acked) > 500, "acks before the outage")

        zk.stop()
        stopped_at = time.monotonic()
        _until(lambda: proc.status()["owned_units"] == [], "ownership paused")
        code, body = proc.http("/readyz")
        assert code == 503
        assert any("ZooKeeper" in r for r in json.loads(body)["reasons"]), body
        acked_in_outage = len(sender.acked)
        during = drop_spool_file(spool, first_epoch, rig.dc, range(1_000_000, 1_000_400))
        # longer than the session timeout (2 s): the session may expire meanwhile
        time.sleep(max(0.0, stopped_at + 5.0 - time.monotonic()))
        assert proc.running
        assert proc.http("/healthz") == (200, b"ok\n")
        assert len(sender.acked) > acked_in_outage + 100, "stopped acknowledging"
        assert during.exists(), "a spool file was taken while no unit was owned"
        assert proc.status()["owned_units"] == []

        zk.start()
        _until(lambda: len(proc.status()["owned_units"]) == UNITS, "units owned again")
        _until(lambda: proc.http("/readyz")[0] == 200, "ready again")
        after = drop_spool_file(spool, first_epoch, rig.dc, range(2_000_000, 2_000_400))
        time.sleep(0.5)
        sender.stop()
        _until(lambda: _drained(proc.status(), spool), "everything pushed")
        assert not after.exists() and not during.exists()
        want = set(sender.acked) | set(range(1_000_000, 1_000_400))
        want |= set(range(2_000_000, 2_000_400))
        _check_stored(rig.riak, rig.dc, range(first_epoch - 1, int(time.time()) + 2), want)
        assert proc.running
        assert "Traceback" not in proc.log_text()
    finally:
        zk.stop()


def test_zookeeper_down_when_the_relocator_starts(
    *,
    tmp_path: Path,
    devnode_factory: type[DevnodeProcess],
    dc: str,
    relocators: list[RelocatorProcess],
) -> None:
    node = devnode_factory(tmp_path / "devnode").start()  # its own: PUTs are counted
    zk = ZooKeeperProcess(tmp_path / "zk")  # its port chosen, not started yet
    riak = RiakClient([node.url])
    try:
        proc, tcp = relocator_process(
            tmp_path, {"a": node.url}, writer_id=WRITER, zookeeper=(zk.hosts, "/late")
        )
        relocators.append(proc.start())
        code, body = proc.http("/readyz")
        assert code == 503
        assert json.loads(body)["zookeeper"]["registered"] is False
        first_epoch = int(time.time())
        sender = AckedSender(tcp, dc, first_id=0).start()
        _until(lambda: len(sender.acked) > 300, "acks without ZooKeeper")
        # sealed batches wait: not one chunk PUT while the writer id is not registered
        _until(lambda: proc.status()["backlog"]["a"] >= 2, "batches sealed and held")
        assert riak.stats()["node_puts_total"] == 0
        assert proc.status()["events_pushed"] == {"a": 0}

        zk.start()
        _until(lambda: proc.http("/readyz")[0] == 200, "registered once ZooKeeper answers")
        assert writer_session(zk.hosts, "/late", WRITER) != 0
        sender.stop()
        _until(lambda: _drained(proc.status(), tmp_path), "everything pushed")
        _check_stored(riak, dc, range(first_epoch - 1, int(time.time()) + 2), set(sender.acked))
    finally:
        riak.close()
        zk.stop()


def _expire(hosts: str, client_id: tuple[int, bytes]) -> None:
    """Close a session from a second client attached to it (kazoo's old harness way)."""
    other = KazooClient(hosts=hosts, client_id=client_id)
    other.start(timeout=10)
    other.stop()
    other.close()


def test_a_session_expired_under_the_relocator(
    rig: Rig,
    *,
    zookeeper_server: ZooKeeperProcess,
    zookeeper: str,
) -> None:
    spool = rig.spool()
    tcp = free_port()
    cfg = write_config(
        rig.tmp_path / "r.toml",
        data_dir=rig.tmp_path / "data",
        clusters={"a": rig.devnode.url},
        tcp_port=tcp,
        metrics_port=free_port(),
        spool_dir=spool,
        writer_id=WRITER,
        zookeeper=(zookeeper_server.hosts, zookeeper),
        extra="spool_units = 4",
    )
    daemon = Relocator(load(cfg))  # in this process: the test needs its session password
    daemon.start()
    runner = threading.Thread(target=daemon.run, name="relocator-run")
    runner.start()
    sender = None
    try:
        zk = daemon.zk
        assert zk is not None
        _until(lambda: len(zk.owned()) == 4, "all units owned")
        first_epoch = int(time.time())
        sender = AckedSender(tcp, rig.dc, first_id=0).start()
        _until(lambda: len(sender.acked) > 300, "acks before the expiry")
        old = zk.client_id
        assert old is not None
        assert writer_session(zookeeper_server.hosts, zookeeper, WRITER) == old[0]

        deadline = time.monotonic() + 30
        while (now := zk.client_id) is None or now[0] == old[0]:
            assert time.monotonic() < deadline, "the session never expired"
            if now is not None:
                _expire(zookeeper_server.hosts, old)
            time.sleep(0.2)
        # a new session: the writer id registered again in it, the units claimed again
        _until(lambda: zk.active() and len(zk.owned()) == 4, "registered and owning again")
        new = zk.client_id
        assert new is not None and new[0] != old[0]
        assert writer_session(zookeeper_server.hosts, zookeeper, WRITER) == new[0]
        assert runner.is_alive()

        acked_at_expiry = len(sender.acked)
        drop_spool_file(spool, first_epoch, rig.dc, range(1_000_000, 1_000_400))
        _until(lambda: len(sender.acked) > acked_at_expiry + 300, "acks after the expiry")
        sender.stop()
        _until(lambda: _drained(daemon.status(), spool), "everything pushed")
        want = set(sender.acked) | set(range(1_000_000, 1_000_400))
        epochs = range(first_epoch - 1, int(time.time()) + 2)
        try:
            _check_stored(rig.riak, rig.dc, epochs, want)
        except AssertionError as e:  # say what the store and the relocator held
            raise AssertionError(
                f"{e}\n{_evidence(rig.riak, rig.dc, epochs, daemon.status())}"
            ) from None
        assert runner.is_alive()
    finally:
        if sender is not None:
            sender.stop()
        daemon.request_stop()
        runner.join(60)
    assert not runner.is_alive()
