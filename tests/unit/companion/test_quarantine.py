"""The quarantine's policy and lanes (companion/quarantine.py), on its own: which
substreams run apart, one run at a time per lane, a full lane refuses, stop drops."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from companion.quarantine import LaneItem, Lanes, Trust
from eventstore.names import ChunkKey
from substreams.api import Substream


def sub(name: str, version: str = "v1") -> Substream:
    return Substream(name=name, function=lambda events, ctx: None, version=version)


def item(s: Substream, chunk: int = 0) -> LaneItem:
    return LaneItem(s, ChunkKey(1, "dc", "t", "", chunk), [{"i": chunk}], deadline=0.0)


def trust(failing: Callable[[str], bool] = lambda name: False) -> Trust:
    return Trust(failing=failing, rejoin_after=3)


def lanes(run: Callable[[LaneItem], None] = lambda item: None) -> Lanes:
    return Lanes(run=run, depth=2)


def test_a_new_substream_is_trusted_after_its_first_ok_run_and_a_new_version_is_not() -> None:
    q = trust()
    good = sub("good")
    assert not q.trusted(good)
    q.note(good, ok=True)
    assert q.trusted(good)
    assert not q.trusted(sub("good", "v2"))


def test_after_a_failure_it_needs_ok_runs_in_a_row_to_rejoin() -> None:
    q = trust()
    flaky = sub("flaky")
    q.note(flaky, ok=True)
    q.note(flaky, ok=False)
    assert not q.trusted(flaky) and q.failed(flaky)
    q.note(flaky, ok=True)
    q.note(flaky, ok=True)
    assert not q.trusted(flaky)
    q.note(flaky, ok=False)  # starts again
    for _ in range(3):
        assert not q.trusted(flaky)
        q.note(flaky, ok=True)
    assert q.trusted(flaky)


def test_a_failure_in_another_worker_quarantines_it_here() -> None:
    failing: set[str] = set()
    q = trust(failing=failing.__contains__)
    good = sub("good")
    q.note(good, ok=True)
    failing.add("good")
    assert not q.trusted(good) and q.failed(good)
    failing.clear()  # its next ok run, anywhere, removed the node's count
    assert q.trusted(good)


def test_a_lane_runs_one_item_at_a_time_in_order_and_refuses_when_full() -> None:
    release = threading.Event()
    started = threading.Semaphore(0)
    ran: list[tuple[str, int]] = []
    active: dict[str, int] = {}
    overlapped: list[str] = []

    def run(it: LaneItem) -> None:
        active[it.sub.name] = active.get(it.sub.name, 0) + 1
        if active[it.sub.name] > 1:
            overlapped.append(it.sub.name)
        started.release()
        release.wait(5)
        ran.append((it.sub.name, it.key.chunk))
        active[it.sub.name] -= 1

    q = lanes(run=run)
    bad = sub("bad")  # failed: depth 2
    assert q.submit(item(bad, 0)) is None
    assert started.acquire(timeout=5)
    assert q.submit(item(bad, 1)) is None
    assert q.submit(item(bad, 2)) is None
    assert q.submit(item(bad, 3)) == "full"
    assert q.apart() == {"bad": 2}  # waiting, besides the one running
    new = sub("new")  # a lane of its own, beside
    assert q.submit(item(new, 0)) is None
    release.set()
    deadline = time.monotonic() + 5
    while len(ran) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert q.stop(5) == 0
    assert [c for n, c in ran if n == "bad"] == [0, 1, 2]
    assert [c for n, c in ran if n == "new"] == [0]
    assert overlapped == []  # never two runs of one lane at once
    assert q.apart() == {}


def test_stop_drops_what_waits_and_the_run_in_progress_ends() -> None:
    release = threading.Event()
    started = threading.Event()
    ran: list[int] = []

    def run(it: LaneItem) -> None:
        started.set()
        release.wait(5)
        ran.append(it.key.chunk)

    q = lanes(run=run)
    s = sub("slow")
    assert q.submit(item(s, 0)) is None
    assert started.wait(5)
    assert q.submit(item(s, 1)) is None
    assert q.submit(item(s, 2)) is None
    threading.Timer(0.1, release.set).start()
    assert q.stop(5) == 2
    assert ran == [0]
    assert q.submit(item(s, 3)) == "no thread"  # stopped: the caller runs it itself


def test_a_lane_frees_the_events_it_held_and_survives_a_failing_run() -> None:
    seen: list[LaneItem] = []
    done = threading.Event()

    def run(it: LaneItem) -> None:
        seen.append(it)
        if it.key.chunk == 0:
            raise RuntimeError("a bug in the run")
        done.set()

    q = lanes(run=run)
    s = sub("s")
    assert q.submit(item(s, 0)) is None
    assert q.submit(item(s, 1)) is None
    assert done.wait(5)
    q.stop(5)
    assert [it.key.chunk for it in seen] == [0, 1]
    assert all(it.source == [] for it in seen)


def test_a_lane_thread_waits_for_work_a_while_then_ends() -> None:
    threads: list[threading.Thread] = []
    q = Lanes(run=lambda it: threads.append(threading.current_thread()), depth=2, idle_s=0.3)
    s = sub("s")
    first = item(s, 0)
    assert q.submit(first) is None
    assert first.done.wait(5)
    second = item(s, 1)
    assert q.submit(second) is None  # served by the same, idle thread
    assert second.done.wait(5)
    assert threads[0] is threads[1]
    assert q.apart() == {"s": 0}
    deadline = time.monotonic() + 5
    while q.apart() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert q.apart() == {}
    third = item(s, 2)
    assert q.submit(third) is None  # a new thread
    assert third.done.wait(5)
    assert threads[2] is not threads[0]
    q.stop(5)
