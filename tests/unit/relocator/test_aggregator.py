from __future__ import annotations

import pytest

from relocator.aggregator import Aggregator
from relocator.metrics import Metrics
from relocator.wire import Frame, encode_frame, parse_frame

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def frame(epoch: int, dc: str = "d", type_: str = "web", subtype: str = "") -> Frame:
    return parse_frame(encode_frame(epoch, dc, type_, subtype, b"doc"))


def test_groups_close_after_the_grace_window() -> None:
    clock = Clock(100.2)
    m = Metrics()
    agg = Aggregator(grace_s=2.0, max_hold_s=30, metrics=m, clock=clock)
    agg.add([1, 2, 3], [frame(100), frame(100, subtype="s"), frame(100, dc="e")])
    assert agg.due() == []
    clock.t = 102.9
    assert agg.due() == []
    clock.t = 103.0
    groups = agg.due()
    assert [(g.epoch, g.dc, g.count) for g in groups] == [(100, "d", 2), (100, "e", 1)]
    assert sorted(groups[0].docs) == [("web", ""), ("web", "s")]
    assert m.late._value.get() == 0


def test_late_events_become_an_extra_group_and_are_counted() -> None:
    clock = Clock(100.5)
    m = Metrics()
    agg = Aggregator(grace_s=1.0, max_hold_s=30, metrics=m, clock=clock)
    agg.add([1], [frame(100)])
    clock.t = 102.0
    assert len(agg.due()) == 1
    clock.t = 150.0
    agg.add([2, 3], [frame(100), frame(100)])
    late = agg.due()
    assert [(g.epoch, g.count, g.late) for g in late] == [(100, 2, 2)]
    assert m.late._value.get() == 2


def test_future_epochs_are_held_at_most_max_hold() -> None:
    clock = Clock(100.0)
    agg = Aggregator(grace_s=1.0, max_hold_s=5.0, metrics=Metrics(), clock=clock)
    agg.add([1], [frame(10_000)])
    clock.t = 104.9
    assert agg.due() == []
    clock.t = 105.0
    assert [g.epoch for g in agg.due()] == [10_000]


def test_recovered_frames_close_at_once_and_are_not_late() -> None:
    clock = Clock(500.0)
    m = Metrics()
    agg = Aggregator(grace_s=1.0, max_hold_s=5.0, metrics=m, clock=clock)
    raw = [encode_frame(100, "d", "web", "", b"x"), encode_frame(499, "d", "web", "", b"y")]
    agg.add_raw([1, 2], raw)
    assert [g.epoch for g in agg.due()] == [100, 499]
    assert m.late._value.get() == 0


def test_malformed_journal_record_is_counted() -> None:
    m = Metrics()
    agg = Aggregator(grace_s=1.0, max_hold_s=5.0, metrics=m, clock=Clock(0))
    agg.add_raw([1], [b"garbage"])
    assert m.dropped.labels("malformed")._value.get() == 1
    assert agg.open_positions() == 0
