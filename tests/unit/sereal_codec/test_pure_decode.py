"""Body decoding: every tag, Perl's shapes, binary modes, and every decode error with
its offset. Hand-built vectors; Perl-produced ones were captured from Sereal 5.003.

Offsets in errors are document offsets for a raw body: body index + ``BODY``.
"""

from __future__ import annotations

import math
import struct
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sereal_testlib import BODY, V4, doc

from sereal_codec.errors import (
    BadBackReference,
    DepthExceeded,
    InvalidStructure,
    SerealDecodeError,
    TruncatedInput,
    UnknownTag,
)
from sereal_codec.pure import backend as pure_body
from sereal_codec.pure import decoder
from sereal_codec.pure.encoder import varint
from sereal_codec.types import PerlObject, PerlRef, PerlRegexp


def _long_double(mantissa: int, sign_exp: int) -> str:
    return "24 " + (struct.pack("<QH", mantissa, sign_exp) + b"\0" * 6).hex(" ")


def _double_hex(x: float) -> str:
    return "23 " + struct.pack("<d", x).hex(" ")


def _quad(sign: int, exponent: int, fraction: int) -> str:
    value = (sign << 127) | (exponent << 112) | fraction
    return "38 " + value.to_bytes(16, "little").hex(" ")


SCALARS: list[tuple[str, Any]] = [
    ("00", 0),
    ("0f", 15),
    ("10", -16),
    ("1f", -1),
    ("20 10", 16),
    ("20 80 01", 128),
    ("20 ff ff ff ff ff ff ff ff ff 01", 2**64 - 1),
    ("20 81 80 80 00", 1),  # padded varint
    ("21 01", -1),
    ("21 02", 1),
    ("21 fe ff ff ff ff ff ff ff ff 01", 2**63 - 1),
    ("21 ff ff ff ff ff ff ff ff ff 01", -(2**63)),
    ("22 00 00 c0 3f", 1.5),
    ("23 " + struct.pack("<d", 0.1).hex(" "), 0.1),
    (_long_double(1 << 63, 0x3FFF), 1.0),
    (_long_double(3 << 62, 0xC000), -3.0),
    (_long_double(1 << 63, 0x7FFF), math.inf),
    (_long_double(1 << 63, 0xFFFF), -math.inf),
    (_long_double(0, 0), 0.0),
    (_long_double((1 << 63) | (1 << 10), 0x3FFF), 1.0),  # tie: rounds to even
    (_long_double((1 << 63) | (1 << 10) | 1, 0x3FFF), 1.0 + 2**-52),
    (_long_double(1 << 63, 0x3FFF + 1024), math.inf),  # beyond double range
    (_long_double(1, 1), 0.0),  # far below the smallest subnormal
    (_long_double(1 << 63, 0x3FFF - 1074), 5e-324),  # smallest subnormal double
    (_quad(0, 0x3FFF, 0), 1.0),
    (_quad(1, 0x4000, 1 << 111), -3.0),
    (_quad(0, 0x7FFF, 0), math.inf),
    (_quad(0, 0x3FFF, 1 << 59), 1.0),  # tie: 1 + 2**-53 rounds to even
    (_quad(0, 0x3FFF, (1 << 59) | 1), 1.0 + 2**-52),
    (_quad(0, 0x3FFF - 4, 0x999999999999999999999999999A), 0.1),
    (_quad(0, 0, 1), 0.0),
    ("25", None),
    ("39", None),
    ("3a", False),
    ("3b", True),
    ("34", False),
    ("35", True),
    ("60", ""),
    ("63 61 62 63", "abc"),
    ("26 03 61 62 63", "abc"),
    ("26 83 80 00 61 62 63", "abc"),  # padded length
    ("27 03 e2 98 ba", "\u263a"),
    ("27 02 c3 a9", "\xe9"),
    ("81", 1),  # the F bit on a scalar changes nothing
    ("e3 61 62 63", "abc"),
    ("3f 3f 05", 5),  # leading PAD
    ("bf 05", 5),  # PAD with the F bit is still PAD
    ("05 3f 3f bf", 5),  # trailing PAD
]


@pytest.mark.parametrize(("body", "expected"), SCALARS)
def test_scalars(sereal: ModuleType, body: str, expected: Any) -> None:
    value = sereal.decode(doc(body))
    assert type(value) is type(expected)
    assert value == expected


