"""tail through a real devnode: in order, resumable from a saved position losing and
repeating nothing, waiting a bounded time for late metadata, reporting what it skipped."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from consumer_helpers import write_epoch

from consumer_lib import EventsClient, PositionError
from eventstore.riak import RiakClient


def spec(epoch: int) -> dict[tuple[str, str], list[list[dict[str, object]]]]:
    return {("web", "app"): [[{"epoch": epoch, "i": i} for i in range(2)]]}


def test_tail_resumes_from_its_position_losing_and_repeating_nothing(
    client: EventsClient, riak: RiakClient, dc: str, tmp_path: Path
) -> None:
    base = int(time.time()) - 60
    missing = base + 3
    for e in range(base, base + 8):
        if e != missing:
            write_epoch([riak], e, dc, spec(e))
    position = tmp_path / "tail.json"
    delivered: list[int] = []

    def follow(stop_after: int | None) -> None:
        with client.tail(
            dc, position=position, start=base, end=base + 8, lag_s=0, late_wait_s=0.5
        ) as tail:
            for epoch in tail:
                assert epoch.dc == dc
                if not epoch.skipped:
                    assert [e["epoch"] for e in epoch.events] == [epoch.epoch] * 2
                delivered.append(epoch.epoch)
                if len(delivered) == stop_after:
                    break  # a clean stop: this epoch was handled

    follow(stop_after=3)
    assert json.loads(position.read_text())["next_epoch"] == base + 3
    # a consumer that dies while handling an epoch gets it again
    with (
        pytest.raises(RuntimeError),
        client.tail(dc, position=position, end=base + 8, lag_s=0, late_wait_s=0.5) as tail,
    ):
        for epoch in tail:
            assert epoch.epoch == base + 3 and epoch.skipped and not epoch.found
            assert tail.skipped == [missing]
            raise RuntimeError("consumer crashed")
    assert json.loads(position.read_text())["next_epoch"] == base + 3
    follow(stop_after=None)  # the rest, to `until`
    assert delivered == list(range(base, base + 8))
    assert json.loads(position.read_text())["next_epoch"] == base + 8


def test_tail_waits_a_bounded_time_for_late_metadata(
    client: EventsClient, riak: RiakClient, dc: str
) -> None:
    first = int(time.time()) + 1
    # first's metadata arrives late (after its due time), first + 1's never
    late = ([riak], first, dc, spec(first))
    writer = threading.Timer(first + 1.6 - time.time(), write_epoch, late)
    writer.start()
    try:
        with client.tail(
            dc, start=first, end=first + 2, lag_s=0.2, late_wait_s=2.0, poll_s=0.1
        ) as tail:
            got = [(e.epoch, e.found, e.skipped, time.time()) for e in tail]
    finally:
        writer.cancel()
    assert [g[:3] for g in got] == [(first, True, False), (first + 1, False, True)]
    assert got[0][3] >= first + 1.6  # it waited for the late metadata ...
    assert got[1][3] >= first + 2 + 0.2 + 2.0  # ... and gave up on the missing one in time
    assert tail.skipped == [first + 1]


def test_position_of_another_dc_is_refused(client: EventsClient, tmp_path: Path) -> None:
    position = tmp_path / "p.json"
    position.write_text(json.dumps({"dc": "elsewhere", "next_epoch": 5}))
    with pytest.raises(PositionError) as info:
        client.tail("dc1", position=position)
    assert "elsewhere" in str(info.value)


def test_tail_substream_delivers_each_epochs_results(
    client: EventsClient, riak: RiakClient, dc: str, tmp_path: Path
) -> None:
    base = int(time.time()) - 30
    write_epoch([riak], base, dc, spec(base))
    write_epoch([riak], base + 2, dc, {("cron", ""): [[{"i": 1}]], **spec(base + 2)})
    position = tmp_path / "sub.json"
    with client.tail_substream(
        "event_counts", dc, position=position, start=base, end=base + 3, lag_s=0, late_wait_s=0
    ) as tail:
        got = [
            (e.epoch, e.skipped, [(r.type, r.served, r.result["total"]) for r in e.results])
            for e in tail
        ]
    assert got == [
        (base, False, [("web", "fallback", 2)]),
        (base + 1, True, []),
        (base + 2, False, [("cron", "fallback", 1), ("web", "fallback", 2)]),
    ]
    assert json.loads(position.read_text())["next_epoch"] == base + 3
