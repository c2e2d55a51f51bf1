"""Targeted tests of the compiled body codec (``sereal_codec._sereal``).

Hand-built bodies for every tag and every error class, cycles, the self-referencing
REFP Perl writes for ``$x = \\$x``, padded varints, the depth limit and hostile counts.
Bodies are written as spaced hex and decoded with protocol 2+ offsets (the body starts
at index 0, so ``base = -1`` and offset 1 is the first byte).
"""

from __future__ import annotations

import importlib
import math
import os
import random
import struct
from fractions import Fraction
from types import ModuleType
from typing import Any

import pytest
from sereal_testlib import ENCODED_SCALARS

from sereal_codec import tags
from sereal_codec.errors import (
    BadBackReference,
    DepthExceeded,
    EncodeDepthExceeded,
    InvalidStructure,
    SerealError,
    TruncatedInput,
    UnencodableValue,
    UnknownTag,
)
from sereal_codec.limits import MAX_DEPTH_CAP
from sereal_codec.types import PerlObject, PerlRef, PerlRegexp

_compiled: ModuleType | None
try:
    _compiled = importlib.import_module("sereal_codec._sereal")
except ImportError:  # checked by test_extension_is_built
    _compiled = None

needs_core = pytest.mark.skipif(
    _compiled is None,
    reason="compiled core not built (RIAK_EVENTS_NO_EXT=1 or no C compiler); "
    "test_extension_is_built fails unless that was intended",
)


@pytest.fixture
def core() -> ModuleType:
    assert _compiled is not None
    return _compiled


def test_extension_is_built() -> None:
    """CI must build the compiled core: its absence is a failure unless asked for."""
    if os.environ.get("RIAK_EVENTS_NO_EXT") == "1":
        pytest.skip("RIAK_EVENTS_NO_EXT=1: the pure codec is used on purpose")
    assert _compiled is not None, (
        "sereal_codec._sereal is missing: run `python setup.py build_ext --inplace`"
    )


def dec(
    core: ModuleType, body_hex: str, binary: int = tags.BINARY_UTF8, max_depth: int = 512
) -> Any:
    """Decode a whole body; also checks that the item spans all of it."""
    data = bytes.fromhex(body_hex)
    value, end = core.decode_body(data, 0, len(data), -1, binary, max_depth)
    assert end == len(data)
    return value


def raises(core: ModuleType, body_hex: str, exc: type[SerealError], **kw: Any) -> SerealError:
    with pytest.raises(exc) as info:
        dec(core, body_hex, **kw)
    assert isinstance(info.value.offset, int)
    return info.value


def enc(core: ModuleType, obj: Any, dedupe: bool = True, max_depth: int = 512) -> str:
    body: bytes = core.encode_body(obj, dedupe, max_depth)
    return body.hex(" ")


# -- scalars -------------------------------------------------------------------------