@pytest.mark.parametrize("body", [_long_double(1 | (1 << 63), 0x7FFF), _quad(0, 0x7FFF, 1)])
def test_wide_float_nan(sereal: ModuleType, body: str) -> None:
    assert math.isnan(sereal.decode(doc(body)))


CONTAINERS: list[tuple[str, Any]] = [
    ("40", []),
    ("42 01 02", [1, 2]),
    ("2b 02 01 02", [1, 2]),
    ("28 2b 00", []),
    ("50", {}),
    ("51 61 61 01", {"a": 1}),
    ("2a 01 61 61 01", {"a": 1}),
    ("28 2a 01 61 61 01", {"a": 1}),
    ("52 61 61 01 61 61 02", {"a": 2}),  # a repeated key keeps the last value
    ("51 3f 61 61 01", {"a": 1}),  # PAD before a key
    ("51 27 02 c3 a9 01", {"\xe9": 1}),
    ("28 01", PerlRef(1)),
    ("28 28 01", PerlRef(PerlRef(1))),
    ("28 41 01", PerlRef([1])),
    ("28 51 61 61 01", PerlRef({"a": 1})),
    ("28 3f 2b 01 01", [1]),  # PAD between REFN and ARRAY
    ("30 28 01", PerlRef(1)),  # WEAKEN
    ("31 61 78 60", PerlRegexp("x", "")),
    ("31 63 61 2b 62 61 69", PerlRegexp("a+b", "i")),
    ("2c 63 46 6f 6f 50", PerlObject("Foo", {})),
    ("32 63 46 6f 6f 28 2b 01 01", PerlObject("Foo", [1], frozen=True)),
    ("42 32 63 46 6f 6f 40 33 03 40", [PerlObject("Foo", [], True), PerlObject("Foo", [], True)]),
    ("2c 63 46 6f 6f 28 25", PerlObject("Foo", PerlRef(None))),
]


@pytest.mark.parametrize(("body", "expected"), CONTAINERS)
def test_containers_and_refs(sereal: ModuleType, body: str, expected: Any) -> None:
    assert sereal.decode(doc(body)) == expected


def test_dict_keeps_document_order(sereal: ModuleType) -> None:
    value = sereal.decode(doc("53 61 62 01 61 61 02 61 62 03"))
    assert list(value.items()) == [("b", 3), ("a", 2)]


# -- Perl-specific shapes (bytes captured from Perl's Sereal::Encoder 5.003) -----------


def test_self_referencing_scalar_ref(sereal: ModuleType) -> None:
    # my $x; $x = \$x;  ->  REFP|F 1, a tracked REFP naming itself
    value = sereal.decode(doc("a9 01"))
    assert isinstance(value, PerlRef)
    assert value.value is value


def test_shared_array(sereal: ModuleType) -> None:
    # my $a = [1]; [$a, $a]
    value = sereal.decode(doc("42 28 ab 01 01 29 03"))
    assert value == [[1], [1]]
    assert value[0] is value[1]


def test_cyclic_array(sereal: ModuleType) -> None:
    # my $c = []; push @$c, $c;
    value = sereal.decode(doc("28 ab 01 29 02"))
    assert value[0] is value


def test_cyclic_hash(sereal: ModuleType) -> None:
    value = sereal.decode(doc("28 aa 01 61 73 29 02"))
    assert value["s"] is value


def test_ref_to_tracked_ref(sereal: ModuleType) -> None:
    # my $r = [1]; [\$r, $r, \$r]
    value = sereal.decode(doc("43 28 a8 ab 01 01 29 04 29 03"))
    assert value == [PerlRef([1]), [1], PerlRef([1])]
    assert value[0].value is value[1]
    assert value[2].value is value[1]


def test_alias(sereal: ModuleType) -> None:
    value = sereal.decode(doc("42 a8 2b 00 2e 02"))
    assert value == [[], []]
    assert value[0] is value[1]


def test_tracked_scalar_referenced_twice(sereal: ModuleType) -> None:
    # my $s = "str"; [\$s, \$s]
    value = sereal.decode(doc("42 28 e3 73 74 72 29 03"))
    assert value == [PerlRef("str"), PerlRef("str")]


