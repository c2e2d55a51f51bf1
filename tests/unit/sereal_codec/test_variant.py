"""Variant transcoding (DESIGN.md, "Variant transcoding"): the compiled
``json_to_variant_packed`` against the pure reference (byte-identical output, or the same
error message), both against an independent reader of Spark's Variant encoding written
here from the spec (the value read back equals ``json.loads`` of the text, numbers
typed as ``parse_json`` types them), and against bytes Spark 4.3's ``parse_json`` made.
"""

from __future__ import annotations

import json
import struct
import sys
from array import array
from decimal import Context, Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sereal_testlib import core as compiled
from sereal_testlib import doc

from sereal_codec.pure import variant as pure_variant

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def pack(texts: list[bytes]) -> tuple[bytes, bytes]:
    bounds = [0]
    for t in texts:
        bounds.append(bounds[-1] + len(t))
    return b"".join(texts), array("q", bounds).tobytes()


def outcome(fn: Any, texts: list[bytes], max_depth: int = 512) -> Any:
    try:
        return fn(*pack(texts), max_depth)
    except ValueError as exc:
        return ("error", str(exc))


def both(texts: list[bytes], max_depth: int = 512) -> Any:
    """The outcome, asserted identical for both implementations (when built)."""
    pure = outcome(pure_variant.json_to_variant_packed, texts, max_depth)
    if compiled is not None:
        assert outcome(compiled.json_to_variant_packed, texts, max_depth) == pure, texts
    return pure


def rows(result: tuple[bytes, bytes, bytes, bytes]) -> list[tuple[bytes, bytes]]:
    values, voff, metas, moff = result
    v, m = array("i", voff), array("i", moff)
    return [(values[v[i] : v[i + 1]], metas[m[i] : m[i + 1]]) for i in range(len(v) - 1)]


# -- an independent reader of the encoding (Parquet / Spark Variant spec) ------------


def _uint(b: bytes, pos: int, n: int) -> int:
    return int.from_bytes(b[pos : pos + n], "little")


def read_metadata(meta: bytes) -> list[str]:
    assert meta[0] & 0x0F == 1, "version 1"
    size = (meta[0] >> 6) + 1
    n = _uint(meta, 1, size)
    offs = [_uint(meta, 1 + size * (i + 1), size) for i in range(n + 1)]
    base = 1 + size * (n + 2)
    return [meta[base + offs[i] : base + offs[i + 1]].decode() for i in range(n)]


def read_value(value: bytes, keys: list[str], pos: int = 0) -> Any:
    """The JSON-like value at ``pos``: decimals as Decimal, doubles as float."""
    header = value[pos]
    basic, vh = header & 3, header >> 2
    if basic == 1:  # short string
        return value[pos + 1 : pos + 1 + vh].decode()
    if basic in (2, 3):
        large = vh >> (4 if basic == 2 else 2) & 1
        id_size = (vh >> 2 & 3) + 1
        off_size = (vh & 3) + 1
        count_size = 4 if large else 1
        n = _uint(value, pos + 1, count_size)
        p = pos + 1 + count_size
        if basic == 3:
            offs = [_uint(value, p + i * off_size, off_size) for i in range(n + 1)]
            data = p + (n + 1) * off_size
            return [read_value(value, keys, data + offs[i]) for i in range(n)]
        ids = [_uint(value, p + i * id_size, id_size) for i in range(n)]
        p += n * id_size
        offs = [_uint(value, p + i * off_size, off_size) for i in range(n + 1)]
        data = p + (n + 1) * off_size
        names = [keys[i] for i in ids]
        assert names == sorted(names, key=lambda k: k.encode("utf-16-be")), "Java order"
        return {keys[i]: read_value(value, keys, data + o) for i, o in zip(ids, offs, strict=False)}
    prim = {0: None, 1: True, 2: False}
    if vh in prim:
        return prim[vh]
    if vh in (3, 4, 5, 6):
        size = {3: 1, 4: 2, 5: 4, 6: 8}[vh]
        return int.from_bytes(value[pos + 1 : pos + 1 + size], "little", signed=True)
    if vh == 7:
        return struct.unpack("<d", value[pos + 1 : pos + 9])[0]
    if vh in (8, 9, 10):
        size = {8: 4, 9: 8, 10: 16}[vh]
        unscaled = int.from_bytes(value[pos + 2 : pos + 2 + size], "little", signed=True)
        return Decimal(unscaled).scaleb(-value[pos + 1], context=Context(prec=80))
    assert vh == 16, f"unexpected primitive {vh}"
    n = _uint(value, pos + 1, 4)
    return value[pos + 5 : pos + 5 + n].decode()


