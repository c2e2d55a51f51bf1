"""Hypothesis strategies and a cycle-safe comparison for the Sereal codec tests.

``values()`` draws everything the encoder accepts: nested dicts / lists / tuples, str
(non-ASCII, surrogateescape'd bytes, lone surrogates), bytes, ints at every encoding
boundary, floats, None, bool and the Perl wrappers, then rewires some containers so
they are shared or cyclic. ``same_value`` compares two decoded values structurally,
including which containers are the same object.
"""

from __future__ import annotations

import math
import struct
from typing import Any

from hypothesis import strategies as st

from sereal_codec.types import PerlObject, PerlRef, PerlRegexp

INT_BOUNDARIES = [
    0, 1, 15, 16, 127, 128, 2**14, 2**32, 2**63 - 1, 2**63, 2**64 - 1,
    -1, -15, -16, -17, -64, -65, -(2**31), -(2**63) + 1, -(2**63),
]  # fmt: skip

CLASS_NAMES = ["Foo", "Foo::Bar", "JSON::PP::Boolean", "Regexp", "Ünïcode", "x" * 40]

ints = st.one_of(st.sampled_from(INT_BOUNDARIES), st.integers(-(2**63), 2**64 - 1))
texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["host", "status", "GET", "web-01.ams4", "é", "x" * 33, ""]),
    st.binary(max_size=12).map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.lists(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3).map("a".join),
)
byte_strings = st.one_of(st.binary(max_size=40), st.sampled_from([b"host", b"", b"\xff" * 33]))
#: Plain data: what JSON can say too (no Perl wrappers).
plain_scalars = st.one_of(
    st.none(),
    st.booleans(),
    ints,
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
    byte_strings,
)
scalars = st.one_of(
    plain_scalars,
    st.builds(PerlRegexp, texts, st.sampled_from(["", "i", "msix"])),
)
keys = st.one_of(texts, byte_strings)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=6),
        st.lists(children, min_size=15, max_size=18),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(keys, children, max_size=6),
        st.dictionaries(keys, children, min_size=15, max_size=17),
        st.builds(PerlRef, children),
        st.builds(PerlObject, st.sampled_from(CLASS_NAMES), children, st.booleans()),
    )


trees = st.recursive(scalars, _extend, max_leaves=30)


@st.composite
def values(draw: st.DrawFn, *, cycles: bool = True) -> Any:
    """A tree, then some containers, ``PerlRef`` and ``PerlObject`` objects made
    shared (placed again elsewhere) or cyclic (placed inside themselves or a
    descendant). A ``PerlRef`` / ``PerlObject`` host gets the guest as its value.
    A cycle through a ``PerlObject`` whose value is not a reference cannot be encoded
    (``EncodeDepthExceeded``): Perl blesses references only."""
    root = draw(trees)
    mutable = [c for c in _walk(root) if isinstance(c, (list, dict, PerlRef, PerlObject))]
    guests = [c for c in _walk(root) if isinstance(c, (list, dict, tuple, PerlRef, PerlObject))]
    if not mutable or not guests:
        return root
    for _ in range(draw(st.integers(0, 3))):
        host = draw(st.sampled_from(mutable))
        guest = draw(st.sampled_from(guests))
        if not cycles and (guest is host or any(host is c for c in _walk(guest))):
            continue
        if isinstance(host, PerlObject) and not isinstance(guest, (list, dict, tuple, PerlRef)):
            continue  # Perl blesses references only
        if isinstance(host, list):
            host.insert(draw(st.integers(0, len(host))), guest)
        elif isinstance(host, dict):
            host[draw(keys)] = guest
        else:
            host.value = guest
    return root


def _walk(root: Any) -> list[Any]:
    """Every object reachable from root, each once (cycle-safe)."""
    seen: set[int] = set()
    out: list[Any] = []
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        out.append(obj)
        if isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
        elif isinstance(obj, (PerlRef, PerlObject)):
            stack.append(obj.value)
    return out


def same_value(a: Any, b: Any) -> bool:
    """Structural equality of two decoded values that also requires the same sharing:
    where a has one container twice (or a cycle), b must too. NaN equals NaN; other
    floats compare bit for bit (so -0.0 != 0.0)."""
    return _same(a, b, {}, {})


def _same(a: Any, b: Any, ab: dict[int, int], ba: dict[int, int]) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return struct.pack("<d", a) == struct.pack("<d", b)
    if not isinstance(a, (list, tuple, dict, PerlRef, PerlObject)):
        return bool(a == b)
    if id(a) in ab or id(b) in ba:  # already matched (or being matched: a cycle)
        return ab.get(id(a)) == id(b) and ba.get(id(b)) == id(a)
    ab[id(a)] = id(b)
    ba[id(b)] = id(a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y, ab, ba) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k], ab, ba) for k in a)
    if isinstance(a, PerlRef):
        return _same(a.value, b.value, ab, ba)
    return a.class_name == b.class_name and a.frozen == b.frozen and _same(a.value, b.value, ab, ba)


@st.composite
def mutated(draw: st.DrawFn, body: bytes) -> bytes:
    """body with 1-4 mutations: bit flips, truncation, inserted or replaced bytes
    (often tag bytes that point elsewhere: REFP, ALIAS, COPY, OBJECTV, F-bit tags)."""
    data = bytearray(body)
    interesting = [
        0x28,
        0x29,
        0x2E,
        0x2F,
        0x2D,
        0x2C,
        0x2B,
        0x2A,
        0x3F,
        0x80,
        0xA9,
        0xAB,
        0x30,
        0xB0,
    ]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "replace"]))
        if not data:
            data.append(draw(st.integers(0, 255)))
            continue
        i = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[i:]
        else:
            byte = draw(st.one_of(st.integers(0, 255), st.sampled_from(interesting)))
            if kind == "insert":
                data.insert(i, byte)
            else:
                data[i] = byte
    return bytes(data)
