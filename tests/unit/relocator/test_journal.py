from __future__ import annotations

import threading
import time
import zlib
from pathlib import Path

import pytest

from relocator.errors import JournalFormatError
from relocator.journal import Journal, JournalWriter, segment_of
from relocator.wire import LENGTH, FrameParser, Received, encode_frame, scan_stream


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
    seg = tmp_path / f"{j.segments()[-1]:012d}.blk"
    seg.write_bytes(seg.read_bytes()[:-4])  # a crash in the middle of the last write
    again = Journal(tmp_path, segment_max_bytes=1 << 20)
    assert [p for _, p in again.replay()] == [b"kept"]
    assert seg.stat().st_size == 8 + 4 + 4  # record header, frame length, b"kept"


def test_corrupt_older_segment_is_counted(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    list(j.replay())
    j.append([b"aaaa"])
    j.append([b"bbbb"])  # a record of its own: a bad CRC loses its whole block
    j.roll()
    j.append([b"cccc"])
    j.close()
    first = tmp_path / f"{j.segments()[0]:012d}.blk"
    raw = bytearray(first.read_bytes())
    raw[-1] ^= 0xFF  # flip a bit of "bbbb"
    first.write_bytes(bytes(raw))
    again = Journal(tmp_path, segment_max_bytes=1 << 20)
    assert [p for _, p in again.replay()] == [b"aaaa", b"cccc"]
    assert again.corrupt_records == 1


def test_segment_rolls_at_size_and_delete(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=50)  # one 72-byte record per segment
    list(j.replay())
    for _ in range(5):
        j.append([b"x" * 60])
    assert len(j.segments()) == 5
    with pytest.raises(ValueError, match="active"):
        j.delete(j.active_segment)
    j.delete(j.segments()[0])
    assert len(j.segments()) == 4


def test_blocks_are_records_and_frames_have_positions(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    list(j.replay())
    frames = [b"a" * 3, b"bb", b"c" * 10]
    block = b"".join(LENGTH.pack(len(f)) + f for f in frames)
    bases = j.append_blocks([block, block[:7]])  # the second: only the first frame
    j.close()
    assert bases[1] == bases[0] + len(block) + 8
    again = list(Journal(tmp_path, segment_max_bytes=1 << 20).replay())
    assert again == [
        (bases[0], frames[0]),
        (bases[0] + 7, frames[1]),
        (bases[0] + 13, frames[2]),
        (bases[1], frames[0]),
    ]


def test_a_record_that_is_not_frames_is_corrupt(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    list(j.replay())
    j.append([b"good"])
    j.append_blocks([LENGTH.pack(99) + b"short"])  # right CRC, wrong framing
    j.roll()
    j.append([b"next"])
    j.close()
    again = Journal(tmp_path, segment_max_bytes=1 << 20)
    assert [p for _, p in again.replay()] == [b"good", b"next"]
    assert again.corrupt_records == 1


def test_writer_acknowledges_only_after_the_sink(tmp_path: Path) -> None:
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    list(j.replay())
    seen: list[bytes] = []
    bases: list[int] = []
    order: list[str] = []
    done = threading.Event()

    def sink(blocks: list[tuple[int, Received]]) -> None:
        for base, received in blocks:
            bases.append(base)
            seen.extend(d for g in received.groups for d in g.documents)
        order.append("sink")

    w = JournalWriter(j, sink, batch_max=10, queue_max=100, roll_s=60)
    w.start()

    def ack(n: int) -> None:
        order.append(f"ack{n}")
        done.set()

    raw = [encode_frame(1, "d", "t", "", b"a"), encode_frame(1, "d", "t", "", b"b")]
    stream = bytearray(b"".join(LENGTH.pack(len(r)) + r for r in raw))
    received, used = scan_stream(stream, 1000, FrameParser())
    assert used == len(stream)
    w.submit(received, ack, block=True)
    assert done.wait(5)
    w.stop()
    assert seen == [b"a", b"b"]
    assert order == ["sink", "ack2"]
    replayed = list(Journal(tmp_path, segment_max_bytes=1 << 20).replay())
    assert [p for _, p in replayed] == raw
    assert [pos for pos, _ in replayed] == [bases[0], bases[0] + 4 + len(raw[0])]


def test_segments_of_the_older_format_are_refused_not_truncated(tmp_path: Path) -> None:
    old = tmp_path / "000000000001.seg"
    old.write_bytes(b"\x00\x00\x00\x04" + zlib.crc32(b"abcd").to_bytes(4, "big") + b"abcd")
    with pytest.raises(JournalFormatError, match=r"000000000001\.seg"):
        Journal(tmp_path, segment_max_bytes=1 << 20)
    assert old.read_bytes().endswith(b"abcd")  # left as it was


def test_a_roll_that_cannot_write_stops_the_writer_as_a_failed_append_does(
    tmp_path: Path,
) -> None:
    # A roll writes the new segment's first record (the producers' table): with the disk
    # full it fails like an append. It used to kill the writer thread with a traceback,
    # leaving a relocator that acknowledged nothing and never exited (scenario 13).
    disk = {"full": False}

    def prologue() -> bytes:
        if disk["full"]:
            raise OSError(28, "No space left on device")
        return b""

    j = Journal(tmp_path, segment_max_bytes=1 << 20, prologue=prologue)
    list(j.replay())
    acked: list[int] = []
    w = JournalWriter(j, lambda blocks: None, batch_max=10, queue_max=100, roll_s=3600)
    w.start()

    def one(document: bytes) -> Received:
        raw = encode_frame(1, "d", "t", "", document)
        received, _ = scan_stream(bytearray(LENGTH.pack(len(raw)) + raw), 1000, FrameParser())
        return received

    w.submit(one(b"a"), acked.append, block=True)
    deadline = time.monotonic() + 5
    while not acked and time.monotonic() < deadline:
        time.sleep(0.01)
    assert acked == [1]
    disk["full"] = True
    w.roll_requested.set()
    w.submit(one(b"b"), acked.append, block=True)
    while w.failed is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(w.failed, OSError) and w.failed.errno == 28
    assert acked == [1]  # nothing more acknowledged once the journal could not write
