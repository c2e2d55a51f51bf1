"""Every tag byte of the C core's table (``csrc/tags.h``), with and without the F bit,
through every compiled walker: decode, projected decode, JSON lines, the splitter (its
walk and its skip) and the joiner. A tag the table supports is read by each of them as
the pure reference reads it; an unsupported one is UnknownTag at its own offset in each.
The direct Sereal -> Variant walk gives the JSON path's Variants byte for byte, or
leaves the body to that path (None) for the kinds it does not walk itself.
So a tag added to the table (or a kind a walker forgets) fails here, whichever walker
lags.

Each case is an array body, REFN ARRAY n: what the tag under test refers to (a tracked
item for REFP / ALIAS, a string for COPY, an object for OBJECTV), the tag's item, then
the integer 1. Offsets are protocol 2's: the body starts at index 0,
``base = -1``.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from tags_h import c_kind_of_byte, entries

from sereal_codec import pure, tags
from sereal_codec.errors import SerealError, UnknownTag
from sereal_codec.pure.json import array_to_json_lines as pure_json_lines

_compiled: ModuleType | None
try:
    _compiled = importlib.import_module("sereal_codec._sereal")
except ImportError:  # test_core.py's test_extension_is_built says whether that is wanted
    _compiled = None

needs_core = pytest.mark.skipif(_compiled is None, reason="compiled core not built")

UTF8 = tags.BINARY_UTF8
DEPTH = 64
#: A projection of the elements (they are not hashes here: kept as they are).
TREE: dict[str, Any] = {"a": None}

#: kind -> the fixed payload size of FIXED kinds (SRL_KINDS' size column)
FIXED_SIZE = {
    kind: int(size) for kind, payload, size, *_ in entries("SRL_KINDS", 5) if payload == "FIXED"
}


def _short(text: bytes) -> bytes:
    return bytes((tags.SHORT_BINARY_LOW + len(text),)) + text


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


#: kind -> (tag byte, position the item starts at) -> (elements before it, the item).
#: An offset o names data[o - 1] (base -1).
Example = Callable[[int, int], tuple[bytes, bytes]]
ONE = bytes((tags.POS_LOW + 1,))


def _plain(t: int, at: int) -> tuple[bytes, bytes]:
    return b"", bytes((t,))


def _fixed(kind: str) -> Example:
    return lambda t, at: (b"", bytes((t,)) + bytes(FIXED_SIZE[kind]))


def _backref_to_tracked(t: int, at: int) -> tuple[bytes, bytes]:
    target = bytes((tags.POS_LOW + 1 | tags.TRACK_FLAG,))  # at `at`
    return target, bytes((t,)) + _varint(at + 1)


def _copy(t: int, at: int) -> tuple[bytes, bytes]:
    return _short(b"ab"), bytes((t,)) + _varint(at + 1)


def _objectv(t: int, at: int) -> tuple[bytes, bytes]:
    obj = bytes((tags.OBJECT,)) + _short(b"Cls") + ONE  # class name at at + 1
    return obj, bytes((t,)) + _varint(at + 2) + ONE


def _hashref(t: int, at: int) -> tuple[bytes, bytes]:
    pairs = b"".join(_short(bytes((0x61 + i,))) + ONE for i in range(t & 0x0F))
    return b"", bytes((t,)) + pairs


EXAMPLES: dict[str, Example] = {
    "POS": _plain,
    "NEG": _plain,
    "VARINT": lambda t, at: (b"", bytes((t, 0x85, 0x01))),
    "ZIGZAG": lambda t, at: (b"", bytes((t, 0x05))),
    "FLOAT": lambda t, at: (b"", bytes((t,)) + struct.pack("<f", 1.5)),
    "DOUBLE": lambda t, at: (b"", bytes((t,)) + struct.pack("<d", -2.25)),
    "LONG_DOUBLE": _fixed("LONG_DOUBLE"),
    "FLOAT_128": _fixed("FLOAT_128"),
    "UNDEF": _plain,
    "TRUE": _plain,
    "FALSE": _plain,
    "BINARY": lambda t, at: (b"", bytes((t, 2)) + b"hi"),
    "STR_UTF8": lambda t, at: (b"", bytes((t, 2)) + "é".encode()),
    "SHORT_BINARY": lambda t, at: (b"", bytes((t,)) + b"x" * (t & 0x1F)),
    "REFN": lambda t, at: (b"", bytes((t,)) + ONE),
    "WEAKEN": lambda t, at: (b"", bytes((t,)) + ONE),
    "REFP": _backref_to_tracked,
    "ALIAS": _backref_to_tracked,
    "COPY": _copy,
    "ARRAY": lambda t, at: (b"", bytes((t, 2)) + ONE + ONE),
    "HASH": lambda t, at: (b"", bytes((t, 1)) + _short(b"k") + ONE),
    "ARRAYREF": lambda t, at: (b"", bytes((t,)) + ONE * (t & 0x0F)),
    "HASHREF": _hashref,
    "OBJECT": lambda t, at: (b"", bytes((t,)) + _short(b"Cls") + ONE),
    "OBJECTV": _objectv,
    "REGEXP": lambda t, at: (b"", bytes((t,)) + _short(b"^a") + _short(b"i")),
    "PAD": lambda t, at: (b"", bytes((t,)) + ONE),
    "UNSUPPORTED": _plain,
}

#: The kinds the direct Sereal -> Variant walk leaves to the JSON path (csrc/variant_sereal.c).
VARIANT_VIA_JSON = {"REFP", "ALIAS", "OBJECT", "OBJECTV", "WEAKEN", "REGEXP", "UNSUPPORTED"}

KIND_OF_BYTE = c_kind_of_byte()
CASES = [
    pytest.param(byte | flag, KIND_OF_BYTE[byte], id=f"0x{byte | flag:02x}-{KIND_OF_BYTE[byte]}")
    for byte in range(0x80)
    for flag in (0, tags.TRACK_FLAG)
]


def body_for(tag: int, kind: str) -> tuple[bytes, int]:
    """REFN ARRAY n: the example's elements, the tag's item, then 1 (so the splitter's
    skip passes over the item when it extracts that last element); and the tag's
    offset in the body."""
    assert kind in EXAMPLES, f"no example item for the new kind {kind}: add one to EXAMPLES"
    head_len = 3  # REFN ARRAY <n>, n < 128
    before, item = EXAMPLES[kind](tag, head_len)
    n = (1 if before else 0) + 2
    body = bytes((tags.REFN, tags.ARRAY, n)) + before + item + ONE
    return body, head_len + len(before)


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", value) or ("error", (class name, offset))."""
    try:
        return "ok", call()
    except SerealError as e:
        return "error", (type(e).__name__, e.offset)


