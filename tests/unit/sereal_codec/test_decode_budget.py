"""The decoder's object budget (issue 12.6; DESIGN.md, "Bounded decoding").

A body within any byte cap can still build tens of bytes of Python per body byte (an
empty hash is 1 byte and ~72 decoded). ``max_objects`` bounds what one decode builds:
both codecs charge the same costs at the same tags, so they agree on exactly where a
budget is hit; past it they stop before building more, so memory stays bounded
whatever the body.
"""

from __future__ import annotations

import pickle
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from sereal_strategies import values
from sereal_testlib import core as compiled
from sereal_testlib import needs_core

import sereal_codec as sereal
from relocator.events import generate_events
from sereal_codec import pure
from sereal_codec.document import wrap_body
from sereal_codec.errors import (
    DecodeBudgetExceeded,
    EncodeDepthExceeded,
    SizeLimitExceeded,
)
from sereal_codec.pure import backend as pure_decoder
from sereal_codec.pure import encoder as pure_encoder
from sereal_codec.testing import OBJECT_BOMB_ITEMS, object_bomb_body, object_bomb_objects
from sereal_codec.types import PerlObject, PerlRef, PerlRegexp

pytestmark = [needs_core]

BOMB_KINDS = sorted(OBJECT_BOMB_ITEMS)


def decode_pure(body: bytes, max_objects: int) -> tuple[Any, int]:
    """The pure decoder, with the recursion limit put back (hypothesis checks it)."""
    limit = sys.getrecursionlimit()
    try:
        return pure_decoder.decode_body(body, 0, len(body), -1, 0, 512, max_objects)
    finally:
        sys.setrecursionlimit(limit)


def decode_compiled(body: bytes, max_objects: int) -> tuple[Any, int]:
    return compiled.decode_body(body, 0, len(body), -1, 0, 512, max_objects)  # type: ignore[no-any-return]


def objects_needed(body: bytes) -> int:
    """The least budget the compiled core decodes ``body`` with (bisection)."""
    low, high = 0, 1
    while True:
        try:
            decode_compiled(body, high)
            break
        except DecodeBudgetExceeded:
            low, high = high, high * 2
    while low < high:
        mid = (low + high) // 2
        try:
            decode_compiled(body, mid)
            high = mid
        except DecodeBudgetExceeded:
            low = mid + 1
    return high


def assert_same_edge(body: bytes, expected: int | None = None) -> int:
    """Both codecs decode ``body`` with a budget of exactly the objects it needs (to
    equal values) and both stop one object short, at the same tag."""
    need = objects_needed(body)
    if expected is not None:
        assert need == expected
    assert pure_decoder.decode_body(body, 0, len(body), -1, 0, 512, need)[1] == len(body)
    stops = []
    for decode in (decode_compiled, decode_pure):
        with pytest.raises(DecodeBudgetExceeded) as info:
            decode(body, need - 1)
        stops.append((info.value.offset, info.value.message))
    assert stops[0] == stops[1]
    assert f"max_objects={need - 1}" in stops[0][1]
    return need


# -- what is counted, and where both codecs stop ---------------------------------------


@pytest.mark.parametrize("kind", BOMB_KINDS)
def test_the_budget_edge_of_a_bomb_is_the_same_in_both_codecs(kind: str) -> None:
    body = object_bomb_body(kind, 2500, group=1000)
    assert_same_edge(body, object_bomb_objects(kind, 2500, group=1000))


@pytest.mark.parametrize(
    ("value", "objects"),
    [
        ([], 1),  # the list
        ([1, "a", None, 2.5], 5),  # the list and its 4 slots; scalars are in slots
        ({"a": 1, "b": "x"}, 5),  # the dict, a key and a value a pair
        ([{}, []], 5),  # 3 slots + the dict + the list
        ([PerlRef(1), PerlRef(PerlRef("x"))], 6),  # 3 + a PerlRef per REFN
        # 3 + OBJECT (object, class name) 2 + REFN 1 + the dict 1, OBJECTV 1 + REFN 1
        # + the list 1
        ([PerlObject("Foo", PerlRef({})), PerlObject("Foo", PerlRef([]))], 10),
        # 2 + OBJECT "Regexp" 2 + REFN 1 + REGEXP (regexp, pattern, flags) 3
        ([PerlRegexp("ab+", "i")], 8),
    ],
)
def test_each_kind_of_tag_costs_what_design_md_says(value: Any, objects: int) -> None:
    assert_same_edge(compiled.encode_body(value, True, 512), objects)