def parse_json_typed(text: bytes) -> Any:
    """json.loads with parse_json's number typing: a number with '.' and no exponent of
    at most 38 digits and 38 fraction digits is a decimal; other non-integers doubles;
    integers beyond int64 decimals (at most 38 digits) or doubles."""

    def number(s: str) -> Any:
        if "e" in s.lower():
            return float(s)
        d = Decimal(s)
        digits = len(s.replace("-", "").replace(".", "").lstrip("0")) or 1
        scale = len(s.partition(".")[2])
        if "." not in s and -(2**63) <= int(d) < 2**63:
            return int(d)
        return d if digits <= 38 and scale <= 38 else float(s)

    return json.loads(text, parse_float=number, parse_int=number)


def same(a: Any, b: Any) -> bool:
    """Equal, with types: Decimal vs float vs int differ; floats bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return set(a) == set(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


# -- strategies ------------------------------------------------------------------------

keys_st = st.text(
    alphabet=st.sampled_from(["a", "b", "é", "\u6771", "\ue000", "\uffff", "\U0001f600"]),
    max_size=3,
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=80)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(keys_st, inner, max_size=6),
    max_leaves=30,
)


def dumps(value: Any, ascii_only: bool) -> bytes:
    text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass")


# -- tests ------------------------------------------------------------------------------


@SETTINGS
@given(st.lists(json_values, min_size=1, max_size=4), st.booleans())
def test_identical_and_reads_back(values: list[Any], ascii_only: bool) -> None:
    texts = [dumps(v, ascii_only) for v in values]
    if any(b"\\ud8" in t.lower() or b"\\udc" in t.lower() for t in texts):
        return  # lone surrogates in generated text: covered by the error tests
    result = both(texts)
    assert result[0] != "error", result
    for text, (value, meta) in zip(texts, rows(result), strict=True):
        assert same(read_value(value, read_metadata(meta)), parse_json_typed(text)), text


@SETTINGS
@given(
    st.lists(
        st.from_regex(
            r"-?(0|[1-9][0-9]{0,45})(\.[0-9]{1,45})?([eE][+-]?[0-9]{1,3})?", fullmatch=True
        ),
        min_size=1,
        max_size=8,
    )
)
def test_number_texts(numbers: list[str]) -> None:
    texts = [n.encode() for n in numbers] + [("[" + ",".join(numbers) + "]").encode()]
    result = both(texts)
    assert result[0] != "error", result
    for text, (value, meta) in zip(texts, rows(result), strict=True):
        assert same(read_value(value, read_metadata(meta)), parse_json_typed(text)), text


@SETTINGS
@given(st.lists(json_values, min_size=1, max_size=2), st.data())
def test_identical_on_mutated_texts(values: list[Any], data: st.DataObject) -> None:
    texts = [bytearray(dumps(v, data.draw(st.booleans()))) for v in values]
    for _ in range(data.draw(st.integers(1, 3))):
        t = texts[data.draw(st.integers(0, len(texts) - 1))]
        if t:
            i = data.draw(st.integers(0, len(t) - 1))
            t[i] = data.draw(st.sampled_from(list(b'{}[]",:\\u0123456789-.eE ntf\x00\x80\xc3\xed')))
    both([bytes(t) for t in texts])


@SETTINGS
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=3))
def test_identical_on_arbitrary_bytes(texts: list[bytes]) -> None:
    both(texts)


# Made by Spark 4.3.0: parse_json(...) collected as VariantVal (value hex, metadata hex).
SPARK_VECTORS = [
    (
        b'{"b":1,"a":[1,null,true,"x"], "c":0.25}',
        "020301000202000f150c01030400020304060c0100040578200219000000",
        "010300010203626163",
    ),
]


@pytest.mark.parametrize(("text", "value_hex", "meta_hex"), SPARK_VECTORS)
def test_spark_vectors(text: bytes, value_hex: str, meta_hex: str) -> None:
    assert rows(both([text])) == [(bytes.fromhex(value_hex), bytes.fromhex(meta_hex))]


@pytest.mark.parametrize(
    ("text", "typed"),
    [
        (b"300", 300),
        (b"-9223372036854775808", -(2**63)),
        (b"18446744073709551615", Decimal(2**64 - 1)),
        (b"0.25", Decimal("0.25")),
        (b"100.0", Decimal("100.0")),
        (b"-0.0", Decimal("0.0")),
        (b"1e21", 1e21),
        (b"1" * 39, float("1" * 39)),
        (b"0." + b"0" * 38 + b"1", 1e-39),
        (b'"\\u00e9\\ud83d\\ude00"', "\u00e9\U0001f600"),
        (b'"' + b"x" * 64 + b'"', "x" * 64),
        (b' [ 1 , { "k" : [ ] } ] ', [1, {"k": []}]),
    ],
)
def test_typing_examples(text: bytes, typed: Any) -> None:
    ((value, meta),) = rows(both([text]))
    assert same(read_value(value, read_metadata(meta)), typed)


def test_keys_in_java_order_and_first_appearance() -> None:
    text = json.dumps({"\ue000": 1, "\U0001f600": 2, "b": {"a": 3, "b": 4}, "a": 5}).encode()
    ((value, meta),) = rows(both([text]))
    assert read_metadata(meta) == ["\ue000", "\U0001f600", "b", "a"]
    # field ids sorted by key in UTF-16 order: a, b, U+1F600 (surrogates), U+E000
    assert value[2:6] == bytes([3, 2, 1, 0])


def test_large_containers() -> None:
    big = {f"k{i:04d}": "v" * (i % 70) for i in range(300)}
    texts = [json.dumps(big).encode(), json.dumps(list(range(70000))).encode()]
    result = both(texts)
    for text, (value, meta) in zip(texts, rows(result), strict=True):
        assert value[0] >> 2 & (0x10 if text.startswith(b"{") else 0x04)  # is_large
        assert same(read_value(value, read_metadata(meta)), json.loads(text))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"a":1,"a":2}', "JSON text 0: duplicate key 'a' at byte 12"),
        (b"", "JSON text 0: expected a value at byte 0"),
        (b"[1,]", "JSON text 0: expected a value at byte 3"),
        (b"01", "JSON text 0: invalid number at byte 0"),
        (b"1.", "JSON text 0: invalid number at byte 0"),
        (b"-", "JSON text 0: invalid number at byte 0"),
        (b'"\\ud800"', "JSON text 0: lone surrogate escape at byte 1"),
        (b'"\\x"', "JSON text 0: invalid escape at byte 1"),
        (b'"ab', "JSON text 0: unterminated string at byte 3"),
        (b'"a\x01"', "JSON text 0: control character in a string at byte 2"),
        (b'"\xc3("', "JSON text 0: invalid UTF-8 at byte 1"),
        (b'{"a" 1}', "JSON text 0: expected ':' at byte 5"),
        (b"{1:2}", "JSON text 0: expected a key at byte 1"),
        (b"[1 2]", "JSON text 0: expected ',' or ']' at byte 3"),
        (b'{"a":1 "b"}', "JSON text 0: expected ',' or '}' at byte 7"),
        (b"nul", "JSON text 0: expected a value at byte 0"),
        (b"1 2", "JSON text 0: trailing characters at byte 2"),
    ],
)
def test_errors(text: bytes, message: str) -> None:
    assert both([b"{}", text]) == ("error", message.replace("text 0", "text 1"))


def test_depth_limit() -> None:
    assert both([b"[[[1]]]"], max_depth=3)[0] != "error"
    assert both([b"[[[1]]]"], max_depth=2) == (
        "error",
        "JSON text 0: nesting deeper than max_depth=2 at byte 2",
    )


@pytest.mark.parametrize("offsets", [b"", b"\x00" * 7, array("q", [0, 5, 2]).tobytes()])
def test_bad_offsets(offsets: bytes) -> None:
    fns = [pure_variant.json_to_variant_packed] + (
        [compiled.json_to_variant_packed] if compiled is not None else []
    )
    for fn in fns:
        with pytest.raises(ValueError, match="offsets"):
            fn(b"[1]  ", offsets)


def test_decode_variant_packed_documents(sereal: ModuleType) -> None:
    sys.path.insert(0, str(Path(__file__).parents[3] / "bench"))
    from events import generate_events

    events = generate_events(500, seed=11)
    document = sereal.encode(events, compress="zstd", dedupe_strings=True)
    text, offsets = sereal.decode_json_packed(document)
    got = sereal.decode_variant_packed(document)
    assert got == pure_variant.json_to_variant_packed(text, offsets)
    for event, (value, meta) in zip(events, rows(got), strict=True):
        line = json.dumps(event, ensure_ascii=False).encode()
        assert same(read_value(value, read_metadata(meta)), parse_json_typed(line))
    # [{a: 1, a: 2}]: the JSON text keeps both, parse_json refuses it, so do we
    with pytest.raises(ValueError, match="JSON text 0: duplicate key 'a'"):
        sereal.decode_variant_packed(doc("41 52 61 61 01 61 61 02"))
