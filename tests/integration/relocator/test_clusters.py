"""Every event goes to every cluster; a down cluster gets a backlog and catches up
without holding back the others."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from devnode.testing import DevnodeProcess
from eventstore.riak import Retry, RiakClient
from relocator.testing import AckedSender, RelocatorProcess, relocator_process, stored_events


def _ids(url: str, dc: str, epochs: range) -> list[int]:
    with RiakClient([url], retry=Retry(max_tries=2, deadline_s=5)) as client:
        events, unreadable = stored_events(client, dc, epochs)
    assert not unreadable, unreadable
    return [e["id"] for e in events]


def _until(pred: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return bool(pred())


def test_down_cluster_catches_up(
    tmp_path: Path,
    devnode_factory: type[DevnodeProcess],
    dc: str,
    relocators: list[RelocatorProcess],
) -> None:
    a = devnode_factory(tmp_path / "a" / "data").start()
    b = devnode_factory(tmp_path / "b" / "data").start()
    proc, tcp = relocator_process(tmp_path, {"a": a.url, "b": b.url})
    relocators.append(proc.start())
    first = int(time.time()) - 1

    b.stop()  # cluster b goes down
    sender = AckedSender(tcp, dc, first_id=0).start()
    time.sleep(2.0)
    sender.stop()
    acked = set(sender.acked)
    assert len(acked) > 200
    epochs = range(first, int(time.time()) + 2)
    # a is not held back by b
    assert _until(lambda: acked <= set(_ids(a.url, dc, epochs)), 15), "cluster a fell behind"
    backlog = proc.status()["backlog"]
    assert backlog["a"] == 0
    assert backlog["b"] > 0, backlog
    assert 'relocator_backlog_epochs{cluster="b"}' in proc.metrics()

    # the relocator restarts meanwhile (its backlog for b is durable)
    proc.kill()
    proc.start()
    assert proc.status()["backlog"]["b"] > 0

    b_again = devnode_factory(b.data_dir, port=b.port).start()  # b comes back
    assert _until(lambda: proc.status()["backlog"]["b"] == 0, 30), proc.status()
    ids_b = _ids(b_again.url, dc, epochs)
    assert acked <= set(ids_b)
    assert len(ids_b) == len(set(ids_b))
    ids_a = _ids(a.url, dc, epochs)
    assert sorted(ids_a) == sorted(ids_b), "the clusters hold different events"
    assert proc.stop() == 0
