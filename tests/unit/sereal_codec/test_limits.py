"""The compiled core and the pure reference agree on the depth cap (limits.MAX_DEPTH_CAP).

Both accept ``max_depth`` up to the cap and refuse one more with the same ValueError,
in every entry point; at the cap both decode the same deep bodies to the same value,
one level more both raise DepthExceeded at the same offset. (Stack safety at the cap,
in a 1 MiB thread, is tests/fuzz/test_deep_nesting.py.)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

import pytest

from sereal_codec import document
from sereal_codec.errors import DepthExceeded
from sereal_codec.limits import MAX_DEPTH_CAP, check_max_depth
from sereal_codec.pure import backend as pure

core: Any = importlib.import_module("sereal_codec._sereal")
BACKENDS = {"c": core, "pure": pure}
REFUSED = f"max_depth must be in 0..{MAX_DEPTH_CAP}, got {MAX_DEPTH_CAP + 1}"

# One nesting level each (DESIGN.md, "Depth"), the innermost item POS_1.
LEVELS = {
    "arrayref": b"\x41",
    "refn": b"\x28",
    "refn_tracked": b"\xa8",
    "weaken": b"\x30",
    "refn_hash": b"\x28\x2a\x01\x61k",
    "object": b"\x2c\x61C",
}


def deep(level: bytes, depth: int) -> bytes:
    return level * depth + b"\x01"


def packed(text: bytes) -> tuple[bytes, bytes]:
    return text, (0).to_bytes(8, sys.byteorder) + len(text).to_bytes(8, sys.byteorder)


def test_the_compiled_core_reports_the_same_cap() -> None:
    assert core.MAX_DEPTH_CAP == MAX_DEPTH_CAP == document.MAX_DEPTH_CAP


def test_check_max_depth() -> None:
    assert check_max_depth(MAX_DEPTH_CAP) == MAX_DEPTH_CAP
    for bad in (-1, MAX_DEPTH_CAP + 1, True, 1.0):
        with pytest.raises(ValueError, match=r"max_depth must be in 0\.\."):
            check_max_depth(bad)  # type: ignore[arg-type]


ENTRY_POINTS: dict[str, Callable[[Any, int], object]] = {
    "decode_body": lambda b, d: b.decode_body(b"\x01", 0, 1, -1, 0, d),
    "encode_body": lambda b, d: b.encode_body(1, True, d),
    "array_to_json_lines": lambda b, d: b.array_to_json_lines(b"\x40", 0, 1, -1, 0, d),
    "array_to_json_packed": lambda b, d: b.array_to_json_packed(b"\x40", 0, 1, -1, 0, d),
    "json_to_variant_packed": lambda b, d: b.json_to_variant_packed(*packed(b"1"), d),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_accepts_the_cap_and_refuses_more(backend: str, entry: str) -> None:
    call = ENTRY_POINTS[entry]
    call(BACKENDS[backend], MAX_DEPTH_CAP)
    with pytest.raises(ValueError) as err:
        call(BACKENDS[backend], MAX_DEPTH_CAP + 1)
    assert str(err.value) == REFUSED


@pytest.mark.parametrize("name", ["sereal_codec", "sereal_codec.pure"])
def test_the_public_api_refuses_more_than_the_cap(name: str) -> None:
    api: Any = importlib.import_module(name)
    doc = api.encode([1], max_depth=MAX_DEPTH_CAP)
    for call in (api.decode, api.decode_json_lines, api.decode_variant_packed, api.decode_header):
        call(doc, max_depth=MAX_DEPTH_CAP)
        with pytest.raises(ValueError, match=REFUSED):
            call(doc, max_depth=MAX_DEPTH_CAP + 1)
    with pytest.raises(ValueError, match=REFUSED):
        api.encode([1], max_depth=MAX_DEPTH_CAP + 1)


@pytest.mark.parametrize("shape", sorted(LEVELS))
def test_both_decode_at_the_cap_and_fail_alike_past_it(shape: str) -> None:
    at_cap = deep(LEVELS[shape], MAX_DEPTH_CAP)
    values = [b.decode_body(at_cap, 0, len(at_cap), -1, 0, MAX_DEPTH_CAP) for b in (core, pure)]
    # compared re-encoded: == on 1000-deep values would hit the recursion limit
    encoded = [core.encode_body(v, True, MAX_DEPTH_CAP) for v, _ in values]
    assert encoded[0] == encoded[1]
    assert values[0][1] == values[1][1] == len(at_cap)

    past = deep(LEVELS[shape], MAX_DEPTH_CAP + 1)
    offsets = []
    for b in (core, pure):
        with pytest.raises(DepthExceeded, match=f"max_depth={MAX_DEPTH_CAP}") as err:
            b.decode_body(past, 0, len(past), -1, 0, MAX_DEPTH_CAP)
        offsets.append(err.value.offset)
    assert offsets[0] == offsets[1] == MAX_DEPTH_CAP * len(LEVELS[shape])


def test_both_transcode_at_the_cap_alike() -> None:
    body = b"\x41" + deep(b"\x28\x2a\x01\x61k", MAX_DEPTH_CAP - 1)
    lines = [b.array_to_json_lines(body, 0, len(body), -1, 0, MAX_DEPTH_CAP) for b in (core, pure)]
    assert lines[0] == lines[1]
    text = lines[0][0]
    assert core.json_to_variant_packed(*packed(text), MAX_DEPTH_CAP) == (
        pure.json_to_variant_packed(*packed(text), MAX_DEPTH_CAP)
    )
