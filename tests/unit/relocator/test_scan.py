"""``wire.scan_stream``: the compiled ``scan_frames`` against the Python path and
``parse_frame``, on valid, mutated and cut streams."""

from __future__ import annotations

import array
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sereal_codec as sereal
from relocator.errors import MalformedFrame
from relocator.wire import (
    LENGTH,
    FrameParser,
    Received,
    encode_frame,
    frame_positions,
    parse_frame,
    scan_stream,
    split_stream,
)

needs_c = pytest.mark.skipif(sereal.IMPLEMENTATION != "c", reason="compiled core not built")


def _stream(frames: list[bytes]) -> bytearray:
    return bytearray(b"".join(LENGTH.pack(len(f)) + f for f in frames))


def _plain(r: Received) -> tuple[object, ...]:
    """A Received as plain values (offsets as lists) for comparison."""
    groups = [(g.epoch, g.dc, g.type, g.subtype, list(g.offsets), g.documents) for g in r.groups]
    return r.data, groups, r.events, r.malformed, r.oversized


def _frames(seed: int, n: int) -> list[bytes]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        out.append(
            encode_frame(
                1_700_000_000 + rnd.randrange(3),
                rnd.choice(["ams1", "lhr4"]),
                rnd.choice(["web", "web.api", "lb"]),
                rnd.choice(["", "www", "x.y"]),
                sereal.encode({"i": i, "pad": "x" * rnd.randrange(40)}),
            )
        )
    return out


@needs_c
def test_compiled_and_python_agree_on_valid_frames() -> None:
    frames = _frames(1, 500)
    stream = _stream(frames)
    got, used = scan_stream(stream, 1 << 20, FrameParser())
    ref, ref_used = scan_stream(stream, 1 << 20, FrameParser(), compiled=False)
    assert used == ref_used == len(stream)
    assert _plain(got) == _plain(ref)
    assert got.data == bytes(stream)  # every frame good: the record is the stream
    # every document is where its offset says, in the order the frames came
    parsed = [parse_frame(f) for f in frames]
    by_header: dict[tuple[int, str, str, str], list[bytes]] = {}
    for f in parsed:
        by_header.setdefault((f.epoch, f.dc, f.type, f.subtype), []).append(f.document)
    for g in got.groups:
        assert g.documents == by_header.pop((g.epoch, g.dc, g.type, g.subtype))
        for off, doc in zip(g.offsets, g.documents, strict=True):
            (n,) = LENGTH.unpack_from(got.data, off)
            assert got.data[off + 4 : off + 4 + n].endswith(doc)
    assert not by_header


@needs_c
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), cut=st.integers(0, 4000), flips=st.integers(0, 6))
def test_compiled_and_python_agree_on_damaged_streams(seed: int, cut: int, flips: int) -> None:
    stream = _stream(_frames(seed, 12))
    rnd = random.Random(seed)
    for _ in range(flips):  # damage headers mostly: the first 40 bytes of some frame
        at = rnd.randrange(len(stream))
        stream[at] = rnd.randrange(256)
    stream = stream[: max(0, len(stream) - cut)]
    try:
        ref, ref_used = scan_stream(stream, 300, FrameParser(), compiled=False)
    except MalformedFrame as e:
        with pytest.raises(MalformedFrame, match="not plausible"):
            scan_stream(stream, 300, FrameParser())
        assert "not plausible" in str(e)
        return
    got, used = scan_stream(stream, 300, FrameParser())
    assert used == ref_used
    assert _plain(got) == _plain(ref)


