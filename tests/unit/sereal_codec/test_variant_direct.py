"""The direct Sereal -> Variant walk (csrc/variant_sereal.c) against the JSON path it
replaces (Sereal -> JSON text -> ``parse_json``'s Variant), byte for byte.

The JSON path is the reference: on every body the direct walk either gives the
reference's four buffers exactly, or gives None and leaves the body to it. It must not
leave a body of plain data (containers, strings, numbers, booleans, undef: what events
are) that the reference reads without error; it must leave every body the reference
refuses, so the public call raises the reference's error, class and offset.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sereal_strategies import keys, mutated, plain_scalars, values
from sereal_testlib import core as compiled
from sereal_testlib import needs_core

import sereal_codec as sereal
from relocator.events import generate_events
from sereal_codec import tags
from sereal_codec.errors import SerealError
from sereal_codec.pure import encoder as pure_encoder

pytestmark = [needs_core]

MODES = [tags.BINARY_UTF8, tags.BINARY_LATIN1, tags.BINARY_BYTES]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Plain data (``plain_scalars``, no sharing): what the direct walk must handle itself.
plain = st.recursive(
    plain_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.lists(children, min_size=15, max_size=18),
        st.dictionaries(keys, children, max_size=6),
        st.dictionaries(keys, children, min_size=15, max_size=17),
    ),
    max_leaves=30,
)


def body_of(value: Any, dedupe: bool = True) -> bytes:
    limit = sys.getrecursionlimit()
    try:
        return pure_encoder.encode_body(value, dedupe, 512)
    except SerealError:
        assume(False)
        raise
    finally:
        sys.setrecursionlimit(limit)


def reference(body: bytes, binary: int, max_depth: int) -> tuple[Any, ...]:
    """The JSON path's outcome: ("ok", buffers), ("error", class, offset) or
    ("ValueError", message) (what parse_json refuses)."""
    try:
        text, offsets = compiled.array_to_json_packed(body, 0, len(body), -1, binary, max_depth)
        return ("ok", compiled.json_to_variant_packed(text, offsets, max_depth))
    except SerealError as exc:
        return ("error", type(exc), exc.offset)
    except ValueError as exc:
        return ("ValueError", str(exc))


def check(
    body: bytes, binary: int = tags.BINARY_UTF8, max_depth: int = 512, *, plain: bool = False
) -> Any:
    """Assert the direct walk agrees with the reference (given its buffers, or None
    where the reference fails); ``plain``: a body without references, objects, weak
    references or regexps, which the direct walk must read itself when the reference
    can. Returns the direct result."""
    direct = compiled.array_to_variant_packed(body, 0, len(body), -1, binary, max_depth)
    want = reference(body, binary, max_depth)
    if direct is not None:
        assert want == ("ok", direct), f"body: {body.hex(' ')}"
    elif plain:
        assert want[0] != "ok", f"direct walk left a body the reference reads: {body.hex(' ')}"
    return direct


def _plain_only(value: Any) -> bool:
    """True when nothing in value is shared (the encoder would write a REFP / ALIAS)."""
    seen: set[int] = set()

    def walk(v: Any) -> bool:
        if isinstance(v, (list, dict)):
            if id(v) in seen:
                return False
            seen.add(id(v))
            items = list(v.items()) if isinstance(v, dict) else [(None, x) for x in v]
            return all(walk(x) for _, x in items)
        return True

    return walk(value)


@SETTINGS
@given(plain, st.booleans(), st.sampled_from(MODES))
def test_plain_data_is_walked_directly_and_identically(
    value: Any, dedupe: bool, binary: int
) -> None:
    assume(_plain_only(value))
    body = body_of([value, {"k": copy.deepcopy(value)}, "x"], dedupe)
    direct = check(body, binary, plain=True)
    # Only what parse_json refuses (one key twice in a hash, e.g. "a" and b"a") is
    # left to the JSON path.
    if direct is None:
        assert reference(body, binary, 512)[0] == "ValueError"


@SETTINGS
@given(values(), st.booleans(), st.sampled_from(MODES))
def test_any_value_identical(value: Any, dedupe: bool, binary: int) -> None:
    check(body_of([value, value, "x"], dedupe), binary)


@SETTINGS
@given(st.data(), plain, st.booleans(), st.sampled_from(MODES))
def test_mutated_plain_bodies_identical(
    data: st.DataObject, value: Any, dedupe: bool, binary: int
) -> None:
    assume(_plain_only(value))
    body = data.draw(mutated(body_of([value, {"k": copy.deepcopy(value)}, "x"], dedupe)))
    check(body, binary, data.draw(st.sampled_from([512, 3])))


@SETTINGS
@given(st.data(), values(), st.booleans(), st.sampled_from(MODES))
def test_mutated_bodies_identical(
    data: st.DataObject, value: Any, dedupe: bool, binary: int
) -> None:
    body = data.draw(mutated(body_of([value, {"k": value}], dedupe)))
    check(body, binary, data.draw(st.sampled_from([512, 3])))


@SETTINGS
@given(plain, st.integers(0, 6))
def test_depth_limits_identical(value: Any, max_depth: int) -> None:
    assume(_plain_only(value))
    check(body_of([value]), tags.BINARY_UTF8, max_depth, plain=True)


#: Rows whose keys repeat from row to row, in other orders, subsets and nestings: the
#: direct walk's key template (a row's keys taken from the row before's dictionary
#: while they come in its order) must hit, break and shrink as the JSON path's
#: per-row dictionaries say.
row_keys = st.sampled_from(["a", "b", "c", "host", "é", "\x00k", "\ue000", "\U0001f600"])
rows = st.lists(
    st.dictionaries(
        row_keys,
        st.one_of(st.integers(0, 3), st.dictionaries(row_keys, st.integers(0, 3), max_size=3)),
        max_size=5,
    ),
    min_size=2,
    max_size=12,
)


@SETTINGS
@given(rows, st.booleans(), st.sampled_from(MODES))
def test_rows_sharing_keys_identical(value: list[Any], dedupe: bool, binary: int) -> None:
    assert check(body_of(value, dedupe), binary, plain=True) is not None


def test_realistic_events_direct_and_identical() -> None:
    events = generate_events(3000)
    for dedupe in (True, False):
        body = body_of(events, dedupe)
        assert check(body, plain=True) is not None
    document = sereal.encode(events, compress="zstd")
    got = sereal.decode_variant_packed(document)
    assert got == sereal.decode_variant_packed(document, via_json=True)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_realistic_events_mutated(data: st.DataObject) -> None:
    body = data.draw(mutated(body_of(generate_events(20))))
    check(body, tags.BINARY_UTF8, data.draw(st.sampled_from([512, 2])))


def test_copy_amplification_is_left_to_the_json_path() -> None:
    """A short COPY of a long string, repeated: the JSON text would pass the
    transcoder's cap (max(64 MiB, 64 x body)), so the reference raises
    SizeLimitExceeded; the direct walk must not answer instead."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while n >= 0x80:
            out.append(n & 0x7F | 0x80)
            n >>= 7
        return bytes(out) + bytes((n,))

    n = 40_000
    head = b"\x2b" + varint(n + 1)  # ARRAY of the string and n COPYs of it
    copy = b"\x2f" + varint(len(head) + 1)  # offsets count from body[-1] (base -1)
    long = b"\x26" + varint(2000) + b"a" * 2000  # BINARY of 2000 bytes
    body = head + long + copy * n
    assert compiled.array_to_variant_packed(body, 0, len(body), -1, 0, 512) is None
    assert reference(body, 0, 512)[0] == "error"
    # the same walk under the cap is direct
    small = b"\x2b\x03" + long + b"\x2f\x03" * 2
    assert check(small, plain=True) is not None


def test_public_errors_are_the_json_paths() -> None:
    """A malformed document: decode_variant_packed raises exactly what the JSON path
    raises (class and offset)."""
    document = sereal.encode(generate_events(5))
    broken = document[:-7]
    with pytest.raises(SerealError) as direct:
        sereal.decode_variant_packed(broken)
    with pytest.raises(SerealError) as via_json:
        sereal.decode_variant_packed(broken, via_json=True)
    assert type(direct.value) is type(via_json.value)
    assert direct.value.offset == via_json.value.offset
