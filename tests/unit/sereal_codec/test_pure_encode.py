"""Body encoding: the exact bytes of DESIGN.md's encoding table (the compiled core must
write the same), sharing, dedupe, errors, and round trips through decode.

Several expected bodies are byte-for-byte what Perl's Sereal::Encoder 5.003 writes for
the same value.
"""

from __future__ import annotations

from collections import OrderedDict
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sereal_testlib import ENCODED_SCALARS, body_of

from sereal_codec.errors import EncodeDepthExceeded, UnencodableValue
from sereal_codec.pure.encoder import encode_body, varint
from sereal_codec.types import PerlObject, PerlRef, PerlRegexp


@pytest.mark.parametrize(("value", "body"), ENCODED_SCALARS)
def test_scalars(sereal: ModuleType, value: Any, body: str) -> None:
    assert body_of(sereal.encode(value, compress="none")) == body


CONTAINERS: list[tuple[Any, str]] = [
    ([], "40"),
    ((), "40"),
    ([1, 2], "42 01 02"),
    ((1, 2), "42 01 02"),
    (list(range(15)), "4f " + " ".join(f"{i:02x}" for i in range(15))),
    (list(range(16)), "28 2b 10 " + " ".join(f"{i:02x}" for i in range(16))),
    ({}, "50"),
    ({"a": 1}, "51 61 61 01"),
    ({b"k": 1}, "51 61 6b 01"),
    ({"\xe9": 1}, "51 27 02 c3 a9 01"),
    (OrderedDict([("b", 1), ("a", 2)]), "52 61 62 01 61 61 02"),
    (
        {f"k{i:02d}": 0 for i in range(16)},
        "28 2a 10 " + " ".join(f"63 6b 3{i // 10} 3{i % 10} 00" for i in range(16)),
    ),
    (PerlRef(1), "28 01"),
    (PerlRef([1]), "28 41 01"),
    (PerlRef(PerlRef(None)), "28 28 25"),
    (PerlObject("Foo", {}), "2c 63 46 6f 6f 50"),
    (PerlObject("Foo", [1], frozen=True), "32 63 46 6f 6f 41 01"),
    (PerlObject("\xe9", []), "2c 27 02 c3 a9 40"),
]


@pytest.mark.parametrize(("value", "body"), CONTAINERS)
def test_containers(sereal: ModuleType, value: Any, body: str) -> None:
    assert body_of(sereal.encode(value, compress="none")) == body


# -- byte-identical to Perl -----------------------------------------------------------


def test_shared_array_as_perl_writes_it(sereal: ModuleType) -> None:
    a = [1]
    assert body_of(sereal.encode([a, a], compress="none")) == "42 28 ab 01 01 29 03"


def test_cyclic_array_as_perl_writes_it(sereal: ModuleType) -> None:
    c: list[Any] = []
    c.append(c)
    assert body_of(sereal.encode(c, compress="none")) == "28 ab 01 29 02"


def test_regexps_as_perl_writes_them(sereal: ModuleType) -> None:
    regexp = "2c 66 52 65 67 65 78 70 28 31 64 61 62 2b 63 61 69"
    assert body_of(sereal.encode(PerlRegexp("ab+c", "i"), compress="none")) == regexp
    pair = [PerlRegexp("x", ""), PerlRegexp("y", "m")]
    expected = "42 2c 66 52 65 67 65 78 70 28 31 61 78 60 2d 03 28 31 61 79 61 6d"
    assert body_of(sereal.encode(pair, compress="none")) == expected


def test_objectv(sereal: ModuleType) -> None:
    # Perl writes REFN HASH / REFN ARRAY where we write HASHREF_n / ARRAYREF_n: the same
    value = [PerlObject("Foo", {"a": 1}), PerlObject("Foo", [])]
    expected = "42 2c 63 46 6f 6f 51 61 61 01 2d 03 40"
    assert body_of(sereal.encode(value, compress="none")) == expected


def test_value_dedupe(sereal: ModuleType) -> None:
    # Perl writes "ab" twice (it only dedupes strings over 3 bytes); we COPY whenever
    # that is shorter: 2 bytes against 3
    value = ["abcd", "abcd", "ab", "ab"]
    expected = "44 64 61 62 63 64 2f 02 62 61 62 2f 09"
    assert body_of(sereal.encode(value, compress="none")) == expected


# -- sharing ---------------------------------------------------------------------------


