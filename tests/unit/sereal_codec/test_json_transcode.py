"""JSON transcoding (DESIGN.md, "JSON transcoding"): the compiled ``array_to_json_lines``
against the pure reference (byte-identical texts, or the same error class and offset),
and both against the mapping itself (``json.loads(line)`` is the decoded element mapped
as DESIGN.md says). Values come from hypothesis; bodies are valid encodings, mutations
of them and arbitrary bytes.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import struct
import sys
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sereal_strategies import mutated, values
from sereal_testlib import doc

import sereal_codec.pure as pure_codec
from sereal_codec import tags
from sereal_codec.errors import (
    BadBackReference,
    DepthExceeded,
    InvalidStructure,
    SerealError,
    SizeLimitExceeded,
    TruncatedInput,
)
from sereal_codec.pure import backend as pure_decoder
from sereal_codec.pure import encoder as pure_encoder
from sereal_codec.pure import json as pure_json
from sereal_codec.types import PerlObject, PerlRef, PerlRegexp
from tests.unit.sereal_codec.sereal_testlib import core as compiled
from tests.unit.sereal_codec.sereal_testlib import needs_core

MODES = [tags.BINARY_UTF8, tags.BINARY_LATIN1, tags.BINARY_BYTES]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BOOL_CLASS = "71" + b"JSON::PP::Boolean".hex()
ESCAPED_TO_FFFD = {c: 0xFFFD for c in range(0xDC80, 0xDD00)}


def run(fn: Any, body: bytes, binary: int = tags.BINARY_UTF8, max_depth: int = 512) -> Any:
    """JSON lines of a whole body, or (error class, offset); the recursion limit the
    pure codec may raise is put back (hypothesis warns when it changes)."""
    limit = sys.getrecursionlimit()
    try:
        return fn(body, 0, len(body), -1, binary, max_depth)
    except SerealError as exc:
        return (type(exc), exc.offset)
    finally:
        sys.setrecursionlimit(limit)


def implementations() -> list[Any]:
    return [pure_json.array_to_json_lines] + (
        [compiled.array_to_json_lines] if compiled is not None else []
    )


def both(body: bytes, binary: int = tags.BINARY_UTF8, max_depth: int = 512) -> Any:
    """The outcome, asserted identical for both implementations (when built)."""
    outcomes = [run(fn, body, binary, max_depth) for fn in implementations()]
    pure_outcome, compiled_outcome = outcomes[0], outcomes[-1]
    assert pure_outcome == compiled_outcome, (
        f"pure: {pure_outcome!r}\ncompiled: {compiled_outcome!r}\nbody: {body.hex(' ')}"
    )
    return outcomes[0]


def body_of(value: Any, dedupe: bool = True) -> bytes:
    try:
        limit = sys.getrecursionlimit()
        try:
            return pure_encoder.encode_body(value, dedupe, 512)
        finally:
            sys.setrecursionlimit(limit)
    except SerealError:
        assume(False)
        raise


def hexbody(body_hex: str) -> bytes:
    return bytes.fromhex(body_hex)


# -- the mapping, stated independently of both implementations -------------------


def expected(value: Any, binary: int, path: frozenset[int] = frozenset()) -> Any:
    """What json.loads of an element's line must give for a decoded (acyclic) value."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value.translate(ESCAPED_TO_FFFD)  # bytes surrogateescape kept
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, PerlRegexp):
        return expected(value.pattern, binary)
    assert id(value) not in path or not isinstance(value, (list, dict, PerlRef, PerlObject))
    inner = path | {id(value)}
    if isinstance(value, list):
        return [expected(v, binary, inner) for v in value]
    if isinstance(value, dict):
        return {expected(k, binary): expected(v, binary, inner) for k, v in value.items()}
    if isinstance(value, (PerlRef, PerlObject)):
        return expected(value.value, binary, inner)
    return value


def same_json(a: Any, b: Any) -> bool:
    """Equality where floats compare bit for bit (a line must round-trip exactly)."""
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_json(a[k], b[k]) for k in a)
    return bool(a == b)


# -- differential ------------------------------------------------------------------


@needs_core
@SETTINGS
@given(values(), st.booleans(), st.sampled_from(MODES))
def test_identical_on_valid_bodies(value: Any, dedupe: bool, binary: int) -> None:
    both(body_of([value, value, "x"], dedupe), binary)


@needs_core
@SETTINGS
@given(st.data(), values(), st.booleans(), st.sampled_from(MODES))
def test_identical_on_mutated_bodies(
    data: st.DataObject, value: Any, dedupe: bool, binary: int
) -> None:
    body = data.draw(mutated(body_of([value, {"k": value}], dedupe)))
    both(body, binary, data.draw(st.sampled_from([512, 3])))


