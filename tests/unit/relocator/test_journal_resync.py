"""Journal recovery resynchronises after a corrupt record instead of dropping the rest
of the segment (issue 12.1): only the damaged record's bytes are skipped, counted and
logged; only bad bytes with nothing valid after them at the end of the newest segment
are a torn tail (truncated)."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest

import sereal_codec as sereal
from relocator.journal import Gap, Journal, Record, scan_records, segment_of
from relocator.metrics import Metrics
from relocator.wire import LENGTH, encode_frame, parse_frame

RECORDS = 5
PER_RECORD = 3


def _frame(i: int) -> bytes:
    return encode_frame(1_700_000_000, "ams1", "web", "www", sereal.encode({"id": i}))


def _block(first: int) -> bytes:
    return b"".join(LENGTH.pack(len(f)) + f for f in map(_frame, range(first, first + PER_RECORD)))


def _write(directory: Path, *, roll_after: bool = False) -> tuple[Path, list[int], list[int]]:
    """RECORDS records of PER_RECORD frames in one segment (a second, empty-of-them
    segment after it when ``roll_after``). Returns the segment's path, each record's
    offset in it and the frames' positions."""
    j = Journal(directory, segment_max_bytes=1 << 20)
    list(j.replay())
    positions: list[int] = []
    for r in range(RECORDS):
        positions += j.append([_frame(i) for i in range(r * PER_RECORD, (r + 1) * PER_RECORD)])
    segment = segment_of(positions[0])
    if roll_after:
        j.roll()
        j.append([_frame(999)])
    j.close()
    path = directory / f"{segment:012d}.blk"
    offsets = [(positions[r * PER_RECORD] & ((1 << 40) - 1)) - 8 for r in range(RECORDS)]
    return path, offsets, positions


def _ids(frames: list[tuple[int, bytes]]) -> list[int]:
    return [sereal.decode(parse_frame(frame).document)["id"] for _, frame in frames]