def test_object_referencing_itself(sereal: ModuleType) -> None:
    # my $p; $p = bless [\$p], "Foo";  ->  OBJECT|F "Foo" ARRAYREF_1 REFP 1
    value = sereal.decode(doc("ac 63 46 6f 6f 41 29 01"))
    assert isinstance(value, PerlObject)
    assert value.class_name == "Foo"
    assert value.value[0].value is value


def test_blessed_cyclic_array(sereal: ModuleType) -> None:
    # my $q = bless [], "Foo"; push @$q, $q;  (in Perl $q->[0] is the blessed $q)
    value = sereal.decode(doc("2c 63 46 6f 6f 28 ab 01 29 07"))
    assert value.class_name == "Foo"
    assert value.value[0] is value


def test_objectv(sereal: ModuleType) -> None:
    # [bless({a=>1}, "Foo"), bless([], "Foo")]
    value = sereal.decode(doc("42 2c 63 46 6f 6f 28 2a 01 61 61 01 2d 03 28 2b 00"))
    assert value == [PerlObject("Foo", {"a": 1}), PerlObject("Foo", [])]


def test_regexps(sereal: ModuleType) -> None:
    # qr/ab+c/i and [qr/x/, qr/y/m]
    assert sereal.decode(doc("2c 66 52 65 67 65 78 70 28 31 64 61 62 2b 63 61 69")) == PerlRegexp(
        "ab+c", "i"
    )
    assert sereal.decode(
        doc("42 2c 66 52 65 67 65 78 70 28 31 61 78 60 2d 03 28 31 61 79 61 6d")
    ) == [PerlRegexp("x", ""), PerlRegexp("y", "m")]


def test_json_booleans(sereal: ModuleType) -> None:
    # [JSON::PP::true, JSON::PP::false]
    body = "42 2c 71" + b"JSON::PP::Boolean".hex(" ") + " 28 01 2d 03 28 00"
    value = sereal.decode(doc(body))
    assert value == [True, False]
    assert all(type(v) is bool for v in value)


def test_json_booleans_repeated(sereal: ModuleType) -> None:
    # [JSON::PP::true, JSON::PP::true, JSON::PP::false]: the second true is a REFP to
    # the blessed referent (POS_1|F), which is the same object
    body = "43 2c 71" + b"JSON::PP::Boolean".hex(" ") + " 28 81 29 16 2d 03 28 00"
    assert sereal.decode(doc(body)) == [True, True, False]


def test_shared_blessed_hash(sereal: ModuleType) -> None:
    # my $o = bless {}, "Foo"; [$o, $o]
    value = sereal.decode(doc("42 2c 63 46 6f 6f 28 aa 00 29 08"))
    assert value == [PerlObject("Foo", {}), PerlObject("Foo", {})]
    assert value[0] is value[1]


@pytest.mark.parametrize(
    ("inner", "expected"),
    [
        ("60", False),
        ("61 30", False),
        ("61 31", True),
        ("62 30 30", True),
        ("25", False),
        (_double_hex(0.0), False),
        (_double_hex(math.nan), True),
        ("3b", True),
        ("1f", True),
    ],
)
def test_boolean_truthiness(sereal: ModuleType, inner: str, expected: bool) -> None:
    assert sereal.decode(doc("2c 67 62 6f 6f 6c 65 61 6e 28 " + inner)) is expected


def test_boolean_class_over_a_hash_stays_an_object(sereal: ModuleType) -> None:
    value = sereal.decode(doc("2c 67 62 6f 6f 6c 65 61 6e 50"))
    assert value == PerlObject("boolean", {})


def test_frozen_regexp_stays_an_object(sereal: ModuleType) -> None:
    value = sereal.decode(doc("32 66 52 65 67 65 78 70 28 31 61 78 60"))
    assert value == PerlObject("Regexp", PerlRef(PerlRegexp("x", "")), frozen=True)


def test_perl_undef_forms(sereal: ModuleType) -> None:
    assert sereal.decode(doc("42 25 28 39")) == [None, PerlRef(None)]


# -- COPY -----------------------------------------------------------------------------


def test_copy_value_and_key(sereal: ModuleType) -> None:
    # dedupe_strings: ["abcd", "abcd"] and [{abc=>1}, {abc=>2}] from Perl
    assert sereal.decode(doc("42 64 61 62 63 64 2f 02")) == ["abcd", "abcd"]
    value = sereal.decode(doc("42 28 2a 01 63 61 62 63 01 28 2a 01 2f 05 02"))
    assert value == [{"abc": 1}, {"abc": 2}]