@needs_core
class TestScalars:
    def test_small_ints(self, core: ModuleType) -> None:
        assert [dec(core, f"{t:02x}") for t in range(16)] == list(range(16))
        assert [dec(core, f"{t:02x}") for t in range(0x10, 0x20)] == list(range(-16, 0))

    @pytest.mark.parametrize(
        ("body", "value"),
        [
            ("20 10", 16),
            ("20 ff 01", 255),
            ("20 ff ff ff ff ff ff ff ff ff 01", 2**64 - 1),
            ("21 00", 0),
            ("21 21", -17),
            ("21 fe ff ff ff ff ff ff ff ff 01", 2**63 - 1),
            ("21 ff ff ff ff ff ff ff ff ff 01", -(2**63)),
        ],
    )
    def test_varint_and_zigzag(self, core: ModuleType, body: str, value: int) -> None:
        assert dec(core, body) == value

    def test_padded_varints(self, core: ModuleType) -> None:
        # Perl pads varints with 0x80 continuation bytes; up to 16 bytes are accepted.
        assert dec(core, "20 85 80 80 00") == 5
        assert dec(core, "20 " + "80 " * 15 + "00") == 0
        assert dec(core, "26 83 80 00 61 62 63") == "abc"

    def test_varint_limits(self, core: ModuleType) -> None:
        raises(core, "20 " + "80 " * 16 + "00", InvalidStructure)  # 17 bytes
        raises(core, "20 ff ff ff ff ff ff ff ff ff 02", InvalidStructure)  # 2**64
        raises(core, "20 80 80 80 80 80 80 80 80 80 80 01", InvalidStructure)
        raises(core, "20 ff", TruncatedInput)

    def test_floats(self, core: ModuleType) -> None:
        assert dec(core, "22 " + struct.pack("<f", 1.5).hex()) == 1.5
        assert dec(core, "23 " + struct.pack("<d", -2.25).hex()) == -2.25
        assert math.isnan(dec(core, "23 " + struct.pack("<d", math.nan).hex()))
        raises(core, "23 00 00 00", TruncatedInput)

    def test_long_double_and_float128(self, core: ModuleType) -> None:
        one_x87 = "00 00 00 00 00 00 00 80 ff 3f" + " 00" * 6
        assert dec(core, "24 " + one_x87) == 1.0
        inf_x87 = "00 00 00 00 00 00 00 80 ff ff" + " 00" * 6
        assert dec(core, "24 " + inf_x87) == -math.inf
        nan_x87 = "01 00 00 00 00 00 00 c0 ff 7f" + " 00" * 6
        assert math.isnan(dec(core, "24 " + nan_x87))
        one_quad = "00" * 8 + " 00 00 00 00 00 00 ff 3f"
        assert dec(core, "38 " + one_quad) == 1.0
        assert dec(core, "38 " + "00" * 15 + " 80") == -0.0
        raises(core, "38 00", TruncatedInput)

    def test_wide_floats_round_exactly(self, core: ModuleType) -> None:
        # Compared with Fraction -> float, which rounds correctly (ties to even),
        # including subnormal results and overflow to infinity.
        rnd = random.Random(5)
        for _ in range(400):
            m = rnd.getrandbits(64)
            e = rnd.choice([rnd.randint(1, 0x7FFE), rnd.randint(15300, 15400)])
            body = m.to_bytes(8, "little") + e.to_bytes(2, "little") + bytes(6)
            exact = Fraction(m) * Fraction(2) ** (e - 16446)
            want = math.inf if exact > Fraction(2) ** 1024 else _round(exact)
            assert dec(core, "24 " + body.hex()) == want, (m, e)
            f = rnd.getrandbits(112)
            q = rnd.choice([rnd.randint(1, 0x7FFE), rnd.randint(15300, 15400), 0])
            word = f | (q << 112)
            body = word.to_bytes(16, "little")
            exact = Fraction(f if q == 0 else f + 2**112) * Fraction(2) ** (max(q, 1) - 16495)
            want = math.inf if exact > Fraction(2) ** 1024 else _round(exact)
            assert dec(core, "38 " + body.hex()) == want, (f, q)

    def test_constants(self, core: ModuleType) -> None:
        assert dec(core, "25") is None
        assert dec(core, "39") is None
        assert dec(core, "3b") is True
        assert dec(core, "35") is True
        assert dec(core, "3a") is False
        assert dec(core, "34") is False


def _round(exact: Fraction) -> float:
    try:
        return float(exact)
    except OverflowError:
        return math.inf


# -- strings -------------------------------------------------------------------------


@needs_core
class TestStrings:
    def test_short_binary_binary_utf8(self, core: ModuleType) -> None:
        assert dec(core, "60") == ""
        assert dec(core, "63 61 62 63") == "abc"
        assert dec(core, "26 03 61 62 63") == "abc"
        assert dec(core, "27 02 c3 a9") == "é"

    def test_binary_modes(self, core: ModuleType) -> None:
        body = "62 c3 a9"
        assert dec(core, body, binary=tags.BINARY_UTF8) == "é"
        assert dec(core, body, binary=tags.BINARY_LATIN1) == "Ã©"
        assert dec(core, body, binary=tags.BINARY_BYTES) == b"\xc3\xa9"
        # STR_UTF8 is UTF-8 in every mode
        assert dec(core, "27 02 c3 a9", binary=tags.BINARY_BYTES) == "é"
        assert dec(core, "27 02 c3 a9", binary=tags.BINARY_LATIN1) == "é"

    def test_invalid_utf8_is_surrogateescaped(self, core: ModuleType) -> None:
        assert dec(core, "62 ff 61") == "\udcffa"
        assert dec(core, "27 03 ed a0 80") == "\udced\udca0\udc80"

    def test_keys_are_str_in_bytes_mode(self, core: ModuleType) -> None:
        assert dec(core, "51 61 6b 61 76", binary=tags.BINARY_BYTES) == {"k": b"v"}
        assert dec(core, "51 61 e9 01", binary=tags.BINARY_LATIN1) == {"é": 1}

    def test_truncated_strings(self, core: ModuleType) -> None:
        err = raises(core, "63 61 62", TruncatedInput)
        assert err.offset == 3
        raises(core, "26 ff ff ff ff ff ff ff ff 7f", TruncatedInput)  # claims 2**63 bytes
        raises(core, "27 05 61", TruncatedInput)


