"""The compiled array splitter: ``array_layout`` and ``extract_array``.

For generated arrays whose elements repeat keys, values and class names (so COPY and
OBJECTV point across any cut), every range of elements extracted on its own decodes
to exactly that slice, and so does every partition of the array into ranges.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sereal_strategies import same_value
from sereal_testlib import core, needs_core

from sereal_codec import tags
from sereal_codec.errors import (
    BadBackReference,
    InvalidStructure,
    SerealError,
    TruncatedInput,
)
from sereal_codec.types import PerlObject, PerlRef, PerlRegexp

pytestmark = [needs_core]

KEYS = ["host", "status", "path", "é", "user_agent_with_a_long_name", "x"]
STRINGS = ["web-01.ams4", "GET", "/", "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0", "ünï", ""]


def decode(body: bytes, binary: int = tags.BINARY_UTF8) -> Any:
    value, end = core.decode_body(body, 0, len(body), -1, binary, 512)
    assert end == len(body)
    return value


leaves = st.one_of(
    st.sampled_from(STRINGS),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.none(),
    st.booleans(),
    st.binary(max_size=8),
    st.builds(PerlRegexp, st.sampled_from(["a+", "^x$"]), st.sampled_from(["", "i"])),
)


@st.composite
def elements(draw: st.DrawFn) -> Any:
    """One event-like element; containers inside it may be shared (within it only)."""
    tree = draw(
        st.recursive(
            leaves,
            lambda kids: st.one_of(
                st.lists(kids, max_size=4),
                st.dictionaries(st.sampled_from(KEYS), kids, max_size=5),
                st.builds(PerlRef, kids),
                st.builds(PerlObject, st.sampled_from(["Foo", "Bar::Baz"]), kids, st.booleans()),
            ),
            max_leaves=12,
        )
    )
    element = {"host": draw(st.sampled_from(STRINGS)), "payload": tree}
    if draw(st.booleans()):
        inner = [draw(st.sampled_from(STRINGS))]
        element["a"] = inner
        element["b"] = inner  # shared inside the element: REFP stays within a cut
    return element


arrays = st.lists(elements(), max_size=18)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(arrays, st.booleans())
def test_every_range_decodes_to_its_slice(array: list[Any], dedupe: bool) -> None:
    body = core.encode_body(array, dedupe, 512)
    whole = decode(body)
    bounds = core.array_layout(body, 0, len(body), -1)
    assert len(bounds) == len(array) + 1
    assert bounds[-1] == len(body)
    for first, stop in itertools.combinations_with_replacement(range(len(array) + 1), 2):
        part = core.extract_array(body, 0, len(body), -1, first, stop)
        assert same_value(decode(part), whole[first:stop]), (first, stop)
        # each piece is itself splittable
        assert len(core.array_layout(part, 0, len(part), -1)) == stop - first + 1


@SETTINGS
@given(arrays.filter(lambda a: 0 < len(a) <= 9), st.data())
def test_partitions_concatenate_to_the_array(array: list[Any], data: st.DataObject) -> None:
    body = core.encode_body(array, True, 512)
    whole = decode(body, tags.BINARY_BYTES)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(array) - 1))) if len(array) > 1 else [])
    edges = [0, *cuts, len(array)]
    joined: list[Any] = []
    for first, stop in itertools.pairwise(edges):
        joined += decode(core.extract_array(body, 0, len(body), -1, first, stop), 2)
    assert same_value(joined, whole)


def test_array_forms_and_pads() -> None:
    # ARRAYREF_2, REFN ARRAY, bare ARRAY, with PADs around and between elements
    forms = [
        "42 63 61 62 63 2f 02",
        "28 2b 02 63 61 62 63 2f 04",
        "2b 02 63 61 62 63 2f 03",
        "3f 28 3f 2b 02 3f 63 61 62 63 3f 2f 07 3f",
    ]
    for body_hex in forms:
        body = bytes.fromhex(body_hex)
        bounds = core.array_layout(body, 0, len(body), -1)
        assert len(bounds) == 3
        assert decode(core.extract_array(body, 0, len(body), -1, 1, 2)) == ["abc"]
        assert decode(core.extract_array(body, 0, len(body), -1, 0, 2)) == ["abc", "abc"]
        assert decode(core.extract_array(body, 0, len(body), -1, 1, 1)) == []


def test_copy_before_the_range_is_inlined_once() -> None:
    body = core.encode_body(["a long repeated string", *["a long repeated string"] * 3], True, 512)
    part = core.extract_array(body, 0, len(body), -1, 2, 4)
    assert part.count(b"a long repeated string") == 1
    assert decode(part) == ["a long repeated string"] * 2


def test_class_names_before_the_range() -> None:
    array = [PerlObject("Some::Class", 1), PerlObject("Some::Class", 2, frozen=True),
             PerlObject("Some::Class", 3), PerlRegexp("a", ""), PerlRegexp("b", "i")]  # fmt: skip
    body = core.encode_body(array, True, 512)
    for first in range(len(array)):
        part = core.extract_array(body, 0, len(body), -1, first, len(array))
        assert decode(part) == array[first:]


def test_class_name_written_as_copy() -> None:
    # ["Foo", bless(\1, "Foo"), bless(\2, "Foo")] with the class name as a COPY of the
    # first string, and OBJECTV naming that COPY's target
    body = bytes.fromhex("43 63 46 6f 6f 2c 2f 02 28 01 2d 02 28 02")
    for first in range(3):
        part = core.extract_array(body, 0, len(body), -1, first, 3)
        assert decode(part) == decode(body)[first:]


def test_shared_across_elements_cannot_be_cut() -> None:
    inner = ["x"]
    body = core.encode_body([inner, inner, "y"], True, 512)
    assert decode(core.extract_array(body, 0, len(body), -1, 0, 2)) == [["x"], ["x"]]
    assert decode(core.extract_array(body, 0, len(body), -1, 2, 3)) == ["y"]
    with pytest.raises(InvalidStructure, match="element 1"):
        core.extract_array(body, 0, len(body), -1, 1, 3)


def test_layout_validates() -> None:
    def layout(body_hex: str) -> Any:
        body = bytes.fromhex(body_hex)
        return core.array_layout(body, 0, len(body), -1)

    assert layout("40") == [1]
    with pytest.raises(InvalidStructure, match="not an array"):
        layout("51 61 61 01")
    with pytest.raises(InvalidStructure, match="trailing"):
        layout("41 01 01")
    with pytest.raises(TruncatedInput):
        layout("43 01 02")
    with pytest.raises(TruncatedInput):
        layout("2b ff ff ff ff 0f 01")
    with pytest.raises(BadBackReference):
        layout("42 63 61 62 63 2f 03")  # COPY into the middle of a string
    with pytest.raises(BadBackReference):
        layout("42 01 29 02")  # REFP to an untracked item
    with pytest.raises(BadBackReference):
        layout("42 63 46 6f 6f 2d 02 40")  # OBJECTV to a string that names no class
    with pytest.raises(SerealError):
        layout("41 3c")
    nested = bytes.fromhex("41") * 20_000 + b"\x01"
    with pytest.raises(SerealError):
        core.array_layout(b"\x41" + nested, 0, len(nested) + 1, -1)


def test_extract_arguments() -> None:
    body = core.encode_body([1, 2, 3], True, 512)
    for first, stop in ((-1, 2), (2, 1), (0, 4)):
        with pytest.raises(ValueError):
            core.extract_array(body, 0, len(body), -1, first, stop)
    with pytest.raises(ValueError):
        core.array_layout(body, 0, len(body) + 1, -1)


def test_body_inside_a_larger_buffer() -> None:
    body = core.encode_body([{"k": "value"}, {"k": "value"}], True, 512)
    data = b"head" + body + b"tail"
    bounds = core.array_layout(data, 4, 4 + len(body), 3)
    assert bounds[0] == 5 and bounds[-1] == 4 + len(body)
    part = core.extract_array(data, 4, 4 + len(body), 3, 1, 2)
    assert decode(part) == [{"k": "value"}]
