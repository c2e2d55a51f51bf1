"""``/status`` never shows acknowledged events nowhere (relocator/DESIGN.md, failure
scenario 23): while a group is being sealed its events are in no open group and in no
stored batch yet, and "0 open events, 0 batches, empty backlog" (what operators, the
benches and the tests read as "everything is pushed") must not be true then."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from devnode.testing import DevnodeProcess
from eventstore.riak import RiakClient
from relocator.aggregator import Group
from relocator.batch import Batch
from relocator.daemon import Relocator
from relocator.producer import TcpEmitter
from relocator.settings import load, parse_cluster_option
from relocator.testing import stored_events


def test_events_being_sealed_count_as_open(
    tmp_path: Path, session_devnode: DevnodeProcess, riak: RiakClient, dc: str
) -> None:
    settings = load(
        None,
        data_dir=tmp_path / "data",
        tcp_listen="127.0.0.1:0",
        udp_listen="",
        metrics_listen="",
        grace_s=600.0,  # nothing closes on its own: the test ticks with now=inf
        max_hold_s=600.0,
        clusters=(parse_cluster_option(f"a={session_devnode.url}"),),
    )
    r = Relocator(settings)
    r.start()
    try:
        assert r.tcp is not None
        emitter = TcpEmitter("127.0.0.1", r.tcp.port, dc=dc)
        epoch = int(time.time())
        for i in range(100):
            emitter.emit({"id": i}, "web", epoch=epoch)
        assert emitter.flush(10)
        emitter.close()
        assert r.status()["open_events"] == 100

        entered, release = threading.Event(), threading.Event()
        seal_all = r.sealer.seal_all

        def slow_seal_all(groups: list[Group], pool: Any = None) -> list[Batch]:
            entered.set()
            assert release.wait(10)
            return seal_all(groups, pool)

        r.sealer.seal_all = slow_seal_all  # type: ignore[method-assign]
        ticker = threading.Thread(target=r.tick, kwargs={"now": float("inf")})
        ticker.start()
        try:
            assert entered.wait(10)
            during = r.status()
        finally:
            release.set()
            ticker.join(10)
        assert (during["open_events"], during["batches"]) == (100, 0), during
        after = r.status()
        assert (after["open_events"], after["batches"]) == (0, 1), after

        deadline = time.monotonic() + 15
        while len(stored_events(riak, dc, range(epoch, epoch + 1))[0]) < 100:
            assert time.monotonic() < deadline, r.status()
            r.tick()
            time.sleep(0.05)
    finally:
        r.request_stop()
        r.shutdown()
