"""Regressions found by the Perl interop suite (tests/interop), pinned to exact bytes.

Every byte string here is what Perl's Sereal (5.003) writes, or what it decodes to the
value stated (checked with ``perl -MSereal::Decoder -MData::Dumper``). Each test runs
against both implementations (the ``sereal`` fixture: pure and compiled).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from sereal_testlib import body_of, doc

from sereal_codec.types import PerlObject, PerlRef, PerlRegexp

BOOL_CLASS = "71" + b"JSON::PP::Boolean".hex()
SHARED_OBJ_CLASS = "6b " + b"Shared::Obj".hex(" ")


# -- 1. zstd at protocol 3 ----------------------------------------------------------------


def test_zstd_at_protocol_3_decodes(sereal: ModuleType) -> None:
    # Sereal::Encoder->new({compress => SRL_ZSTD, protocol_version => 3})->encode("a" x 40)
    data = bytes.fromhex("3df3726c43001228b52ffd202a4d00001826286101004a3004")
    assert sereal.decode(data) == "a" * 40
    header = sereal.decode_header(data)
    assert (header.protocol, header.compression) == (3, "zstd")


def test_zstd_is_still_written_at_protocol_4_only(sereal: ModuleType) -> None:
    with pytest.raises(ValueError, match="protocol 4"):
        sereal.encode("a" * 2000, compress="zstd", protocol=3)


# -- 2. blessing through REFP -------------------------------------------------------------


def test_object_blessing_a_refp_target(sereal: ModuleType) -> None:
    # ARRAYREF_3, SHORT_BINARY_3|F "foo", OBJECT "BlessedArrayCheck" REFP 2, REFP 2:
    # the referent is blessed, so the later reference to it is the object too.
    data = bytes.fromhex("3df3726c040043e3666f6f2c71426c65737365644172726179436865636b29022902")
    value = sereal.decode(data)
    obj = PerlObject("BlessedArrayCheck", PerlRef("foo"))
    assert value == ["foo", obj, obj]
    assert value[1] is value[2]


def test_boolean_blessing_a_refp_target(sereal: ModuleType) -> None:
    # [1, bless(\$slot0, "JSON::PP::Boolean") twice] -> [1, True, True]
    value = sereal.decode(doc(f"43 81 2c {BOOL_CLASS} 29 02 29 02"))
    assert value == [1, True, True]
    assert value[1] is True and value[2] is True


def test_regexp_blessing_a_refp_target(sereal: ModuleType) -> None:
    # ARRAYREF_3, REGEXP|F "a" "", OBJECT "Regexp" REFP 2, REFP 2
    value = sereal.decode(doc("43 b1 61 61 60 2c 66 52 65 67 65 78 70 29 02 29 02"))
    assert value == [PerlRegexp("a", "")] * 3
    assert value[1] is value[2]


def test_blessing_applies_inside_the_blessed_value(sereal: ModuleType) -> None:
    # my $q = bless [], "Foo"; push @$q, $q;  ($q->[0] is the blessed $q in Perl)
    value = sereal.decode(doc("2c 63 46 6f 6f 28 ab 01 29 07"))
    assert value.value[0] is value


def test_blessing_a_refp_ignores_an_earlier_blessing(sereal: ModuleType) -> None:
    # OBJECT "Foo" REFN POS_1|F, then OBJECT "Bar" REFP to that referent: a rebless,
    # which Perl never writes (its decoder blesses at the end, class by class in hash
    # order, so which class wins is arbitrary). Ours: the second object's value is a
    # plain reference, and later REFPs are the "Bar" object.
    value = sereal.decode(doc("43 2c 63 46 6f 6f 28 81 2c 63 42 61 72 29 08 29 08"))
    bar = PerlObject("Bar", PerlRef(1))
    assert value == [PerlObject("Foo", PerlRef(1)), bar, bar]
    assert value[1] is value[2]


# -- 3. tracked WEAKEN --------------------------------------------------------------------


def test_tracked_weaken_registers_its_value(sereal: ModuleType) -> None:
    # Sereal's "weak scalar cross": ARRAYREF_2, WEAKEN|F REFN WEAKEN|F REFP 2, ALIAS 4.
    # Perl: [ \\$VAR1->[0], ${$VAR1->[0]} ]: slot 0 refers to a scalar s (slot 1, an
    # alias) that refers back to slot 0.
    value = sereal.decode(bytes.fromhex("3df3726c050042b028b029022e04"))
    first, second = value
    assert isinstance(first, PerlRef) and isinstance(second, PerlRef)
    assert first.value is second
    assert second.value is first


def test_tracked_weaken_refp_naming_the_weaken(sereal: ModuleType) -> None:
    # WEAKEN|F REFP 1: a weak reference to itself (Perl: $VAR1 = \$VAR1)
    value = sereal.decode(doc("b0 29 01"))
    assert isinstance(value, PerlRef)
    assert value.value is value


def test_tracked_weaken_before_a_container(sereal: ModuleType) -> None:
    # WEAKEN|F REFN ARRAY 1 REFP 1: the WEAKEN's position holds the list.
    value = sereal.decode(doc("b0 28 2b 01 29 01"))
    assert isinstance(value, list)
    assert value[0] == PerlRef(value) and value[0].value is value


def test_tracked_tags_under_weaken_and_refn(sereal: ModuleType) -> None:
    # ARRAYREF_3, WEAKEN REFN|F POS_5, REFP 3 (the REFN|F under the WEAKEN), ALIAS 3
    value = sereal.decode(doc("43 30 a8 05 29 03 2e 03"))
    assert value[0] == PerlRef(5)
    assert value[1].value is value[0]
    assert value[2] is value[0]


# -- 4, 5. shared and cyclic PerlRef / PerlObject when encoding ---------------------------


def enc(sereal: ModuleType, value: Any) -> str:
    return str(body_of(sereal.encode(value, compress="none")))


def test_self_referencing_ref_encodes_as_perl_writes_it(sereal: ModuleType) -> None:
    # my $x; $x = \$x;  ->  REFP|F 1
    r = PerlRef()
    r.value = r
    assert enc(sereal, r) == "a9 01"
    back = sereal.decode(sereal.encode(r))
    assert back.value is back


def test_shared_object_encodes_as_perl_writes_it(sereal: ModuleType) -> None:
    # my $o = bless {id => 7}, "Shared::Obj"; [$o, $o]
    o = PerlObject("Shared::Obj", {"id": 7})
    body = f"42 2c {SHARED_OBJ_CLASS} 28 aa 01 62 69 64 07 29 10"
    assert enc(sereal, [o, o]) == body
    back = sereal.decode(doc(body))
    assert back == [o, o]
    assert back[0] is back[1]  # one hash in Perl, one object here


@pytest.mark.parametrize(
    ("build", "body"),
    [
        # my $s = "v"; my $r = \$s; [$r, $r]
        (lambda: [PerlRef("v")] * 2, "42 28 e1 76 29 03"),
        # my $a = [1]; my $r = \$a; [$r, $r]
        (lambda: [PerlRef([1])] * 2, "42 28 c1 01 29 03"),
        # my $p = bless \(my $q = 5), "P"; [$p, $p]
        (lambda: [PerlObject("P", PerlRef(5))] * 2, "42 2c 61 50 28 85 29 06"),
        # my $w = bless {}, "Foo"; {a => $w, b => $w}
        (
            lambda: dict.fromkeys("ab", PerlObject("Foo", {})),
            "52 61 61 2c 63 46 6f 6f 28 aa 00 61 62 29 0a",
        ),
    ],
)
def test_shared_refs_and_objects_as_perl_writes_them(
    sereal: ModuleType, build: Any, body: str
) -> None:
    assert enc(sereal, build()) == body


def cyclic_values() -> list[tuple[Any, str]]:
    y = PerlObject("Foo", None)
    y.value = PerlRef(y)  # my $y; $y = bless \$y, "Foo";
    z = PerlObject("Foo", [])
    z.value.append(z)  # my $z = bless [], "Foo"; push @$z, $z;
    items: list[Any] = []
    a = PerlRef(items)
    items.append(a)  # my $a; $a = [\$a]; \$a
    x = PerlRef()
    x.value = x  # my $x; $x = \$x; [$x, $x] decodes to [\$x, \$x]
    return [
        (y, "ac 63 46 6f 6f 29 01"),
        (z, "2c 63 46 6f 6f 28 ab 01 29 07"),
        (a, "28 c1 29 02"),
        ([PerlRef(x), PerlRef(x)], "42 28 a9 03 29 03"),
    ]


@pytest.mark.parametrize(("value", "body"), cyclic_values())
def test_cycles_through_refs_and_objects_as_perl_writes_them(
    sereal: ModuleType, value: Any, body: str
) -> None:
    assert enc(sereal, value) == body
    assert sereal.decode(doc(body)) == value


def test_decoded_perl_cycles_reencode_to_the_same_bytes(sereal: ModuleType) -> None:
    for body in (
        "a9 01",
        "ac 63 46 6f 6f 29 01",
        "2c 63 46 6f 6f 28 ab 01 29 07",
        "42 28 a9 03 29 03",
    ):
        assert enc(sereal, sereal.decode(doc(body))) == body


def test_shared_referent_string_is_a_tracked_literal(sereal: ModuleType) -> None:
    # Never COPY (nor a COPY target) for a string that a REFP tracks.
    s = PerlRef("abcdef")
    assert enc(sereal, ["abcdef", s, s, "abcdef"]) == (
        "44 66 61 62 63 64 65 66 28 e6 61 62 63 64 65 66 29 0a 2f 02"
    )


def test_shared_object_with_a_scalar_value_is_written_twice(sereal: ModuleType) -> None:
    # Perl blesses references only: there is no referent to point a REFP at.
    o = PerlObject("Foo", 1)
    assert enc(sereal, [o, o]) == "42 2c 63 46 6f 6f 01 2d 03 01"


# -- 6. repr and == on cycles -------------------------------------------------------------


def test_object_ref_cycle_repr_and_eq() -> None:
    o = PerlObject("X", None)
    o.value = PerlRef(o)
    p = PerlObject("X", None)
    p.value = PerlRef(p)
    assert repr(o) == "PerlObject('X', PerlRef(...))"
    same = o
    assert o == same
    assert o == p
    assert not o != p  # noqa: SIM202  (__ne__ is what is being tested)
    q = PerlObject("Y", None)
    q.value = PerlRef(q)
    assert o != q
    r = PerlRef()
    r.value = r
    assert repr(r) == "PerlRef(...)"
    assert r == PerlRef(r)