def test_copy_as_class_name_and_regexp_part(sereal: ModuleType) -> None:
    value = sereal.decode(doc("43 63 46 6f 6f 2c 2f 02 50 31 2f 02 60"))
    assert value == ["Foo", PerlObject("Foo", {}), PerlRegexp("Foo", "")]


def test_copy_of_a_key_as_a_value(sereal: ModuleType) -> None:
    assert sereal.decode(doc("42 51 63 61 62 63 01 2f 03")) == [{"abc": 1}, "abc"]


def test_copy_of_a_tracked_string(sereal: ModuleType) -> None:
    assert sereal.decode(doc("42 e3 61 62 63 2f 02")) == ["abc", "abc"]


def test_copy_value_keeps_its_role(sereal: ModuleType) -> None:
    # the same literal as a key (always str) and through COPY as a value in bytes mode
    value = sereal.decode(doc("42 51 63 61 62 63 01 2f 03"), binary="bytes")
    assert value == [{"abc": 1}, b"abc"]


# -- binary modes ----------------------------------------------------------------------


BINARY_CASES = [
    ("utf8", "63 e9 74 e9", "\udce9t\udce9"),
    ("latin1", "63 e9 74 e9", "\xe9t\xe9"),
    ("bytes", "63 e9 74 e9", b"\xe9t\xe9"),
    ("utf8", "62 c3 a9", "\xe9"),
    ("latin1", "62 c3 a9", "\xc3\xa9"),
    ("bytes", "27 02 c3 a9", "\xe9"),  # STR_UTF8 is text in every mode
    ("latin1", "27 02 c3 a9", "\xe9"),
    ("utf8", "27 03 ed a0 80", "\udced\udca0\udc80"),  # Perl's utf8 surrogate
]


@pytest.mark.parametrize(("mode", "body", "expected"), BINARY_CASES)
def test_binary_modes(sereal: ModuleType, mode: str, body: str, expected: Any) -> None:
    assert sereal.decode(doc(body), binary=mode) == expected


@pytest.mark.parametrize(
    ("mode", "key"), [("utf8", "\udce9"), ("latin1", "\xe9"), ("bytes", "\udce9")]
)
def test_keys_are_always_str(sereal: ModuleType, mode: str, key: str) -> None:
    assert sereal.decode(doc("51 61 e9 01"), binary=mode) == {key: 1}


@pytest.mark.parametrize("payload", [b"\xff\xfe", b"caf\xe9", b"\xed\xa0\x80", b"ok", b"a\xc3"])
def test_surrogateescape_reencodes_to_the_same_bytes(sereal: ModuleType, payload: bytes) -> None:
    # bytes that are not UTF-8 come back as str and re-encode to the very same document
    original = sereal.encode(payload, compress="none")
    text = sereal.decode(original)
    assert isinstance(text, str)
    assert sereal.encode(text, compress="none") == original


def test_utf8_binary_reencodes_as_text_with_the_same_bytes(sereal: ModuleType) -> None:
    # valid non-ASCII UTF-8 in a BINARY decodes to plain text, which is STR_UTF8
    text = sereal.decode(doc("62 c3 a9"))
    assert text == "\xe9"
    assert sereal.encode(text, compress="none") == doc("27 02 c3 a9")


# -- errors, each with its offset -----------------------------------------------------