def test_shared_dict_and_tuple(sereal: ModuleType) -> None:
    d = {"a": 1}
    t = (1,)
    body = body_of(sereal.encode([d, t, d, t], compress="none"))
    assert body == "44 28 aa 01 61 61 01 28 ab 01 01 29 03 29 09"
    decoded = sereal.decode(sereal.encode([d, t, d, t]))
    assert decoded[0] is decoded[2]
    assert decoded[1] is decoded[3]


def test_shared_big_list_keeps_the_array_form(sereal: ModuleType) -> None:
    big = list(range(16))
    body = body_of(sereal.encode([big, big], compress="none"))
    assert body.startswith("42 28 ab 10 00 01")
    assert body.endswith("29 03")


def test_cyclic_dict(sereal: ModuleType) -> None:
    d: dict[str, Any] = {}
    d["self"] = d
    assert body_of(sereal.encode(d, compress="none")) == "28 aa 01 64 73 65 6c 66 29 02"
    back = sereal.decode(sereal.encode(d))
    assert back["self"] is back


def test_perl_ref_cycle_as_perl_writes_it(sereal: ModuleType) -> None:
    # my $x; $x = \$x;  ->  REFP|F 1 (a tracked REFP naming itself)
    r = PerlRef()
    r.value = r
    assert body_of(sereal.encode(r, compress="none")) == "a9 01"


# -- string dedupe ---------------------------------------------------------------------


def test_keys_always_deduped(sereal: ModuleType) -> None:
    value = [{"abc": 1}, {"abc": 2}]
    expected = "42 51 63 61 62 63 01 51 2f 03 02"
    assert body_of(sereal.encode(value, compress="none", dedupe_strings=False)) == expected
    assert body_of(sereal.encode(value, compress="none", dedupe_strings=True)) == expected


def test_values_deduped_only_when_asked(sereal: ModuleType) -> None:
    value = ["abcd", "abcd"]
    assert body_of(sereal.encode(value, compress="none", dedupe_strings=False)) == (
        "42 64 61 62 63 64 64 61 62 63 64"
    )


def test_keys_and_values_share_one_table(sereal: ModuleType) -> None:
    value = [{"abcd": "abcd"}, "abcd"]
    assert body_of(sereal.encode(value, compress="none")) == "42 51 64 61 62 63 64 2f 03 2f 03"


def test_copy_only_when_strictly_shorter(sereal: ModuleType) -> None:
    # "ab" literal: 3 bytes; COPY 2: 2 bytes. "a": 2 bytes vs COPY: 2 bytes, no COPY.
    assert body_of(sereal.encode(["ab", "ab"], compress="none")) == "42 62 61 62 2f 02"
    assert body_of(sereal.encode(["a", "a"], compress="none")) == "42 61 61 61 61"


def test_copy_offset_length_counts(sereal: ModuleType) -> None:
    # a 1-byte string at offset >= 128 would need a 3-byte COPY: written literally
    value = ["x" * 200, "ab", "ab"]
    body = bytes.fromhex(body_of(sereal.encode(value, compress="none")))
    assert body[-6:] == bytes.fromhex("62 61 62 62 61 62")
    value = ["x" * 200, "abcd", "abcd"]
    body = bytes.fromhex(body_of(sereal.encode(value, compress="none")))
    assert body[-3:] == b"\x2f" + varint(205)  # 1-based offset of the literal


def test_str_and_bytes_are_different_strings(sereal: ModuleType) -> None:
    assert body_of(sereal.encode(["abcd", b"abcd"], compress="none")) == (
        "42 64 61 62 63 64 64 61 62 63 64"
    )
    assert body_of(sereal.encode([b"abcd", bytearray(b"abcd")], compress="none")) == (
        "42 64 61 62 63 64 2f 02"
    )


def test_utf8_copy_accounts_for_the_length_byte(sereal: ModuleType) -> None:
    # STR_UTF8 has no short form: "\xe9" is 4 bytes, COPY 2 is 2 bytes
    assert body_of(sereal.encode(["\xe9", "\xe9"], compress="none")) == "42 27 02 c3 a9 2f 02"


def test_class_names_are_not_copy_targets(sereal: ModuleType) -> None:
    value = [PerlObject("Fooo", {}), "Fooo"]
    assert (
        body_of(sereal.encode(value, compress="none")) == "42 2c 64 46 6f 6f 6f 50 64 46 6f 6f 6f"
    )