# -- containers ------------------------------------------------------------------------


@needs_core
class TestContainers:
    def test_arrays(self, core: ModuleType) -> None:
        assert dec(core, "40") == []
        assert dec(core, "42 01 02") == [1, 2]
        assert dec(core, "2b 02 01 02") == [1, 2]
        assert dec(core, "28 2b 02 01 02") == [1, 2]

    def test_hashes(self, core: ModuleType) -> None:
        assert dec(core, "50") == {}
        assert dec(core, "52 61 61 01 61 62 02") == {"a": 1, "b": 2}
        assert dec(core, "2a 01 61 61 01") == {"a": 1}
        assert dec(core, "28 2a 01 61 61 01") == {"a": 1}

    def test_repeated_key_keeps_last_value_first_position(self, core: ModuleType) -> None:
        value = dec(core, "53 61 61 01 61 62 02 61 61 03")
        assert value == {"a": 3, "b": 2}
        assert list(value) == ["a", "b"]

    def test_non_string_key(self, core: ModuleType) -> None:
        raises(core, "51 01 01", InvalidStructure)
        raises(core, "51 40 01", InvalidStructure)

    def test_huge_counts_fail_before_allocating(self, core: ModuleType) -> None:
        raises(core, "2b ff ff ff ff ff ff ff ff 7f", TruncatedInput)  # 2**63 items
        raises(core, "2a ff ff ff ff 0f 01 02", TruncatedInput)
        raises(core, "2a 02 61 61 01", TruncatedInput)  # 2 pairs need >= 4 bytes
        raises(core, "2b 03 01 02", TruncatedInput)
        raises(core, "4f 01 02", TruncatedInput)
        raises(core, "5f 61 61 01", TruncatedInput)

    def test_every_prefix_of_a_document_is_truncated(self, core: ModuleType) -> None:
        body = bytes.fromhex(enc(core, {"a": [1, "xyz", {"b": 2.5}], "c": "é" * 3, "d": 2**40}))
        for cut in range(len(body)):
            with pytest.raises(TruncatedInput) as info:
                core.decode_body(body, 0, cut, -1, 0, 512)
            assert info.value.offset == cut
            # bytes past `end` are never read
            with pytest.raises(TruncatedInput):
                core.decode_body(body, 0, cut, -1, 0, 512)

    def test_decodes_inside_a_larger_buffer(self, core: ModuleType) -> None:
        body = bytes.fromhex(enc(core, [{"k": "v"}, {"k": "v"}]))
        data = b"junk" + body + b"more junk"
        value, end = core.decode_body(data, 4, 4 + len(body), 3, 0, 512)
        assert value == [{"k": "v"}, {"k": "v"}]
        assert end == 4 + len(body)

    def test_protocol_1_offsets_with_negative_base(self, core: ModuleType) -> None:
        # protocol 1: offsets count from the document start (a 6-byte header here)
        body = bytes.fromhex("42 61 61 2f 07")  # COPY 7 -> data[-6 + 7] = data[1]
        value, _ = core.decode_body(body, 0, len(body), -6, 0, 512)
        assert value == ["a", "a"]


# -- references ------------------------------------------------------------------------


