"""Helpers shared by the Sereal tests: hand-built documents, and the parts of a join
with the pure decoder as their oracle (the join unit tests and tests/interop's Perl
documents)."""

from __future__ import annotations

import importlib
import math
import struct
from enum import IntEnum
from typing import Any

import pytest

from sereal_codec import tags
from sereal_codec.document import DEFAULT_MAX_DEPTH, open_document
from sereal_codec.errors import InvalidStructure
from sereal_codec.pure import backend as pure
from tests.unit.sereal_codec.sereal_strategies import same_value

core: Any  # the compiled module, or None when not built
try:
    core = importlib.import_module("sereal_codec._sereal")
except ImportError:
    core = None

#: A test (or, as ``pytestmark``, a module) that needs the compiled core: skipped when
#: it is not built, which test_core.py::test_extension_is_built reports as a failure.
needs_core = pytest.mark.skipif(
    core is None,
    reason="compiled core not built (test_core.py::test_extension_is_built fails on that)",
)

V4 = b"=\xf3rl\x04\x00"  # protocol 4, raw, no suffix: the body starts at offset 6
BODY = len(V4)


def doc(body_hex: str, header: bytes = V4) -> bytes:
    """A document: ``header`` followed by a body written as spaced hex."""
    return header + bytes.fromhex(body_hex)


def body_of(document: bytes) -> str:
    """The body of a raw protocol 3-5 document without suffix, as spaced hex."""
    assert document[:4] == b"=\xf3rl", document[:6]
    assert document[4] >> 4 == 0 and document[5] == 0, document[:6]
    return document[6:].hex(" ")


Part = tuple[bytes | bytearray | memoryview, int, int, int]


def part_of(doc: bytes) -> Part:
    buf, pos, base = open_document(doc)
    return buf, pos, len(buf), base


def pure_decode(part: Part, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """The oracle: the pure decoder on one body, trailing PADs only."""
    data, pos, end, base = part
    value, stop = pure.decode_body(bytes(data), pos, end, base, tags.BINARY_UTF8, max_depth)
    if not all(b & 0x7F == tags.PAD for b in data[stop:end]):
        raise InvalidStructure("trailing bytes after the body", stop)
    return value


def joined(parts: list[Part]) -> Any:
    body = core.join_bodies(parts)
    value = pure_decode((body, 0, len(body), -1))
    compiled, stop = core.decode_body(body, 0, len(body), -1, tags.BINARY_UTF8, 512)
    assert stop == len(body)
    assert same_value(compiled, value)
    return value


class Color(IntEnum):
    RED = 1


class Text(str):
    def __str__(self) -> str:
        return "overridden"


def _double(x: float) -> str:
    return "23 " + struct.pack("<d", x).hex(" ")


#: Scalars and the exact body both encoders write for each (DESIGN.md's encoding table;
#: several are byte for byte what Perl's Sereal::Encoder 5.003 writes).
ENCODED_SCALARS: list[tuple[Any, str]] = [
    (None, "25"),
    (True, "3b"),
    (False, "3a"),
    (0, "00"),
    (15, "0f"),
    (16, "20 10"),
    (300, "20 ac 02"),
    (2**64 - 1, "20 ff ff ff ff ff ff ff ff ff 01"),
    (-1, "1f"),
    (-16, "10"),
    (-17, "21 21"),
    (-(2**63), "21 ff ff ff ff ff ff ff ff ff 01"),
    (1.5, _double(1.5)),
    (1.0, _double(1.0)),
    (-0.0, _double(-0.0)),
    (math.inf, _double(math.inf)),
    ("", "60"),
    ("abc", "63 61 62 63"),
    ("a" * 31, "7f" + " 61" * 31),
    ("a" * 32, "26 20" + " 61" * 32),
    ("\xe9", "27 02 c3 a9"),
    ("\u263a", "27 03 e2 98 ba"),
    ("\U0001f600", "27 04 f0 9f 98 80"),
    ("\udce9", "61 e9"),  # surrogateescape'd byte: BINARY of that byte
    ("\xe9\udcff", "63 c3 a9 ff"),
    ("\ud800", "27 03 ed a0 80"),  # other lone surrogates: surrogatepass
    ("\udc41", "27 03 ed b1 81"),  # below \udc80: not from surrogateescape
    (b"", "60"),
    (b"\x00\xff", "62 00 ff"),
    (bytearray(b"ab"), "62 61 62"),
    (b"x" * 32, "26 20" + " 78" * 32),
    (Color.RED, "01"),
    (Text("abc"), "63 61 62 63"),  # a str subclass encodes its value, not its __str__
]