ERRORS: list[tuple[str, type[SerealDecodeError], int]] = [
    # truncation: offset is where the input ran out
    ("", TruncatedInput, 0),
    ("3f 3f", TruncatedInput, 2),
    ("26 05 61", TruncatedInput, 3),
    ("65 61", TruncatedInput, 2),
    ("20 80", TruncatedInput, 2),
    ("23 00 00", TruncatedInput, 3),
    ("24 00", TruncatedInput, 2),
    ("42 01", TruncatedInput, 2),
    ("2b 05 01 02", TruncatedInput, 4),
    ("2b ff ff ff ff ff ff ff ff 7f", TruncatedInput, 10),  # a huge count
    ("2a 02 61 61 01", TruncatedInput, 5),  # more pairs than half the bytes left
    ("51 61 61", TruncatedInput, 3),
    ("28", TruncatedInput, 1),
    ("2c 63 46 6f 6f", TruncatedInput, 5),
    ("26 ff ff ff ff 0f", TruncatedInput, 6),  # a length claiming gigabytes
    # bad varints: offset of the varint's first byte
    ("20" + " 80" * 16 + " 01", InvalidStructure, 1),
    ("20 ff ff ff ff ff ff ff ff ff 02", InvalidStructure, 1),
    # structure: offset of the offending tag
    ("51 01 01", InvalidStructure, 1),
    ("51 3f 2b 00 01", InvalidStructure, 2),
    ("2c 01 50", InvalidStructure, 1),
    ("31 01 60", InvalidStructure, 1),
    ("01 02", InvalidStructure, 1),  # trailing bytes
    ("01 3f 02", InvalidStructure, 2),
    # unknown tags
    ("3c", UnknownTag, 0),
    ("3e 00", UnknownTag, 0),
    ("36", UnknownTag, 0),
    ("37", UnknownTag, 0),
    ("3d", UnknownTag, 0),
    ("bc", UnknownTag, 0),
    ("41 36", UnknownTag, 1),
    # back-references: offset of the referring tag
    ("29 01", BadBackReference, 0),  # untracked REFP naming itself
    ("29 05", BadBackReference, 0),  # forward
    ("42 2b 00 29 02", BadBackReference, 3),  # untracked target
    ("2e 01", BadBackReference, 0),
    ("42 2b 00 2e 02", BadBackReference, 3),
    ("42 63 61 62 63 2f 03", BadBackReference, 5),  # COPY into the middle of a string
    ("42 20 10 2f 02", BadBackReference, 3),  # COPY of a non-string
    ("43 63 61 62 63 2f 02 2f 06", BadBackReference, 7),  # COPY of a COPY
    ("42 2f 03 63 61 62 63", BadBackReference, 1),  # forward COPY
    ("2f 00", BadBackReference, 0),  # before the body
    ("51 2f 01 01", BadBackReference, 1),  # key COPY naming the hash
    ("42 63 46 6f 6f 2d 02 50", BadBackReference, 5),  # OBJECTV at a non-class string
    ("2d 01 50", BadBackReference, 0),
]


@pytest.mark.parametrize(("body", "error", "offset"), ERRORS)
def test_errors(sereal: ModuleType, body: str, error: type[SerealDecodeError], offset: int) -> None:
    with pytest.raises(error) as info:
        sereal.decode(doc(body))
    assert type(info.value) is error
    assert info.value.offset == BODY + offset


# -- depth -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "levels", "offset"),
    [
        ("01", 0, None),
        ("41 01", 1, 0),
        ("41 41 01", 2, 1),
        ("28 2b 01 28 2b 01 01", 2, 3),  # REFN ARRAY is one level
        ("28 3f 2a 00", 1, 0),
        ("28 28 01", 2, 1),  # REFN REFN: two
        ("28 41 01", 2, 1),  # REFN ARRAYREF: two
        ("30 28 01", 2, 1),  # WEAKEN counts
        ("2c 63 46 6f 6f 40", 2, 5),  # OBJECT counts
        ("2c 66 52 65 67 65 78 70 28 31 60 60", 2, 8),  # qr//: OBJECT + REFN
        ("2b 01 2b 01 2b 00", 3, 4),  # bare ARRAYs count
    ],
)
def test_depth(sereal: ModuleType, body: str, levels: int, offset: int | None) -> None:
    sereal.decode(doc(body), max_depth=levels)
    if offset is not None:
        with pytest.raises(DepthExceeded) as info:
            sereal.decode(doc(body), max_depth=levels - 1)
        assert info.value.offset == BODY + offset


@pytest.mark.parametrize("unit", ["41", "28 2b 01", "28", "30 28", "3f 41"])
def test_hostile_nesting_is_bounded(sereal: ModuleType, unit: str) -> None:
    body = " ".join([unit] * 100_000) + " 01"
    with pytest.raises(DepthExceeded):
        sereal.decode(doc(body))


def test_default_depth_is_usable_in_full(sereal: ModuleType) -> None:
    # 512 levels of REFN ARRAY with a PAD before each: no RecursionError
    body = " ".join(["3f 28 3f 2b 01"] * 512) + " 01"
    value = sereal.decode(doc(body))
    for _ in range(512):
        value = value[0]
    assert value == 1