def _flip(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x41
    path.write_bytes(bytes(raw))


def _ids_of_records(records: list[int]) -> list[int]:
    return [i for r in records for i in range(r * PER_RECORD, (r + 1) * PER_RECORD)]


@pytest.mark.parametrize("bad", [0, 2, RECORDS - 1], ids=["first", "middle", "last"])
def test_a_corrupt_record_costs_only_its_own_frames(tmp_path: Path, bad: int) -> None:
    path, offsets, positions = _write(tmp_path, roll_after=True)
    size = path.stat().st_size
    _flip(path, offsets[bad] + 8 + 30)  # inside the block: the CRC no longer matches
    metrics = Metrics()
    j = Journal(tmp_path, segment_max_bytes=1 << 20, metrics=metrics)
    replayed = list(j.replay())
    kept = [r for r in range(RECORDS) if r != bad]
    assert _ids(replayed)[: len(kept) * PER_RECORD] == _ids_of_records(kept)
    # positions are those written: the frames can still be matched to stored batches
    expected = [p for i, p in enumerate(positions) if i // PER_RECORD != bad]
    assert [p for p, _ in replayed][: len(expected)] == expected
    record_size = (offsets[1] - offsets[0]) if bad < RECORDS - 1 else size - offsets[bad]
    assert j.skipped_bytes == {"corrupt": record_size}
    assert j.corrupt_records == 1
    assert metrics.registry.get_sample_value(
        "relocator_journal_skipped_bytes_total", {"reason": "corrupt"}
    ) == float(record_size)
    assert path.stat().st_size == size  # an older segment is never truncated


def test_corrupt_middle_record_of_the_newest_segment_is_skipped_not_truncated(
    tmp_path: Path,
) -> None:
    path, offsets, _ = _write(tmp_path)
    size = path.stat().st_size
    _flip(path, offsets[1] + 8 + 20)
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    assert _ids(list(j.replay())) == _ids_of_records([0, 2, 3, 4])
    assert j.skipped_bytes == {"corrupt": offsets[2] - offsets[1]}
    assert path.stat().st_size == size  # the records after the damage stay on disk


def test_length_field_pointing_past_the_end(tmp_path: Path) -> None:
    path, offsets, _ = _write(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[offsets[0] : offsets[0] + 4] = (0xFFFFFF00).to_bytes(4, "big")
    path.write_bytes(bytes(raw))
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    assert _ids(list(j.replay())) == _ids_of_records([1, 2, 3, 4])
    assert j.skipped_bytes == {"corrupt": offsets[1]}


def test_length_field_pointing_inside_the_next_record(tmp_path: Path) -> None:
    path, offsets, _ = _write(tmp_path)
    raw = bytearray(path.read_bytes())
    n = int.from_bytes(raw[offsets[1] : offsets[1] + 4], "big")
    raw[offsets[1] : offsets[1] + 4] = (n + 20).to_bytes(4, "big")
    path.write_bytes(bytes(raw))
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    assert _ids(list(j.replay())) == _ids_of_records([0, 2, 3, 4])


def test_torn_tail_of_the_newest_segment_is_truncated_and_counted(tmp_path: Path) -> None:
    path, offsets, _ = _write(tmp_path)
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size - 7])  # the last write cut short by a crash
    metrics = Metrics()
    j = Journal(tmp_path, segment_max_bytes=1 << 20, metrics=metrics)
    assert _ids(list(j.replay())) == _ids_of_records([0, 1, 2, 3])
    assert path.stat().st_size == offsets[-1]
    assert j.skipped_bytes == {"torn_tail": size - 7 - offsets[-1]}
    assert j.corrupt_records == 0
    assert metrics.registry.get_sample_value(
        "relocator_journal_skipped_bytes_total", {"reason": "torn_tail"}
    ) == float(size - 7 - offsets[-1])
    pos = j.append([_frame(100)])[0]
    assert segment_of(pos) == segment_of(offsets[0]) + 1  # appends go to a new segment


def test_garbage_between_records_is_skipped_exactly(tmp_path: Path) -> None:
    path, offsets, _ = _write(tmp_path)
    raw = path.read_bytes()
    rng = random.Random(12)
    # anchors with lengths that point anywhere and one that is a whole record with a
    # wrong CRC: none of them may be taken for a record
    fake = bytearray(_block(500))
    fake_record = len(fake).to_bytes(4, "big") + b"\0\0\0\0" + bytes(fake)
    garbage = (
        bytes(rng.randrange(256) for _ in range(50))
        + b"\0\0\0\x10\0\0\0\0\0\0\0\x05RE\x01xy"
        + fake_record
        + b"RE\x01" * 5
        + bytes(rng.randrange(256) for _ in range(50))
    )
    at = offsets[2]
    path.write_bytes(raw[:at] + garbage + raw[at:])
    j = Journal(tmp_path, segment_max_bytes=1 << 20)
    assert _ids(list(j.replay())) == _ids_of_records(list(range(RECORDS)))
    assert j.skipped_bytes == {"corrupt": len(garbage)}


def test_scan_records_reports_records_and_gaps() -> None:
    records = []
    for r in range(3):
        block = _block(r * PER_RECORD)
        records.append(len(block).to_bytes(4, "big") + zlib.crc32(block).to_bytes(4, "big") + block)
    data = records[0] + b"junk" + records[1] + records[2][:-3]
    items = list(scan_records(data))
    assert [type(i) for i in items] == [Record, Gap, Record, Gap]
    first, gap, second, tail = items
    assert isinstance(first, Record) and first.start == 8
    assert gap == Gap(len(records[0]), len(records[0]) + 4)
    assert isinstance(second, Record) and second.start == len(records[0]) + 4 + 8
    assert tail == Gap(len(records[0]) + 4 + len(records[1]), len(data))
    assert list(scan_records(b"")) == []
    assert list(scan_records(b"\x00" * 5)) == [Gap(0, 5)]


def test_every_single_byte_flip_loses_at_most_its_record(tmp_path: Path) -> None:
    path, offsets, _ = _write(tmp_path, roll_after=True)
    clean = path.read_bytes()
    ends = [*offsets[1:], len(clean)]
    for at in range(0, len(clean), 7):
        path.write_bytes(clean)
        _flip(path, at)
        hit = max(r for r in range(RECORDS) if offsets[r] <= at)
        others = _ids_of_records([r for r in range(RECORDS) if r != hit])
        got = _ids(list(Journal(tmp_path, segment_max_bytes=1 << 20).replay()))
        assert set(others) <= set(got), (at, hit, ends[hit])
