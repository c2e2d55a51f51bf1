"""Idempotent producers without sockets: the high-mark table (resends recognised, idle
expiry, the cap), the hello, and what the journal keeps of producers (range trailers,
each segment's table record) so that recovery rebuilds the high marks."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from relocator.errors import MalformedFrame
from relocator.journal import Journal, JournalWriter, table_prologue
from relocator.producers import (
    ProducerTable,
    decode_meta,
    encode_range,
    encode_table,
    is_meta,
)
from relocator.wire import (
    LENGTH,
    FrameParser,
    Received,
    encode_frame,
    encode_hello,
    scan_stream,
    skip_frames,
    take_hello,
)

P1 = b"\x01" * 16
P2 = b"\x02" * 16


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _table(clock: Clock, *, idle_s: float = 60.0, cap: int = 10) -> ProducerTable:
    return ProducerTable(idle_s=idle_s, max_producers=cap, clock=clock)


def test_new_frames_are_admitted_and_resends_recognised() -> None:
    t = _table(Clock())
    assert t.admit(P1, 0, 100) == 0  # new
    assert t.high(P1) == 100
    assert t.admit(P1, 0, 100) == 100  # the same range again: all held
    assert t.admit(P1, 40, 10) == 10
    assert t.admit(P1, 60, 80) == 40  # a resend overlapping a prefix: cut 40 ...
    assert t.high(P1) == 100  # ... nothing admitted yet
    assert t.admit(P1, 100, 40) == 0  # ... then the rest is new
    assert t.high(P1) == 140
    assert t.admit(P2, 0, 5) == 0  # producers are independent
    assert t.admit(P1, 500, 1) == 0  # a gap (frames never seen): taken as new
    assert t.high(P1) == 501


def test_idle_producers_are_forgotten() -> None:
    clock = Clock()
    forgotten: list[str] = []
    t = ProducerTable(idle_s=60, max_producers=10, clock=clock, on_forget=forgotten.append)
    t.admit(P1, 0, 10)
    clock.now += 30
    t.admit(P2, 0, 10)
    clock.now += 31  # P1 idle 61 s, P2 31 s
    t.admit(P2, 10, 1)
    assert t.high(P1) is None
    assert t.high(P2) == 11
    assert forgotten == ["idle"]
    assert t.admit(P1, 0, 10) == 0  # forgotten: its resend is taken as new


def test_the_least_recently_seen_goes_above_the_cap() -> None:
    clock = Clock()
    forgotten: list[str] = []
    t = ProducerTable(idle_s=3600, max_producers=3, clock=clock, on_forget=forgotten.append)
    ids = [bytes([i]) * 16 for i in range(4)]
    for i in ids[:3]:
        t.admit(i, 0, 1)
        clock.now += 1
    t.admit(ids[0], 1, 1)  # seen again: now the most recent
    t.admit(ids[3], 0, 1)
    assert len(t) == 3
    assert t.high(ids[1]) is None
    assert {p for p, _ in t.items()} == {ids[0], ids[2], ids[3]}
    assert forgotten == ["cap"]


def test_journal_producer_frames_round_trip() -> None:
    rng = encode_range(P1, 7, 3)
    assert LENGTH.unpack_from(rng)[0] == len(rng) - 4
    assert is_meta(rng[4:])
    assert decode_meta(rng[4:]) == [(P1, 10)]
    table = encode_table([(P1, 10), (P2, 2**64 - 1)])
    assert decode_meta(table[4:]) == [(P1, 10), (P2, 2**64 - 1)]
    assert decode_meta(encode_table([])[4:]) == []
    assert not is_meta(encode_frame(1, "d", "t", "", b"x"))
    for bad in (rng[4:-1], table[4:-1], b"RP\x02" + rng[7:], b"RX"):
        with pytest.raises(ValueError, match="not a producer frame"):
            decode_meta(bad)


def test_the_hello_and_a_first_frame_are_told_apart() -> None:
    hello = encode_hello(P1, 42)
    for cut in range(len(hello)):
        assert take_hello(hello[:cut]) is None, cut  # not enough bytes to tell
    got = take_hello(hello + b"more")
    assert got is not None
    h, size = got
    assert h is not None
    assert (h.version, h.producer_id, h.first_seq, size) == (2, P1, 42, len(hello))
    frame = encode_frame(1, "d", "t", "", b"x")
    assert take_hello(LENGTH.pack(len(frame)) + frame) == (None, 0)
    with pytest.raises(MalformedFrame, match="hello of 5 bytes"):
        take_hello(LENGTH.pack(5) + b"RH\x02\x00\x00")
    old = bytearray(hello)
    old[6] = 1
    with pytest.raises(MalformedFrame, match="stream version 1"):
        take_hello(bytes(old))
    with pytest.raises(ValueError, match="16-byte"):
        encode_hello(b"short", 0)


def test_skip_frames_walks_length_prefixes() -> None:
    frames = [encode_frame(1, "d", "t", "", bytes([i]) * i) for i in range(1, 5)]
    stream = b"".join(LENGTH.pack(len(f)) + f for f in frames)
    assert skip_frames(stream, 0, 0) == 0
    assert skip_frames(stream, 0, 2) == 8 + len(frames[0]) + len(frames[1])
    assert skip_frames(stream, 0, 4) == len(stream)


def _received(docs: list[bytes]) -> Received:
    raw = [encode_frame(1, "d", "t", "", d) for d in docs]
    stream = b"".join(LENGTH.pack(len(r)) + r for r in raw)
    received, used = scan_stream(stream, 10_000, FrameParser(), compiled=False)
    assert used == len(stream)
    return received


def _events(doc_count: int, tag: int) -> list[bytes]:
    # uncompressed Sereal hashes of one key: valid events for intake's screen
    import sereal_codec as sereal

    return [sereal.encode({"i": tag * 1000 + i}) for i in range(doc_count)]


def _frames_of(r: Received) -> list[bytes]:
    out = []
    for o in r.groups[0].offsets:
        (n,) = LENGTH.unpack_from(r.data, o)
        out.append(bytes(r.data[o + 4 : o + 4 + n]))
    return out


def test_trailers_keep_event_positions_and_replay_gives_the_ranges(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    list(j.replay())
    a, b = _received(_events(3, 1)), _received(_events(2, 2))
    bases = j.append_blocks([a.data, b.data], [encode_range(P1, 0, 3), b""])
    j.close()
    ranges: list[bytes] = []
    replayed = list(Journal(tmp_path, segment_max_bytes=1 << 20).replay(ranges.append))
    assert [p for _, p in replayed] == [
        bytes(a.data[o + 4 : o + 4 + LENGTH.unpack_from(a.data, o)[0]]) for o in a.groups[0].offsets
    ] + [
        bytes(b.data[o + 4 : o + 4 + LENGTH.unpack_from(b.data, o)[0]]) for o in b.groups[0].offsets
    ]
    assert [pos for pos, _ in replayed][:3] == [bases[0] + o for o in a.groups[0].offsets]
    assert [decode_meta(r) for r in ranges] == [[(P1, 3)]]
    # without a callback the producer frames are dropped, never yielded as events
    assert len(list(Journal(tmp_path, segment_max_bytes=1 << 20).replay())) == 5


def test_each_new_segment_carries_the_durable_high_marks(tmp_path: Path) -> None:
    """The writer raises its table after the fdatasync; each segment it opens starts
    with that table, so deleting older segments keeps every producer's high mark."""
    durable = ProducerTable(idle_s=3600, max_producers=100)
    j = Journal(tmp_path, segment_max_bytes=1 << 20, prologue=table_prologue(durable))
    list(j.replay())
    w = JournalWriter(j, lambda blocks: None, batch_max=100, queue_max=10, roll_s=3600,
                      producers=durable)  # fmt: skip
    w.start()
    done = threading.Event()
    w.submit(_received(_events(4, 1)), lambda n: done.set(), block=True, producer=(P1, 10, 5))
    assert done.wait(5)
    assert durable.high(P1) == 15
    first = j.active_segment
    w.roll_requested.set()
    done.clear()
    w.submit(_received(_events(2, 2)), lambda n: done.set(), block=True, producer=(P2, 0, 2))
    assert done.wait(5)
    w.stop()
    assert j.active_segment == first + 1
    j.close()
    j.delete(first)  # every frame of it sealed: the coordinator deletes it
    highs: dict[bytes, int] = {}

    def meta(frame: bytes) -> None:
        for p, h in decode_meta(frame):
            highs[p] = max(highs.get(p, 0), h)

    events = list(Journal(tmp_path, segment_max_bytes=1 << 20).replay(meta))
    assert len(events) == 2
    assert highs == {P1: 15, P2: 2}


def test_a_record_with_a_trailer_is_found_again_after_corruption(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    list(j.replay())
    a, b = _received(_events(3, 1)), _received(_events(3, 2))
    j.append_blocks([a.data, b.data], [encode_range(P1, 0, 3), encode_range(P1, 3, 3)])
    j.close()
    seg = next(tmp_path.glob("*.blk"))
    data = bytearray(seg.read_bytes())
    data[20] ^= 0xFF  # inside the first record
    seg.write_bytes(bytes(data))
    ranges: list[bytes] = []
    events = list(Journal(tmp_path, segment_max_bytes=1 << 20).replay(ranges.append))
    assert len(events) == 3
    assert [decode_meta(r) for r in ranges] == [[(P1, 6)]]


def test_an_idle_journal_does_not_roll_for_its_table_record(tmp_path: Path) -> None:
    durable = ProducerTable(idle_s=3600, max_producers=100)
    durable.note(P1, 5)
    j = Journal(tmp_path, segment_max_bytes=1 << 20, prologue=table_prologue(durable))
    list(j.replay())
    j.roll()
    assert j.segments() == [0]
    assert not j.roll_due(0.0)  # only the table record: nothing to roll for
