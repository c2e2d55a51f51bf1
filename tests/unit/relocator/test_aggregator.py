from __future__ import annotations

from relocator.aggregator import Aggregator
from relocator.metrics import Metrics
from relocator.wire import LENGTH, Frame, FrameParser, encode_frame, parse_frame, scan_stream


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


def test_received_blocks_group_like_single_frames() -> None:
    """add_received (the intake path) and add (the recovery path) make the same groups."""
    clock = Clock(100.5)
    raw = [
        encode_frame(100, "d", "web", "", b"a"),
        encode_frame(100, "e", "web", "", b"b"),
        encode_frame(100, "d", "lb", "", b"c"),
        encode_frame(100, "d", "web", "", b"d"),
    ]
    stream = bytearray(b"".join(LENGTH.pack(len(r)) + r for r in raw))
    received, _ = scan_stream(stream, 1000, FrameParser())
    base = (2 << 40) | 8
    by_block = Aggregator(grace_s=1.0, max_hold_s=30, metrics=Metrics(), clock=clock)
    by_block.add_received([(base, received)])
    offsets = [0, 4 + len(raw[0])]
    offsets += [offsets[-1] + 4 + len(raw[1]), offsets[-1] + 8 + len(raw[1]) + len(raw[2])]
    one_by_one = Aggregator(grace_s=1.0, max_hold_s=30, metrics=Metrics(), clock=clock)
    one_by_one.add([base + o for o in offsets], [parse_frame(r) for r in raw])
    a, b = by_block.due(float("inf")), one_by_one.due(float("inf"))
    assert [(g.epoch, g.dc, g.docs, sorted(g.positions), g.segments) for g in a] == [
        (g.epoch, g.dc, g.docs, sorted(g.positions), g.segments) for g in b
    ]
    assert a[0].docs == {("web", ""): [b"a", b"d"], ("lb", ""): [b"c"]}
    assert a[0].segments == {2: 3}


def test_late_blocks_are_counted_per_event() -> None:
    clock = Clock(100.5)
    m = Metrics()
    agg = Aggregator(grace_s=0.0, max_hold_s=30, metrics=m, clock=clock)
    agg.add([1], [frame(100)])
    clock.t = 102.0  # epoch 100 closed at 101
    assert [g.count for g in agg.due()] == [1]
    raw = [encode_frame(100, "d", "web", "", b"x")] * 3
    stream = bytearray(b"".join(LENGTH.pack(len(r)) + r for r in raw))
    agg.add_received([(0, scan_stream(stream, 1000, FrameParser())[0])])
    assert m.late._value.get() == 3
    (late,) = agg.due()
    assert late.late == 3 and late.count == 3


def test_groups_handed_out_count_as_open_until_sealed() -> None:
    """Between ``due`` and ``sealed`` the events are in no open group and in no stored
    batch yet: they must still count, or a status read then says "drained"."""
    agg = Aggregator(grace_s=1.0, max_hold_s=30, metrics=Metrics(), clock=Clock(100.5))
    agg.add([1, 2, 3], [frame(100), frame(100), frame(101)])
    first = agg.due(102.0)
    assert [g.count for g in first] == [2]
    assert agg.open_positions() == 3
    rest = agg.due(float("inf"))
    agg.sealed(first)
    assert agg.open_positions() == 1
    agg.sealed(rest)
    assert agg.open_positions() == 0
