"""The quarantine's hand-off (companion/quarantine.py, ``hand_off``): one chunk's
substreams sorted between the shared child and the lanes, returned as a value."""

from __future__ import annotations

import threading

from companion.quarantine import LaneItem, Lanes, Trust, hand_off
from eventstore.names import ChunkKey
from substreams.api import Substream

KEY = ChunkKey(1_700_000_000, "dc1", "web", "main", 0)


def sub(name: str) -> Substream:
    return Substream(name=name, function=lambda events, ctx: None, version="v1")


def test_trusted_ones_stay_new_ones_are_waited_for_failed_ones_not_and_a_full_lane_refuses() -> (
    None
):
    release = threading.Event()
    started = threading.Semaphore(0)
    ran: list[str] = []

    def run(item: LaneItem) -> None:
        started.release()
        release.wait(5)
        ran.append(item.sub.name)

    trusted, new, failed = sub("trusted"), sub("new"), sub("failed")
    trust = Trust(failing={"failed"}.__contains__, rejoin_after=3)
    trust.note(trusted, ok=True)
    lanes = Lanes(run=run, depth=1)
    try:
        first = hand_off(trust, lanes, KEY, [trusted, new, failed], [], deadline=9.0, audit=True)
        assert first.here == (trusted,)
        assert first.handed == ("new", "failed")
        assert [(i.sub.name, i.key, i.deadline, i.audit) for i in first.waits] == [
            ("new", KEY, 9.0, True)
        ]
        assert first.refused == ()
        assert started.acquire(timeout=5) and started.acquire(timeout=5)  # both lanes run
        # Each lane runs one and holds one more: the next chunk's fills them...
        second = hand_off(trust, lanes, KEY, [new, failed], [], deadline=9.0, audit=False)
        assert second.handed == ("new", "failed")
        # ... and the one after finds them full.
        third = hand_off(trust, lanes, KEY, [failed], [], deadline=9.0, audit=False)
        assert third.here == () and third.handed == ()
        ((refused, reason),) = third.refused
        assert refused == failed
        assert (
            reason.startswith("quarantined: failed runs apart")
            and "queue of chunks is full" in reason
        )
        assert lanes.stop(0) == 2  # the second chunk's, waiting behind the first's
    finally:
        release.set()
        lanes.stop(5)
    assert sorted(ran) == ["failed", "new"]


def test_when_no_lane_thread_can_start_the_substream_runs_with_the_others() -> None:
    lanes = Lanes(run=lambda item: None, depth=4)
    lanes.stop(1)  # a stopped engine's lanes start no thread
    new = sub("new")
    got = hand_off(Trust(failing=lambda name: False, rejoin_after=3), lanes, KEY, [new], [],
                   deadline=0.0, audit=False)  # fmt: skip
    assert got.here == (new,) and got.handed == () and got.waits == () and got.refused == ()