# -- linear work on hostile back-references --------------------------------------------


def test_billion_laughs_copy_nesting_is_rejected(sereal: ModuleType) -> None:
    # level 0 is an array of strings; each next level would COPY the previous one
    body = "44 63 6c 6f 6c 2f 02 2f 02 2f 02"
    assert sereal.decode(doc(body)) == ["lol"] * 4
    with pytest.raises(BadBackReference):
        sereal.decode(doc("42 42 63 6c 6f 6c 2f 03 2f 02"))  # COPY of an array


def test_copy_inside_string_bytes_is_rejected(sereal: ModuleType) -> None:
    # a string whose bytes look like a big BINARY; COPY into them must not decode it
    inner = bytes([0x26, 0x04]) + b"abcd"
    body = "42 " + (bytes([0x60 | len(inner)]) + inner).hex(" ") + " 2f 03"
    with pytest.raises(BadBackReference):
        sereal.decode(doc(body))


def test_many_copies_reuse_one_decoded_string(sereal: ModuleType) -> None:
    n = 50_000
    head = b"\x2b" + varint(n)
    string = b"\x26" + varint(1024) + b"x" * 1024
    copy = b"\x2f" + varint(len(head) + 1)
    value = sereal.decode(V4 + head + string + copy * (n - 1))
    assert len(value) == n
    assert value[0] == "x" * 1024
    assert value[1] is value[-1]


# -- the body codec contract -----------------------------------------------------------


def test_decode_body_respects_end_and_base() -> None:
    data = b"JUNK" + bytes.fromhex("42 63 61 62 63 2f 02") + b"\x01\x02"
    value, pos = pure_body.decode_body(data, 4, 11, 3, 0, 512)
    assert (value, pos) == (["abc", "abc"], 11)
    with pytest.raises(TruncatedInput) as info:
        pure_body.decode_body(data, 4, 8, 3, 0, 512)
    assert info.value.offset == 8


def test_decode_body_protocol1_negative_base() -> None:
    # a decompressed v1 body: offsets count from the (absent) 6-byte header
    data = bytes.fromhex("42 28 ab 01 01 29 08")
    value, _ = pure_body.decode_body(data, 0, len(data), -6, 0, 512)
    assert value[0] is value[1]
    with pytest.raises(BadBackReference):
        pure_body.decode_body(bytes.fromhex("42 63 61 62 63 2f 01"), 0, 7, -6, 0, 512)


def test_decode_body_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="binary"):
        pure_body.decode_body(b"\x01", 0, 1, -1, 7, 512)
    with pytest.raises(ValueError, match="bounds"):
        pure_body.decode_body(b"\x01", 0, 2, -1, 0, 512)


def test_perl_truthy() -> None:
    assert not decoder.perl_truthy(0.0)
    assert decoder.perl_truthy(math.nan)
    assert decoder.perl_truthy("0.0")
    assert not decoder.perl_truthy(b"0")


# -- hostile input ---------------------------------------------------------------------

_SEEDS = [
    doc("ac 63 46 6f 6f 41 29 01"),
    doc("43 28 a8 ab 01 01 29 04 29 03"),
    doc("42 2c 63 46 6f 6f 28 2a 01 61 61 01 2d 03 28 2b 00"),
    doc("44 6c 61 62 63 64 61 62 63 64 61 62 63 64 2f 02 41 01 51 61 6b 61 76"),
    doc("2c 66 52 65 67 65 78 70 28 31 64 61 62 2b 63 61 69"),
]


@settings(max_examples=300, deadline=None)
@given(
    seed=st.sampled_from(_SEEDS),
    edits=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 255)), min_size=1, max_size=4),
    tail=st.binary(max_size=8),
)
def test_mutated_documents_raise_only_sereal_errors(
    seed: bytes, edits: list[tuple[int, int]], tail: bytes
) -> None:
    import sereal_codec as default
    from sereal_codec import pure

    data = bytearray(seed)
    for index, byte in edits:
        data[BODY + index % (len(data) - BODY)] = byte
    data += tail
    outcomes: list[tuple[type[SerealDecodeError], int | None] | None] = []
    for impl in (pure, default):
        try:
            impl.decode(bytes(data))
            outcomes.append(None)
        except SerealDecodeError as exc:
            outcomes.append((type(exc), exc.offset))
    assert outcomes[0] == outcomes[1]