@needs_core
class TestReferences:
    def test_refn_to_scalar_and_ref(self, core: ModuleType) -> None:
        assert dec(core, "28 05") == PerlRef(5)
        assert dec(core, "28 28 05") == PerlRef(PerlRef(5))
        assert dec(core, "28 41 01") == PerlRef([1])

    def test_shared_array(self, core: ModuleType) -> None:
        value = dec(core, "42 28 ab 01 01 29 03")  # Perl's [\\@a, \\@a]
        assert value == [[1], [1]]
        assert value[0] is value[1]

    def test_cyclic_list_and_dict(self, core: ModuleType) -> None:
        lst = dec(core, "28 ab 01 29 02")
        assert lst[0] is lst
        dct = dec(core, "28 aa 01 64 73 65 6c 66 29 02")
        assert dct["self"] is dct
        arr = dec(core, "c1 29 01")  # ARRAYREF_1|F holding a REFP to itself
        assert arr[0] == PerlRef(arr) and arr[0].value is arr

    def test_self_referencing_refp(self, core: ModuleType) -> None:
        value = dec(core, "a9 01")  # Perl: my $x; $x = \\$x
        assert isinstance(value, PerlRef)
        assert value.value is value

    def test_refp_to_scalar_and_alias(self, core: ModuleType) -> None:
        value = dec(core, "42 28 e3 73 74 72 29 03")  # Perl's [\\$s, \\$s]
        assert value == [PerlRef("str"), PerlRef("str")]
        assert dec(core, "42 81 2e 02") == [1, 1]
        refn_tracked = dec(core, "42 a8 2b 01 05 29 02")  # \\[5] twice
        assert refn_tracked[1] == PerlRef([5])
        assert refn_tracked[1].value is refn_tracked[0]

    @pytest.mark.parametrize(
        "body",
        [
            "42 01 29 02",  # REFP to an untracked item
            "42 01 2e 02",  # ALIAS to an untracked item
            "29 01",  # untracked REFP naming itself
            "ae 01",  # tracked ALIAS naming itself
            "42 29 04 81",  # forward
            "42 81 29 00",  # before the body
            "42 81 29 ff ff ff ff ff ff ff ff ff 01",  # far outside
            "43 a3 00 00 00 00 00 00 00 00 29 04",  # into the middle of an item
        ],
    )
    def test_bad_refp_alias(self, core: ModuleType, body: str) -> None:
        raises(core, body, BadBackReference)

    def test_weaken(self, core: ModuleType) -> None:
        assert dec(core, "30 28 05") == PerlRef(5)


@needs_core
class TestCopy:
    def test_copy_value_and_key(self, core: ModuleType) -> None:
        value = dec(core, "43 63 61 62 63 2f 02 51 2f 02 01")
        assert value == ["abc", "abc", {"abc": 1}]
        assert value[0] is not value[1]  # the literal and the (cached) copy
        keys = dec(core, "42 51 63 61 62 63 01 51 2f 03 02")
        assert keys == [{"abc": 1}, {"abc": 2}]

    def test_copies_share_one_object(self, core: ModuleType) -> None:
        value = dec(core, "44 63 61 62 63 2f 02 2f 02 2f 02")
        assert value[1] is value[2] is value[3]

    def test_copy_modes(self, core: ModuleType) -> None:
        body = "42 51 61 6b 01 2f 03"  # a value COPY of a key's bytes
        assert dec(core, body, binary=tags.BINARY_BYTES) == [{"k": 1}, b"k"]

    @pytest.mark.parametrize(
        "body",
        [
            "43 63 61 62 63 2f 02 2f 06",  # COPY of a COPY
            "42 20 10 2f 02",  # COPY of a non-string
            "42 63 61 62 63 2f 03",  # into the middle of a string
            "42 2f 03 61 61",  # forward
            "41 2f 02",  # at itself
            "42 61 61 51 2f 09 01",  # key COPY forward
            "42 20 10 51 2f 02 01",  # key COPY of a non-string
        ],
    )
    def test_bad_copy(self, core: ModuleType, body: str) -> None:
        raises(core, body, BadBackReference)

    def test_copy_cannot_amplify(self, core: ModuleType) -> None:
        # COPY of an array is refused (only strings), so no billion laughs
        raises(core, "42 42 01 01 2f 02", BadBackReference)


# -- objects ---------------------------------------------------------------------------


