from __future__ import annotations

import threading
from pathlib import Path

import pytest

from relocator.journal import Journal, JournalWriter, segment_of
from relocator.wire import Frame, encode_frame, parse_frame

pytestmark = pytest.mark.unit


def test_append_replay_and_positions(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    list(j.replay())
    p1 = j.append([b"one", b"two"])
    j.roll()
    p2 = j.append([b"three"])
    j.close()
    assert p1[0] < p1[1] < p2[0]
    assert segment_of(p2[0]) == segment_of(p1[0]) + 1
    again = Journal(tmp_path, segment_max_bytes=1 << 20)
    assert list(again.replay()) == list(zip(p1 + p2, [b"one", b"two", b"three"], strict=True))
    assert again.append([b"four"])[0] >> 40 == segment_of(p2[0]) + 1  # a fresh segment


def test_torn_tail_is_truncated_and_appends_continue(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    list(j.replay())
    j.append([b"kept"])
    j.append([b"torn-record"])
    j.close()
    seg = tmp_path / f"{j.segments()[-1]:012d}.seg"
    seg.write_bytes(seg.read_bytes()[:-4])  # a crash in the middle of the last write
    again = Journal(tmp_path, segment_max_bytes=1 << 20)
    assert [p for _, p in again.replay()] == [b"kept"]
    assert seg.stat().st_size == 8 + 4


def test_corrupt_older_segment_is_counted(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    list(j.replay())
    j.append([b"aaaa", b"bbbb"])
    j.roll()
    j.append([b"cccc"])
    j.close()
    first = tmp_path / f"{j.segments()[0]:012d}.seg"
    raw = bytearray(first.read_bytes())
    raw[-1] ^= 0xFF  # flip a bit of "bbbb"
    first.write_bytes(bytes(raw))
    again = Journal(tmp_path, segment_max_bytes=1 << 20)
    assert [p for _, p in again.replay()] == [b"aaaa", b"cccc"]
    assert again.corrupt_records == 1


def test_segment_rolls_at_size_and_delete(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=50)  # one 68-byte record per segment
    list(j.replay())
    for _ in range(5):
        j.append([b"x" * 60])
    assert len(j.segments()) == 5
    with pytest.raises(ValueError, match="active"):
        j.delete(j.active_segment)
    j.delete(j.segments()[0])
    assert len(j.segments()) == 4


def test_writer_acknowledges_only_after_the_sink(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    list(j.replay())
    seen: list[bytes] = []
    order: list[str] = []
    done = threading.Event()

    def sink(positions: list[int], frames: list[Frame]) -> None:
        seen.extend(f.document for f in frames)
        order.append("sink")

    w = JournalWriter(j, sink, batch_max=10, queue_max=100, roll_s=60)
    w.start()

    def ack(n: int) -> None:
        order.append(f"ack{n}")
        done.set()

    raw = [encode_frame(1, "d", "t", "", b"a"), encode_frame(1, "d", "t", "", b"b")]
    w.submit(raw, [parse_frame(r) for r in raw], ack, block=True)
    assert done.wait(5)
    w.stop()
    assert seen == [b"a", b"b"]
    assert order == ["sink", "ack2"]
    assert [p for _, p in Journal(tmp_path, segment_max_bytes=1 << 20).replay()] == raw