@needs_c
@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"RE\x01" + b"\x00" * 8 + b"\x01a\x01t",  # no subtype byte, no document
        b"RE\x01" + b"\x00" * 8 + b"\x01a\x01t\x00",  # no document
        b"RE\x02" + b"\x00" * 8 + b"\x01a\x01t\x00doc",  # version
        b"XE\x01" + b"\x00" * 8 + b"\x01a\x01t\x00doc",  # magic
        b"RE\x01\x80" + b"\x00" * 7 + b"\x01a\x01t\x00doc",  # epoch >= 2**63
        b"RE\x01" + b"\x00" * 8 + b"\x00\x01t\x00doc",  # empty dc
        b"RE\x01" + b"\x00" * 8 + b"\x01a\x00\x00doc",  # empty type
        b"RE\x01" + b"\x00" * 8 + b"\x01.\x01t\x00doc",  # dot in dc
        b"RE\x01" + b"\x00" * 8 + b"\x01a\x01t\x01-doc",  # bad subtype byte
        b"RE\x01" + b"\x00" * 8 + b"\x01a\x01t\x09doc",  # subtype runs past the end
    ],
)
def test_bad_headers_are_counted_and_left_out(frame: bytes) -> None:
    good = encode_frame(5, "d", "t", "", b"doc")
    stream = _stream([good, frame, good])
    got, used = scan_stream(stream, 1000, FrameParser())
    assert used == len(stream)
    assert (got.events, got.malformed, got.oversized) == (2, 1, 0)
    assert got.data == bytes(_stream([good, good]))
    assert list(got.groups[0].offsets) == [0, 4 + len(good)]
    assert _plain(got) == _plain(scan_stream(stream, 1000, FrameParser(), compiled=False)[0])


@needs_c
def test_oversized_frames_and_partial_tail() -> None:
    small = encode_frame(5, "d", "t", "", b"doc")
    big = encode_frame(5, "d", "t", "", b"x" * 500)
    stream = _stream([small, big, small]) + LENGTH.pack(100) + b"partial"
    got, used = scan_stream(stream, 100, FrameParser())
    assert used == len(stream) - 4 - len(b"partial")
    assert (got.events, got.malformed, got.oversized) == (2, 0, 1)
    empty, used = scan_stream(bytearray(b"\x00\x00"), 100, FrameParser())
    assert used == 0 and empty.events == 0 and empty.data == b"" and empty.groups == []
    with pytest.raises(MalformedFrame, match="not plausible"):
        scan_stream(_stream([small]) + struct.pack(">I", 2**30), 100, FrameParser())


@needs_c
def test_many_distinct_headers() -> None:
    # more headers than the first hash table holds, interleaved (no runs)
    frames = [encode_frame(e, "d", f"t{e % 300}", "", b"=doc") for e in range(3000)]
    got, _ = scan_stream(_stream(frames), 100, FrameParser())
    assert len(got.groups) == 3000 and got.events == 3000
    ref = scan_stream(_stream(frames), 100, FrameParser(), compiled=False)[0]
    assert _plain(got) == _plain(ref)


def test_python_scan_matches_split_stream() -> None:
    frames = [*_frames(3, 50), b"bad"]
    parts, used = split_stream(_stream(frames), 1000)
    got, used2 = scan_stream(_stream(frames), 1000, FrameParser(), compiled=False)
    assert used == used2 and got.events == 50 and got.malformed == 1
    assert sorted(d for g in got.groups for d in g.documents) == sorted(
        parse_frame(p).document for p in parts[:-1]
    )


def test_frame_positions_add_the_base_to_every_offset() -> None:
    offsets = array.array("I", [0, 7, 2**32 - 1])
    base = (3 << 40) | 12
    assert list(frame_positions(offsets, base)) == [base, base + 7, base + 2**32 - 1]
    assert list(frame_positions(array.array("I"), base)) == []
    group = scan_stream(_stream(_frames(4, 20)), 1000, FrameParser())[0].groups[0]
    assert list(frame_positions(group.offsets, 5)) == [5 + o for o in group.offsets]


@needs_c
def test_compiled_frame_positions_refuses_a_partial_array() -> None:
    from relocator._frames import frame_positions as compiled

    with pytest.raises(ValueError, match="not a uint32 array"):
        compiled(b"\x00" * 6, 0)
