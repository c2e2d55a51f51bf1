"""Differential tests: the compiled core against the pure-Python reference.

DESIGN.md objective 4: both body codecs write the same bytes for the same value, and
decode the same bytes to the same value (sharing included) or both raise SerealError
(not necessarily the same subclass). Values come from hypothesis; byte strings are
valid encodings and mutations of them (bit flips, truncations, inserted bytes).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sereal_strategies import mutated, same_value, values
from sereal_testlib import core as compiled

from sereal_codec import tags
from sereal_codec.errors import SerealError
from sereal_codec.pure import backend as pure_decoder
from sereal_codec.pure import encoder as pure_encoder

pytestmark = [
    pytest.mark.skipif(
        compiled is None,
        reason="compiled core not built: nothing to compare the pure codec with "
        "(test_core.py::test_extension_is_built reports the missing build)",
    ),
]


def pure(fn: Any, *args: Any) -> Any:
    """Call a pure codec function, then put back the recursion limit it may raise:
    hypothesis manages the limit around each example and warns when it changes."""
    limit = sys.getrecursionlimit()
    try:
        return fn(*args)
    finally:
        sys.setrecursionlimit(limit)


MODES = [tags.BINARY_UTF8, tags.BINARY_LATIN1, tags.BINARY_BYTES]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decode_both(body: bytes, binary: int, max_depth: int = 512) -> None:
    """Decode with both codecs; assert equal values or SerealError from both."""
    outcomes: list[tuple[str, Any]] = []
    for codec in (compiled, pure_decoder):
        try:
            args = (body, 0, len(body), -1, binary, max_depth)
            outcomes.append(("ok", pure(codec.decode_body, *args)))
        except SerealError as exc:
            outcomes.append(("error", exc))
    (c_kind, c_out), (p_kind, p_out) = outcomes
    assert c_kind == p_kind, f"compiled: {c_out!r}\npure: {p_out!r}\nbody: {body.hex(' ')}"
    if c_kind == "ok":
        assert c_out[1] == p_out[1], body.hex(" ")
        assert same_value(c_out[0], p_out[0]), (
            f"compiled: {c_out[0]!r}\npure: {p_out[0]!r}\nbody: {body.hex(' ')}"
        )


def encode_or_error(codec: Any, value: Any, dedupe: bool, max_depth: int = 512) -> Any:
    """The body, or the type of the SerealError raising it."""
    try:
        return pure(codec.encode_body, value, dedupe, max_depth)
    except SerealError as exc:
        return type(exc)


def encodable(value: Any, dedupe: bool) -> bytes:
    """The compiled encoding of value; the example is rejected when it has none (a
    cycle through a PerlObject whose value is not a reference)."""
    body = encode_or_error(compiled, value, dedupe)
    assume(isinstance(body, bytes))
    return body  # type: ignore[no-any-return]


@SETTINGS
@given(values(), st.booleans())
def test_encode_is_byte_identical(value: Any, dedupe: bool) -> None:
    got = encode_or_error(compiled, value, dedupe)
    assert got == encode_or_error(pure_encoder, value, dedupe)


@SETTINGS
@given(values(), st.booleans(), st.sampled_from(MODES))
def test_decode_agrees_on_valid_bodies(value: Any, dedupe: bool, binary: int) -> None:
    decode_both(encodable(value, dedupe), binary)


@SETTINGS
@given(values(), st.integers(0, 6))
def test_depth_limits_agree(value: Any, max_depth: int) -> None:
    """Encoder and decoder count nesting alike: whatever encodes within max_depth
    decodes within it, and both implementations draw the line at the same place."""
    outcomes = [
        encode_or_error(codec, value, True, max_depth) for codec in (compiled, pure_encoder)
    ]
    assert outcomes[0] == outcomes[1]
    if isinstance(outcomes[0], bytes):
        decode_both(outcomes[0], tags.BINARY_UTF8, max_depth)
        compiled.decode_body(outcomes[0], 0, len(outcomes[0]), -1, 0, max_depth)


@SETTINGS
@given(st.data(), values(), st.booleans(), st.sampled_from(MODES))
def test_decode_agrees_on_mutated_bodies(
    data: st.DataObject, value: Any, dedupe: bool, binary: int
) -> None:
    body = encodable(value, dedupe)
    decode_both(data.draw(mutated(body)), binary, data.draw(st.sampled_from([512, 3])))


@SETTINGS
@given(st.binary(max_size=64), st.sampled_from(MODES))
def test_decode_agrees_on_arbitrary_bytes(body: bytes, binary: int) -> None:
    decode_both(body, binary)