def test_a_scalar_body_builds_nothing_that_is_charged() -> None:
    body = compiled.encode_body("just a string", True, 512)
    assert decode_compiled(body, 0)[0] == decode_pure(body, 0)[0] == "just a string"


def test_a_refp_to_a_scalar_and_a_cycle_cost_their_perlref() -> None:
    shared = PerlRef("x")
    assert_same_edge(compiled.encode_body([shared, shared], True, 512))
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert_same_edge(compiled.encode_body(PerlRef(cyclic), True, 512))


def test_realistic_events_at_the_edge() -> None:
    events = generate_events(40, seed=5)
    body = compiled.encode_body(events, True, 512)
    need = assert_same_edge(body)
    assert 0.2 < need / len(body) < 0.4  # ~0.28 objects per body byte (DESIGN.md)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values(), st.floats(0, 1.2), st.booleans())
def test_any_value_meets_any_budget_the_same_way_in_both_codecs(
    value: Any, fraction: float, dedupe: bool
) -> None:
    try:
        body = pure_encoder.encode_body(value, dedupe, 512)
    except EncodeDepthExceeded:  # a cycle through a PerlObject holding no reference
        reject()
    need = objects_needed(body)
    assert need > 0 or not isinstance(value, (list, dict))  # a container costs itself
    budget = int(need * fraction)
    outcomes: list[tuple[str, int | None]] = []
    for decode in (decode_compiled, decode_pure):
        try:
            outcomes.append(("ok", decode(body, budget)[1]))
        except DecodeBudgetExceeded as e:
            outcomes.append(("stop", e.offset))
    assert outcomes[0] == outcomes[1]
    assert (outcomes[0][0] == "ok") == (budget >= need)


# -- bounded memory ----------------------------------------------------------------------

Decode = Callable[..., Any]
CODECS: dict[str, Decode] = {"compiled": sereal.decode, "pure": pure.decode}


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("kind", BOMB_KINDS)
def test_a_small_bomb_is_refused_with_bounded_memory(kind: str, codec: str) -> None:
    """1.2 million items (1.2 to 3.6 MB of body, ~3 KB of zstd) would take 48 to 86 MB
    of Python objects; with a budget of 100,000 the decode stops at a few MB."""
    if codec == "compiled" and sereal.IMPLEMENTATION != "c":
        pytest.skip("the compiled core is not what sereal_codec uses")
    document = wrap_body(object_bomb_body(kind, 1_200_000), compress="zstd")
    assert len(document) < 20_000
    decode = CODECS[codec]
    tracemalloc.start()
    try:
        with pytest.raises(DecodeBudgetExceeded) as info:
            decode(document, max_objects=100_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the decompressed body (and, for the pure codec, its byte map) plus the objects
    # built before the stop: ~100,000 x at most ~80 bytes
    assert peak < 2.2 * len(object_bomb_body(kind, 1_200_000)) + 10 * 2**20, peak
    assert isinstance(info.value, SizeLimitExceeded)
    assert "max_objects=100000" in str(info.value)


def test_no_budget_means_no_limit_and_bad_budgets_are_refused() -> None:
    document = wrap_body(object_bomb_body("empty_hashes", 5000), compress=None)
    assert len(sereal.decode(document)) == len(pure.decode(document, max_objects=None)) == 5
    for decode in (sereal.decode, pure.decode):
        for bad in (-1, "10", 1.5):
            with pytest.raises(ValueError, match="max_objects"):
                decode(document, max_objects=bad)  # type: ignore[arg-type]
    for body_decoder in (compiled, pure_decoder):
        with pytest.raises(ValueError, match="max_objects"):
            body_decoder.decode_body(b"\x01", 0, 1, -1, 0, 512, -2)


def test_the_error_pickles_with_its_offset() -> None:
    document = wrap_body(object_bomb_body("empty_arrays", 5000), compress=None)
    with pytest.raises(DecodeBudgetExceeded) as info:
        sereal.decode(document, max_objects=10)
    e = pickle.loads(pickle.dumps(info.value))
    assert type(e) is DecodeBudgetExceeded and e.offset == info.value.offset is not None