@needs_core
class TestObjects:
    def test_object_and_objectv(self, core: ModuleType) -> None:
        value = dec(core, "42 2c 63 46 6f 6f 28 2a 00 2d 03 28 2b 00")  # Perl output
        assert value == [PerlObject("Foo", {}), PerlObject("Foo", [])]
        assert value[0].class_name is value[1].class_name

    def test_frozen(self, core: ModuleType) -> None:
        value = dec(core, "32 63 46 6f 6f 41 01")
        assert value == PerlObject("Foo", [1], frozen=True)
        value = dec(core, "42 32 63 46 6f 6f 41 01 33 03 41 02")
        assert value[1] == PerlObject("Foo", [2], frozen=True)

    def test_booleans(self, core: ModuleType) -> None:
        cls = "71" + b"JSON::PP::Boolean".hex()
        assert dec(core, f"2c {cls} 28 01") is True
        assert dec(core, f"2c {cls} 28 00") is False
        assert dec(core, f"2c {cls} 28 60") is False
        assert dec(core, f"2c {cls} 28 61 30") is False
        assert dec(core, f"2c {cls} 28 61 31") is True
        assert dec(core, f"2c {cls} 28 25") is False
        assert dec(core, f"2c {cls} 28 41 01") == PerlObject("JSON::PP::Boolean", PerlRef([1]))
        assert dec(core, f"2c {cls} 01") == PerlObject("JSON::PP::Boolean", 1)

    def test_shared_boolean_referent(self, core: ModuleType) -> None:
        # Perl: [JSON::PP::true, JSON::PP::true, JSON::PP::false]
        cls = "71" + b"JSON::PP::Boolean".hex()
        value = dec(core, f"43 2c {cls} 28 81 29 16 2d 03 28 00")
        assert value == [True, True, False]

    def test_shared_blessed_hash(self, core: ModuleType) -> None:
        value = dec(core, "42 2c 63 46 6f 6f 28 aa 00 29 08")
        assert value[0] is value[1]
        assert value[0] == PerlObject("Foo", {})

    def test_regexp(self, core: ModuleType) -> None:
        body = "42 2c 66 52 65 67 65 78 70 28 31 64 61 62 2b 63 61 69 2d 03 28 31 61 78 60"
        assert dec(core, body) == [PerlRegexp("ab+c", "i"), PerlRegexp("x", "")]
        assert dec(core, "31 61 61 60") == PerlRegexp("a", "")
        raises(core, "31 01 60", InvalidStructure)

    def test_tracked_object_cycle(self, core: ModuleType) -> None:
        value = dec(core, "ac 63 46 6f 6f 41 29 01")  # $o = bless [\\$o], "Foo"
        assert isinstance(value, PerlObject)
        assert value.value[0].value is value

    @pytest.mark.parametrize(
        "body",
        [
            "42 63 46 6f 6f 2d 02 40",  # OBJECTV at a string that is no class name
            "2d 05 40",  # OBJECTV forward
            "42 2c 63 46 6f 6f 40 2d 04 40",  # OBJECTV into the class name's middle
        ],
    )
    def test_bad_objectv(self, core: ModuleType, body: str) -> None:
        raises(core, body, BadBackReference)

    def test_class_name_must_be_string(self, core: ModuleType) -> None:
        raises(core, "2c 01 40", InvalidStructure)


# -- PAD, unknown tags, depth ------------------------------------------------------------


@needs_core
class TestFraming:
    def test_pad(self, core: ModuleType) -> None:
        assert dec(core, "3f 3f 05") == 5
        assert dec(core, "bf 42 3f 01 3f 02") == [1, 2]
        assert dec(core, "28 3f 2b 01 05") == [5]
        data = bytes.fromhex("05 3f 3f")
        assert core.decode_body(data, 0, 3, -1, 0, 512) == (5, 1)
        raises(core, "3f 3f", TruncatedInput)
        raises(core, "", TruncatedInput)

    @pytest.mark.parametrize("tag", [0x3C, 0x3D, 0x3E, 0x36, 0x37, 0xBC, 0xBE])
    def test_unknown_tags(self, core: ModuleType, tag: int) -> None:
        err = raises(core, f"41 {tag:02x}", UnknownTag)
        assert err.offset == 1

    def test_depth_limit(self, core: ModuleType) -> None:
        assert dec(core, "41 41 01", max_depth=2) == [[1]]
        raises(core, "41 41 01", DepthExceeded, max_depth=1)
        assert dec(core, "28 2b 01 28 2b 01 01", max_depth=2) == [[1]]
        raises(core, "28 2b 01 28 2b 01 01", DepthExceeded, max_depth=1)
        assert dec(core, "05", max_depth=0) == 5
        raises(core, "40", DepthExceeded, max_depth=0)
        raises(core, "28 05", DepthExceeded, max_depth=0)

    def test_hostile_nesting_never_overflows_the_stack(self, core: ModuleType) -> None:
        for opener in ("41", "28", "30", "28 2b 01", "51 60"):
            body = bytes.fromhex(opener) * 200_000 + b"\x01"
            with pytest.raises(DepthExceeded):
                core.decode_body(body, 0, len(body), -1, 0, MAX_DEPTH_CAP)

    def test_argument_checks(self, core: ModuleType) -> None:
        with pytest.raises(ValueError, match="max_depth"):
            core.decode_body(b"\x01", 0, 1, -1, 0, MAX_DEPTH_CAP + 1)
        with pytest.raises(ValueError, match="binary"):
            core.decode_body(b"\x01", 0, 1, -1, 3, 512)
        with pytest.raises(ValueError):
            core.decode_body(b"\x01", 0, 2, -1, 0, 512)
        with pytest.raises(ValueError):
            core.decode_body(b"\x01", 1, 0, -1, 0, 512)