def test_regexp_parts_are_literal(sereal: ModuleType) -> None:
    value = ["abcd", PerlRegexp("abcd", "")]
    body = body_of(sereal.encode(value, compress="none"))
    assert body.endswith("28 31 64 61 62 63 64 60")


# -- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        object(),
        memoryview(b"x"),
        2**64,
        -(2**63) - 1,
        {1: 2},
        {("a",): 1},
        [1, {2.5: 1}],
        PerlObject(b"Foo", {}),  # type: ignore[arg-type]
        PerlRegexp(b"x", ""),  # type: ignore[arg-type]
    ],
    ids=repr,
)
def test_unencodable(sereal: ModuleType, value: Any) -> None:
    with pytest.raises(UnencodableValue) as info:
        sereal.encode(value)
    assert isinstance(info.value, ValueError)


def test_unencodable_names_the_type(sereal: ModuleType) -> None:
    with pytest.raises(UnencodableValue, match="frozenset"):
        sereal.encode([frozenset()])


@pytest.mark.parametrize(
    ("value", "levels"),
    [
        (1, 0),
        ([1], 1),
        ([[1]], 2),
        ([list(range(16))], 2),
        (PerlRef([1]), 2),
        (PerlObject("Foo", {}), 2),
        (PerlRegexp("x", ""), 2),
        ([PerlRegexp("x", "")], 3),
    ],
)
def test_depth_matches_the_decoder(sereal: ModuleType, value: Any, levels: int) -> None:
    data = sereal.encode(value, max_depth=levels)
    assert sereal.decode(data, max_depth=levels) == value
    if levels:
        with pytest.raises(EncodeDepthExceeded):
            sereal.encode(value, max_depth=levels - 1)


def test_deep_value_raises_not_recursion_error(sereal: ModuleType) -> None:
    value: Any = 1
    for _ in range(100_000):
        value = [value]
    with pytest.raises(EncodeDepthExceeded):
        sereal.encode(value)


def test_default_depth_is_usable_in_full(sereal: ModuleType) -> None:
    value: Any = 1
    for _ in range(512):
        value = [value]
    assert sereal.decode(sereal.encode(value)) == value


def test_encode_body_contract() -> None:
    assert encode_body({"a": [1]}, True, 512) == bytes.fromhex("51 61 61 41 01")


# -- round trips -----------------------------------------------------------------------

_keys = st.one_of(st.text(max_size=8), st.binary(max_size=8))
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=4),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=20),
        # Non-empty only: () is a CPython singleton, so two empty tuples are one shared
        # container and one blessed copy blesses the other (documented in DESIGN.md);
        # normalize() below compares values, not identities.
        st.lists(inner, min_size=1, max_size=4).map(tuple),
        st.dictionaries(_keys, inner, max_size=20),
        inner.map(PerlRef),
        st.builds(PerlObject, st.sampled_from(["Foo", "Bar::Baz", "\xe9t\xe9"]), inner),
        st.builds(PerlRegexp, st.text(max_size=5), st.sampled_from(["", "i", "msix"])),
    ),
    max_leaves=40,
)


def normalize(value: Any) -> Any:
    """What a value decodes back to with ``binary="utf8"``."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "surrogateescape")
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out[normalize(k)] = normalize(v)
        return out
    if isinstance(value, PerlRef):
        return PerlRef(normalize(value.value))
    if isinstance(value, PerlObject):
        return PerlObject(value.class_name, normalize(value.value), value.frozen)
    return value


@settings(max_examples=150, deadline=None)
@given(value=_values, dedupe=st.booleans())
def test_round_trip(value: Any, dedupe: bool) -> None:
    import sereal_codec as default
    from sereal_codec import pure

    for impl in (pure, default):
        data = impl.encode(value, dedupe_strings=dedupe, compress="none")
        assert impl.decode(data) == normalize(value)
    assert default.encode(value, dedupe_strings=dedupe) == pure.encode(value, dedupe_strings=dedupe)


@settings(max_examples=100, deadline=None)
@given(value=st.binary(max_size=40))
def test_binary_round_trip_is_byte_exact(value: bytes) -> None:
    from sereal_codec import pure

    text = pure.decode(pure.encode(value))
    assert text.encode("utf-8", "surrogateescape") == value
    assert pure.decode(pure.encode(value), binary="bytes") == value
    assert pure.decode(pure.encode(value), binary="latin1") == value.decode("latin-1")
