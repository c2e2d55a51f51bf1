"""No event in two chunks of an epoch after a kill -9 between the chunk PUTs and the
metadata (issue 24, item 2; relocator/DESIGN.md, "Why a replay never stores an event
twice").

A proxy in front of the devnode lets chunk PUTs through and refuses metadata PUTs, so
the relocator's sealed batch is in its state store and its chunks in the store, but not
listed. Killed -9 there and restarted with the metadata allowed, the relocator pushes
the stored batch again (same keys, same bytes) and does not seal the same events a
second time from its journal, because the stored batch names the journal positions it
covers. The control runs the same with stored batches that do not name their
positions (a ``sitecustomize`` in the child): the replay seals the events into a
second batch, and each is then stored twice, in two chunks of the epoch.
"""

from __future__ import annotations

import time

import pytest
from relocator_rig import Rig

from devnode.testing import StoreProxy
from relocator.producer import TcpEmitter
from relocator.testing import stored_events, with_sitecustomize


class MetadataRefusingProxy(StoreProxy):
    """HTTP proxy to a store; while ``refusing`` is set, PUTs to the epochs bucket get
    503 and nothing is forwarded. Counts chunk PUTs and refusals."""

    def __init__(self, upstream: str) -> None:
        self.refusing = True
        self.refused = 0
        self.chunk_puts = 0
        super().__init__(upstream)

    def refuse(self, method: str, path: str) -> int | None:
        if method == "PUT" and "/buckets/epochs/" in path:
            if self.refusing:
                with self.lock:
                    self.refused += 1
                return 503
        elif method == "PUT" and "/buckets/events/" in path:
            with self.lock:
                self.chunk_puts += 1
        return None


#: Stored batches that do not name the journal positions they cover: the mechanism
#: under test, switched off in the child process.
_NO_POSITIONS = """
import array, dataclasses
import relocator.state
_get = relocator.state.State.get
def _get_without_positions(self, batch_id):
    b = _get(self, batch_id)
    return None if b is None else dataclasses.replace(b, positions=array.array("Q"))
relocator.state.State.get = _get_without_positions
"""


@pytest.mark.parametrize("positions", [True, False], ids=["covered", "control-uncovered"])
def test_kill9_between_chunks_and_metadata_stores_each_event_once(
    rig: Rig, positions: bool
) -> None:
    proxy = MetadataRefusingProxy(rig.devnode.url)
    proc, tcp = rig.relocator(
        {"a": proxy.url},
        env=None if positions else with_sitecustomize(rig.tmp_path / "site", _NO_POSITIONS),
        # the events stay in the active journal segment (a segment is deleted once its
        # frames are in stored batches: then there is nothing to replay at all)
        segment_max_s=60.0,
    )
    proc.start()
    first_epoch = int(time.time()) - 1
    emitter = TcpEmitter("127.0.0.1", tcp, dc=rig.dc)
    try:
        for i in range(600):
            assert emitter.emit({"id": i, "kind": "search"}, "web", "www" if i % 2 else "api")
        assert emitter.flush(20)
        deadline = time.monotonic() + 30
        while not (proxy.chunk_puts and proxy.refused >= 2):
            assert time.monotonic() < deadline, "the relocator never pushed its chunks"
            time.sleep(0.05)
        # chunks stored, metadata refused (the batch stays in the backlog): kill -9 here
        proc.kill()
        epochs = range(first_epoch, int(time.time()) + 2)
        assert stored_events(rig.riak, rig.dc, epochs) == ([], [])  # nothing listed yet
        proxy.refusing = False
        proc.start()
        deadline = time.monotonic() + 30
        while True:
            s = proc.status()
            if s["open_events"] == 0 and not any(s["backlog"].values()):
                break
            assert time.monotonic() < deadline, f"relocator did not drain: {s}"
            time.sleep(0.1)
    finally:
        emitter.close()
        proxy.close()
    ids = rig.stored_ids(range(first_epoch, int(time.time()) + 2))
    assert set(ids) == set(range(600)), "acknowledged events lost"
    twice = len(ids) - len(set(ids))
    if positions:
        assert twice == 0, f"{twice} events stored in two chunks of their epoch"
    else:  # the guarantee broken with the mechanism off: every event twice
        assert twice == 600