@needs_core
@SETTINGS
@given(st.integers(0x40, 0x4F), st.binary(max_size=64), st.sampled_from(MODES))
def test_identical_on_arbitrary_bytes(head: int, rest: bytes, binary: int) -> None:
    both(bytes([head]) + rest, binary)


@needs_core
@SETTINGS
@given(values(), st.integers(0, 6))
def test_identical_depth_limits(value: Any, max_depth: int) -> None:
    both(body_of([value]), tags.BINARY_UTF8, max_depth)


@needs_core
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=20))
@settings(max_examples=300, deadline=None)
def test_floats_as_python_repr(floats: list[float]) -> None:
    lines = both(body_of(floats))
    assert lines == [repr(f).encode() if math.isfinite(f) else b"null" for f in floats]


@needs_core
@given(st.lists(st.binary(max_size=12), max_size=10), st.sampled_from(MODES))
@settings(max_examples=300, deadline=None)
def test_any_bytes_as_strings(strings: list[bytes], binary: int) -> None:
    lines = both(body_of(strings), binary)
    for raw, line in zip(strings, lines, strict=True):
        text = json.loads(line)
        if binary == tags.BINARY_BYTES:
            assert base64.b64decode(text) == raw
        elif binary == tags.BINARY_LATIN1:
            assert text == raw.decode("latin-1")
        else:  # each byte that is not part of valid UTF-8 is one U+FFFD
            assert text == raw.decode("utf-8", "surrogateescape").translate(ESCAPED_TO_FFFD)


# -- the mapping -------------------------------------------------------------------


@SETTINGS
@given(values(cycles=False), st.sampled_from(MODES))
def test_lines_parse_to_the_mapped_value(value: Any, binary: int) -> None:
    body = body_of([value, value])
    decoded, _ = pure_decoder.decode_body(body, 0, len(body), -1, binary, 512)
    outcome = both(body, binary)
    assert isinstance(outcome, list), outcome
    for element, line in zip(decoded, outcome, strict=True):
        assert same_json(json.loads(line), expected(element, binary)), line


@pytest.mark.parametrize(
    ("body_hex", "lines"),
    [
        ("40", []),
        ("28 2b 00", []),  # REFN ARRAY 0
        ("2b 02 01 02", [b"1", b"2"]),  # a bare ARRAY
        ("30 42 25 3b", [b"null", b"true"]),  # WEAKEN of the array is the array
        ("3f 42 3f 3a 3f 39 3f", [b"false", b"null"]),  # PADs anywhere, trailing too
        (
            "43 20 ff ff ff ff ff ff ff ff ff 01 21 ff ff ff ff ff ff ff ff ff 01 1f",
            [b"18446744073709551615", b"-9223372036854775808", b"-1"],
        ),
        ("42 52 61 61 01 61 62 42 03 2f 03 2f 03", [b'{"a":1,"b":[3,"a"]}', b'"a"']),
        ("41 52 61 61 01 61 61 02", [b'{"a":1,"a":2}']),  # a key twice stays twice
        ("41 62 22 5c", [b'"\\"\\\\"']),
        ("41 64 0a 0d 09 01", [b'"\\n\\r\\t\\u0001"']),
        ("41 62 c3 a9", ['"é"'.encode()]),
        ("41 63 e2 82 41", ['"\ufffd\ufffdA"'.encode()]),  # stray bytes: U+FFFD each
        ("41 27 02 ed a0", ['"\ufffd\ufffd"'.encode()]),  # an encoded surrogate too
        ("41 31 62 61 2b 61 69", [b'"a+"']),  # a regexp is its pattern
        ("41 28 28 05", [b"5"]),  # a reference is its referent
        ("41 2c 63 46 6f 6f 28 ab 01 01", [b"[1]"]),  # an object is its value
        (f"43 2c {BOOL_CLASS} 28 81 29 16 2d 03 28 00", [b"true", b"true", b"false"]),
        (f"42 2c {BOOL_CLASS} 28 81 2e 16", [b"true", b"1"]),  # ALIAS: the referent
        (f"41 2c {BOOL_CLASS} 28 41 01", [b"[1]"]),  # not a scalar: not a boolean
        (f"41 32 {BOOL_CLASS} 28 01", [b"1"]),  # frozen: not a boolean
        ("42 28 ab 01 01 29 03", [b"[1]", b"[1]"]),  # shared: written again
    ],
)
def test_mapping_examples(body_hex: str, lines: list[bytes]) -> None:
    assert both(hexbody(body_hex)) == lines