def test_every_kind_has_an_example() -> None:
    assert set(KIND_OF_BYTE.values()) == set(EXAMPLES)


@needs_core
@pytest.mark.parametrize(("tag", "kind"), CASES)
def test_each_walker_reads_the_tag_as_the_table_says(tag: int, kind: str) -> None:
    assert _compiled is not None
    core = _compiled
    body, at = body_for(tag, kind)
    end = len(body)
    args = (body, 0, end, -1, UTF8, DEPTH)
    walkers: dict[str, tuple[str, Any]] = {
        "decode": outcome(lambda: core.decode_body(*args)),
        "projected": outcome(lambda: core.decode_body(*args, -1, TREE)),
        "json": outcome(lambda: core.array_to_json_lines(*args)),
        "split": outcome(
            lambda: core.extract_array(
                body, 0, end, -1, 0, len(core.array_layout(body, 0, end, -1)) - 1
            )
        ),
        "join": outcome(lambda: core.join_bodies([(body, 0, end, -1)], DEPTH)),
        # the splitter's skip over every element before the last
        "skip": outcome(lambda: core.extract_array(body, 0, end, -1, body[2] - 1, body[2])),
    }
    # The direct Sereal -> Variant walk: the JSON path's Variants, byte for byte, or None
    # (that path answers) for the kinds it leaves to it.
    direct = core.array_to_variant_packed(*args)
    if kind in VARIANT_VIA_JSON:
        assert direct is None
    else:
        text, offsets = core.array_to_json_packed(*args)
        assert direct == core.json_to_variant_packed(text, offsets, DEPTH)
    if kind == "UNSUPPORTED":
        assert all(result == ("error", ("UnknownTag", at)) for result in walkers.values()), walkers
        with pytest.raises(UnknownTag):
            pure.decode_body(*args)
        return
    # As the pure reference reads it, value for value.
    assert walkers["decode"] == outcome(lambda: pure.decode_body(*args))
    assert walkers["projected"] == outcome(lambda: pure.decode_body(*args, -1, TREE))
    assert walkers["json"] == outcome(lambda: pure_json_lines(*args))
    # The splitter's and the joiner's bodies hold the same value.
    state, split = walkers["split"]
    assert state == "ok", split
    assert core.decode_body(split, 0, len(split), -1, UTF8, DEPTH)[0] == walkers["decode"][1][0]
    state, last = walkers["skip"]
    assert state == "ok", last
    assert core.decode_body(last, 0, len(last), -1, UTF8, DEPTH)[0] == [1]
    state, joined = walkers["join"]
    assert state == "ok", joined
    value = core.decode_body(joined, 0, len(joined), -1, UTF8, DEPTH + 1)[0]
    assert value == [walkers["decode"][1][0]]