# -- encoding ---------------------------------------------------------------------------


@needs_core
class TestEncode:
    @pytest.mark.parametrize(
        ("value", "body"),
        [
            *ENCODED_SCALARS,
            ([], "40"),
            ((1, 2), "42 01 02"),
            ({"a": 1}, "51 61 61 01"),
            (PerlRef(5), "28 05"),
            (PerlObject("Foo", {}), "2c 63 46 6f 6f 50"),
            (PerlObject("Foo", [1], frozen=True), "32 63 46 6f 6f 41 01"),
            (PerlRegexp("ab", "i"), "2c 66 52 65 67 65 78 70 28 31 62 61 62 61 69"),
        ],
    )
    def test_exact_bytes(self, core: ModuleType, value: Any, body: str) -> None:
        assert enc(core, value) == body

    def test_big_containers(self, core: ModuleType) -> None:
        assert enc(core, list(range(16))).startswith("28 2b 10 00 01")
        assert enc(core, {str(i): i for i in range(16)}).startswith("28 2a 10 61 30 00")

    def test_dedupe(self, core: ModuleType) -> None:
        value = [{"host": "web-1"}, {"host": "web-1"}, "host"]
        assert enc(core, value) == "43 51 64 68 6f 73 74 65 77 65 62 2d 31 51 2f 03 2f 08 2f 03"
        assert enc(core, value, dedupe=False) == (
            "43 51 64 68 6f 73 74 65 77 65 62 2d 31 51 2f 03 65 77 65 62 2d 31 64 68 6f 73 74"
        )
        # COPY only when strictly shorter: a 1-byte string never
        assert enc(core, ["a", "a"]) == "42 61 61 61 61"
        # str and bytes are different strings
        assert enc(core, ["ab", b"ab"]) == "42 62 61 62 62 61 62"

    def test_class_names_use_objectv(self, core: ModuleType) -> None:
        value = [PerlObject("Foo", 1), PerlObject("Foo", 2), "Foo"]
        assert enc(core, value) == "43 2c 63 46 6f 6f 01 2d 03 02 63 46 6f 6f"

    def test_shared_and_cyclic(self, core: ModuleType) -> None:
        inner = [1]
        assert enc(core, [inner, inner]) == "42 28 ab 01 01 29 03"
        cyc: list[Any] = []
        cyc.append(cyc)
        assert enc(core, cyc) == "28 ab 01 29 02"
        decoded = dec(core, enc(core, cyc))
        assert decoded[0] is decoded

    def test_unencodable(self, core: ModuleType) -> None:
        for bad in ({1}, object(), 2**64, -(2**63) - 1, {1: 2}, PerlObject(b"x", 1)):  # type: ignore[arg-type]
            with pytest.raises(UnencodableValue):
                core.encode_body(bad, True, 512)

    def test_depth(self, core: ModuleType) -> None:
        assert core.encode_body([[1]], True, 2)
        with pytest.raises(EncodeDepthExceeded):
            core.encode_body([[1]], True, 1)
        with pytest.raises(EncodeDepthExceeded):
            core.encode_body(PerlRegexp("a", ""), True, 1)
        selfref = PerlRef()
        selfref.value = selfref
        assert enc(core, selfref) == "a9 01"  # a cycle is a back-reference, not depth
        deep: Any = 1
        for _ in range(20_000):
            deep = [deep]
        with pytest.raises(EncodeDepthExceeded):
            core.encode_body(deep, True, MAX_DEPTH_CAP)

    def test_round_trip(self, core: ModuleType) -> None:
        value = {
            "a": [1, -1, 2**63, 1.25, None, True, False, "x" * 40, "é", "\x00"],
            "b": PerlObject("Foo", {"k": PerlRef("v")}),
            "c": PerlRegexp("^a", "ms"),
        }
        body = core.encode_body(value, True, 512)
        got, end = core.decode_body(body, 0, len(body), -1, tags.BINARY_UTF8, 512)
        assert end == len(body)
        assert got == value