@pytest.mark.parametrize(
    ("body_hex", "error"),
    [
        ("41 a9 02", (InvalidStructure, None)),  # $x = \$x
        ("42 b0 28 b0 29 02 2e 04", (InvalidStructure, None)),  # weak scalar cross
        ("41 28 ab 01 29 03", (InvalidStructure, None)),  # $a = [\$a]
        ("41 2c 63 46 6f 6f 28 ab 01 29 08", (InvalidStructure, None)),  # bless [$q]
        ("ab 01 29 01", (InvalidStructure, None)),  # the array holds itself
        ("51 61 61 01", (InvalidStructure, 0)),  # not an array
        ("28 a9 02", (InvalidStructure, 0)),  # not an array, and a cycle: no array first
        ("01", (InvalidStructure, 0)),
        ("41 01 02", (InvalidStructure, 2)),  # trailing bytes
        ("41 a9 02 41", (InvalidStructure, 3)),  # trailing bytes before the cycle
        ("42 a9 02 62 61", (TruncatedInput, 5)),  # a decode error before the cycle
        ("42 a9 02 29 09", (BadBackReference, 3)),
        ("", (TruncatedInput, 0)),
        ("42 01", (TruncatedInput, 2)),
        ("41 41 41 41 41 01", (DepthExceeded, 4)),  # max_depth=4
    ],
)
def test_error_examples(body_hex: str, error: tuple[type[SerealError], int | None]) -> None:
    assert both(hexbody(body_hex), max_depth=4) == error


@needs_core
def test_sharing_cannot_amplify_past_the_cap() -> None:
    """Shared arrays doubling 7 times over a 1 MB string: 128 MB of JSON from a 1 MB
    body, past max(64 MiB, 64 x 1 MB): SizeLimitExceeded, from both."""
    level: Any = ["x" * 1_000_000]
    for _ in range(7):
        level = [level, level]
    body = body_of([level])
    assert len(body) < 1_100_000
    assert both(body) == (SizeLimitExceeded, None)
    assert both(body_of([level[0]])) != (SizeLimitExceeded, None)  # 64 MB: fits


@needs_core
def test_copy_cannot_amplify_past_the_cap() -> None:
    big = "y" * 100_000
    body = body_of([big] + [big] * 700)  # COPYs of one string: 70 MB of JSON
    assert both(body) == (SizeLimitExceeded, None)


@needs_core
def test_packed_is_the_lines_back_to_back() -> None:
    body = body_of([{"a": i, "b": "é" * i} for i in range(50)] + [[]])
    text, offsets = compiled.array_to_json_packed(body, 0, len(body), -1, 0, 512)
    bounds = struct.unpack(f"={len(offsets) // 8}q", offsets)
    lines = compiled.array_to_json_lines(body, 0, len(body), -1, 0, 512)
    assert [text[a:b] for a, b in itertools.pairwise(bounds)] == lines
    assert bounds[0] == 0 and bounds[-1] == len(text)
    assert pure_json.array_to_json_packed(body, 0, len(body), -1, 0, 512) == (text, offsets)


def test_bad_arguments() -> None:
    for fn in implementations():
        with pytest.raises(ValueError, match="binary"):
            fn(b"\x40", 0, 1, -1, 3, 512)
        with pytest.raises(ValueError):
            fn(b"\x40", 0, 2, -1, 0, 512)


# -- the document layer --------------------------------------------------------------


@pytest.mark.parametrize("compress", ["none", "zstd", "zlib", "snappy"])
def test_decode_json_lines_documents(sereal: ModuleType, compress: str) -> None:
    events = [{"host": f"web-{i:02d}", "n": i, "ok": i % 2 == 0, "t": i / 3} for i in range(200)]
    document = sereal.encode(events, compress=compress, user_header={"v": 1})
    lines = sereal.decode_json_lines(document)
    assert [json.loads(line) for line in lines] == events
    assert lines == pure_codec.decode_json_lines(document)
    text, offsets = sereal.decode_json_packed(document)
    bounds = struct.unpack(f"={len(offsets) // 8}q", offsets)
    assert [text[a:b] for a, b in itertools.pairwise(bounds)] == lines


def test_decode_json_lines_options(sereal: ModuleType) -> None:
    document = doc("41 62 c3 a9")
    assert sereal.decode_json_lines(document, binary="latin1") == ['"Ã©"'.encode()]
    assert sereal.decode_json_lines(document, binary="bytes") == [b'"w6k="']
    with pytest.raises(ValueError, match="binary"):
        sereal.decode_json_lines(document, binary="ascii")
    with pytest.raises(DepthExceeded):
        sereal.decode_json_lines(doc("41 41 01"), max_depth=1)
    with pytest.raises(InvalidStructure):
        sereal.decode_json_lines(doc("41 01 01"))  # trailing bytes
    big = sereal.encode(["x" * 5000], compress="zstd")
    with pytest.raises(SerealError):
        sereal.decode_json_lines(big, max_decompressed_size=100)
