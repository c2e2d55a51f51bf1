"""Bounded-time fuzzing of the compiled body decoder.

Feeds arbitrary bytes and mutated valid bodies to ``sereal_codec._sereal``'s
``decode_body`` in every binary mode and asserts the only exception that ever escapes
is a SerealError (no crash, no MemoryError, no RecursionError, no SystemError from a
reference-count slip). CI runs it for a fixed number of examples.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sereal_codec.errors import SerealError
from sereal_codec.types import PerlObject, PerlRef, PerlRegexp
from tests.unit.sereal_codec.sereal_testlib import core as compiled
from tests.unit.sereal_codec.sereal_testlib import needs_core

pytestmark = [needs_core]

FUZZ = settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Tag bytes that make the decoder jump around or nest: the interesting ones to insert.
TAGS = [0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x2D, 0x2E, 0x2F, 0x30, 0x31, 0x32, 0x33, 0x3F,
        0x41, 0x51, 0x63, 0x80, 0xA8, 0xA9, 0xAB, 0xAC, 0xAE, 0xC1, 0xD1, 0xE3]  # fmt: skip

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.sampled_from(["host", "status", "GET"]),
)
trees = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.sampled_from(["host", "status", "a", "é"]), children, max_size=5),
        st.builds(PerlRef, children),
        st.builds(PerlObject, st.sampled_from(["Foo", "JSON::PP::Boolean"]), children),
        st.builds(PerlRegexp, st.text(max_size=5), st.just("i")),
    ),
    max_leaves=25,
)
arrays = st.lists(trees, max_size=6)
#: One edit of an encoded body, as :func:`mutate` applies it: (kind, where, byte).
body_edits = st.tuples(
    st.sampled_from(["flip", "cut", "insert", "set"]),
    st.integers(0, 10**6),
    st.one_of(st.integers(0, 255), st.sampled_from(TAGS)),
)


def decode_all_modes(body: bytes, max_depth: int = 512) -> None:
    for binary in (0, 1, 2):
        try:
            value, end = compiled.decode_body(body, 0, len(body), -1, binary, max_depth)
        except SerealError:
            continue
        assert 0 < end <= len(body)
        repr(value)  # touches every object: a half-built one would show here


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_bytes(body: bytes) -> None:
    decode_all_modes(body)


@FUZZ
@given(
    trees,
    st.booleans(),
    st.lists(body_edits, min_size=1, max_size=6),
    st.sampled_from([512, 4]),
)
def test_mutated_bodies(value: Any, dedupe: bool, edits: list[Any], max_depth: int) -> None:
    decode_all_modes(mutate(bytearray(compiled.encode_body(value, dedupe, 512)), edits), max_depth)


def mutate(data: bytearray, edits: list[Any]) -> bytes:
    for kind, where, byte in edits:
        if not data:
            break
        i = where % len(data)
        if kind == "flip":
            data[i] ^= 1 << (byte % 8)
        elif kind == "cut":
            del data[i:]
        elif kind == "insert":
            data.insert(i, byte)
        else:
            data[i] = byte
    return bytes(data)


@FUZZ
@given(
    arrays,
    st.lists(body_edits, max_size=4),
    st.data(),
)
def test_splitter_on_mutated_arrays(array: list[Any], edits: list[Any], data: Any) -> None:
    """array_layout / extract_array raise only SerealError; when the whole body also
    decodes, every extracted range that succeeds decodes to the same slice."""
    body = mutate(bytearray(compiled.encode_body(array, True, 512)), edits)
    try:
        bounds = compiled.array_layout(body, 0, len(body), -1)
    except SerealError:
        return
    assert bounds == sorted(bounds) and bounds[-1] <= len(body)
    n = len(bounds) - 1
    first = data.draw(st.integers(0, n))
    stop = data.draw(st.integers(first, n))
    try:
        part = compiled.extract_array(body, 0, len(body), -1, first, stop)
    except SerealError:
        return
    try:
        whole = compiled.decode_body(body, 0, len(body), -1, 0, 512)[0]
    except SerealError:
        whole = None
    try:
        piece = compiled.decode_body(part, 0, len(part), -1, 0, 512)[0]
    except SerealError:
        assert whole is None, f"extracted piece of a valid body does not decode: {body.hex()}"
        return
    if whole is not None:
        assert repr(piece) == repr(whole[first:stop]), body.hex(" ")


@FUZZ
@given(
    arrays,
    st.lists(body_edits, max_size=4),
    st.sampled_from([0, 1, 2]),
    st.sampled_from([512, 4]),
)
def test_json_transcoder_on_mutated_arrays(
    array: list[Any], edits: list[Any], binary: int, max_depth: int
) -> None:
    """array_to_json_lines raises only SerealError, fails wherever decode_body fails,
    and what it returns parses as JSON, one text per element of the decoded array."""
    body = mutate(bytearray(compiled.encode_body(array, True, 512)), edits)
    try:
        lines = compiled.array_to_json_lines(body, 0, len(body), -1, binary, max_depth)
    except SerealError:
        lines = None
    try:
        value, _end = compiled.decode_body(body, 0, len(body), -1, binary, max_depth)
    except SerealError:
        assert lines is None, f"transcoded a body that does not decode: {body.hex(' ')}"
        return
    if lines is not None:
        assert isinstance(value, list) and len(lines) == len(value)
        for line in lines:
            json.loads(line)
