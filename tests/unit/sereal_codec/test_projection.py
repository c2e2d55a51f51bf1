"""Projected decoding (issue 16): ``decode(blob, fields=...)`` builds only the declared
fields of each event and equals ``project_events(decode(blob), compile_fields(fields))``
(sereal_codec/DESIGN.md, "Projection"), in both body codecs, with a full decode's
errors for malformed input wherever it lies (skipped or not)."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sereal_strategies import mutated, same_value, values

import sereal_codec as default_sereal
from eventstore.blob import pack_blob, unpack_blob
from relocator.events import generate_events
from sereal_codec import document, tags
from sereal_codec.errors import DecodeBudgetExceeded, SerealError
from sereal_codec.projection import Tree, compile_fields, project, project_events
from sereal_codec.pure import project as pure_project
from sereal_codec.types import PerlObject, PerlRef
from tests.unit.sereal_codec.sereal_testlib import core as compiled
from tests.unit.sereal_codec.sereal_testlib import needs_core

#: What a typical web substream reads: a third of a web event's 25 keys (8), one nested.
WEB_FIELDS = ["type", "status", "url", "method", "duration_ms", "host", "dc", "search.city"]
MODES = [tags.BINARY_UTF8, tags.BINARY_LATIN1, tags.BINARY_BYTES]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def backends() -> list[Any]:
    return [pure_project] if compiled is None else [compiled, pure_project]


def outcome(codec: Any, body: bytes, binary: int = 0, **kw: Any) -> tuple[str, Any]:
    """("ok", (value, end)) or ("error", (class, offset)); the pure codec's recursion
    limit is put back (hypothesis warns when it changes)."""
    limit = sys.getrecursionlimit()
    try:
        args = (body, 0, len(body), -1, binary, kw.pop("max_depth", 512))
        return "ok", codec.decode_body(*args, kw.pop("max_objects", -1), *kw.values())
    except SerealError as exc:
        return "error", (type(exc), exc.offset)
    finally:
        sys.setrecursionlimit(limit)


def expected(full: Any, tree: Tree) -> Any:
    return project_events(full, tree) if isinstance(full, list) else full


def check_projection(body: bytes, tree: Tree, binary: int = 0, max_depth: int = 512) -> None:
    """In each codec: the projected decode is the projection of the full decode
    (sharing included), or fails with the full decode's error class and offset."""
    results = []
    for codec in backends():
        full = outcome(codec, body, binary, max_depth=max_depth)
        got = outcome(codec, body, binary, max_depth=max_depth, projection=tree)
        where = f"{codec.__name__} {tree} {body.hex(' ')}"
        assert got[0] == full[0], f"{where}\nfull: {full}\nprojected: {got}"
        if full[0] == "ok":
            assert got[1][1] == full[1][1], where
            assert same_value(got[1][0], expected(full[1][0], tree)), (
                f"{where}\nwant {expected(full[1][0], tree)!r}\ngot {got[1][0]!r}"
            )
        else:
            assert got[1] == full[1], f"{where}\nfull: {full}\nprojected: {got}"
        results.append(got)
    if len(results) == 2:  # compiled == pure
        (c_kind, c_out), (p_kind, p_out) = results
        assert c_kind == p_kind, body.hex(" ")
        if c_kind == "ok":
            assert same_value(c_out[0], p_out[0]), body.hex(" ")
        else:
            assert c_out == p_out, f"{body.hex(' ')}: compiled {c_out}, pure {p_out}"


def _keys(value: Any, out: set[str], seen: set[int]) -> None:
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, dict):
        out.update(value)
        items: Any = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    elif isinstance(value, (PerlRef, PerlObject)):
        items = [value.value]
    else:
        return
    for item in items:
        _keys(item, out, seen)


@st.composite
def trees(draw: st.DrawFn, decoded: Any) -> Tree:
    """A projection tree over the keys found in a decoded value (and a few others)."""
    pool: set[str] = set()
    _keys(decoded, pool, set())
    pool.discard("")  # no field names it (compile_fields refuses empty parts)
    names = st.sampled_from(sorted(pool | {"x", "status"}))
    fields = draw(st.lists(st.lists(names, min_size=1, max_size=3).map(tuple), max_size=6))
    tree = compile_fields(fields)
    assert tree is not None
    return tree


def encodable(value: Any, dedupe: bool) -> bytes:
    try:
        return default_sereal.encode(value, compress=None, dedupe_strings=dedupe)[6:]
    except SerealError:
        assume(False)
        raise


def body_of(doc: bytes) -> bytes:
    buf, pos, _base = document.open_document(doc)
    return buf[pos:]


# -- the API ---------------------------------------------------------------------


def test_decode_with_fields_is_the_projection(sereal: ModuleType) -> None:
    events = generate_events(300, seed=3)
    doc = sereal.encode(events)
    got = sereal.decode(doc, fields=WEB_FIELDS)
    assert got == project_events(events, compile_fields(WEB_FIELDS))
    web = next(e for e in events if e["type"] == "web")
    assert got[events.index(web)] == {
        **{k: v for k, v in web.items() if k in WEB_FIELDS},
        "search": {"city": web["search"]["city"]},
    }
    assert sereal.decode(doc, fields=None) == events
    assert sereal.decode(doc, fields=[]) == [{} for _ in events]


def test_a_body_that_is_no_array_is_not_projected(sereal: ModuleType) -> None:
    value = {"a": 1, "b": {"c": 2}}
    assert sereal.decode(sereal.encode(value), fields=["b.c"]) == value


@pytest.mark.parametrize("bad", ["status", ["a..b"], [""], [3]])
def test_bad_fields_are_refused(sereal: ModuleType, bad: Any) -> None:
    doc = sereal.encode([{"a": 1}])
    with pytest.raises(ValueError, match="field"):
        sereal.decode(doc, fields=bad)


@pytest.mark.parametrize("bad", [[1], {1: None}, {"a": 1}, {"a": {"b": []}}])
def test_bad_projection_trees_are_refused_by_both_codecs(bad: Any) -> None:
    body = bytes.fromhex("41 51 61 61 01")  # [{"a": 1}]
    for codec in backends():
        with pytest.raises(ValueError, match="projection"):
            codec.decode_body(body, 0, len(body), -1, 0, 512, -1, bad)
    deep: Tree = {}
    node = deep
    for _ in range(1001):  # one more than MAX_DEPTH_CAP
        node["a"] = node = {}
    for codec in backends():
        with pytest.raises(ValueError, match="deeper"):
            codec.decode_body(body, 0, len(body), -1, 0, 512, -1, deep)


def test_unpack_blob_passes_fields_through() -> None:
    events = generate_events(50, seed=4)
    blob = pack_blob(events)
    fields = iter(["status", "http.latency_ms"])  # any iterable, read once
    assert unpack_blob(blob, fields=fields) == project_events(
        events, compile_fields(["status", "http.latency_ms"])
    )
    with pytest.raises(ValueError, match="field"):
        unpack_blob(blob, fields="status")


# -- differential: projected == projection of the full decode, errors included ----


@SETTINGS
@given(st.data(), st.lists(values(), max_size=5), st.booleans(), st.sampled_from(MODES))
def test_projection_of_valid_bodies(
    data: st.DataObject, events: list[Any], dedupe: bool, binary: int
) -> None:
    body = encodable(events, dedupe)
    full = outcome(pure_project, body, binary)
    assert full[0] == "ok"
    check_projection(body, data.draw(trees(full[1][0])), binary)


@SETTINGS
@given(st.data(), values(), st.booleans())
def test_projection_of_any_body(data: st.DataObject, value: Any, dedupe: bool) -> None:
    """Bodies that are no array, or an array of anything, are projected by the rule."""
    body = encodable(value, dedupe)
    check_projection(body, data.draw(trees(outcome(pure_project, body)[1][0])))


@SETTINGS
@given(st.data(), st.lists(values(), min_size=1, max_size=4), st.booleans())
def test_projection_of_mutated_bodies(data: st.DataObject, events: list[Any], dedupe: bool) -> None:
    body = encodable(events, dedupe)
    tree = data.draw(trees(outcome(pure_project, body)[1][0]))
    check_projection(data.draw(mutated(body)), tree, 0, data.draw(st.sampled_from([512, 3])))


@SETTINGS
@given(st.binary(max_size=64), st.sampled_from([{}, {"a": None}, {"a": {"b": None}}]))
def test_projection_of_arbitrary_bytes(body: bytes, tree: Tree) -> None:
    check_projection(body, tree)


def test_projection_of_generated_events_and_their_mutations() -> None:
    """The shared event generator, with a third of a web event's fields; then the same
    body cut and flipped at many places (most of them in skipped values)."""
    body = body_of(default_sereal.encode(generate_events(60, seed=9), compress=None))
    tree = compile_fields(WEB_FIELDS)
    assert tree is not None
    check_projection(body, tree)
    for i in range(1, len(body), 7):
        check_projection(body[:i], tree)
        flipped = bytearray(body)
        flipped[i] ^= 0x40
        check_projection(bytes(flipped), tree)


# -- back-references into skipped values -------------------------------------------


def test_back_references_into_skipped_values(sereal: ModuleType) -> None:
    """REFP / ALIAS to a tracked value, COPY of a string and OBJECTV of a class name, all
    first written inside a value the projection skips, resolve as in a full decode;
    a value shared between a skipped and a kept place is one object, as decoded."""
    shared = {"deep": [1, 2, {"x": "y"}]}
    scalar_ref = PerlRef("a referenced scalar")  # its string is tracked (F bit)
    cls_value = PerlObject("Some::Class", {"k": 1})
    long = "a string long enough to be copied"
    events = [
        {"skip": {"s": shared, "long": long, "r": scalar_ref}, "o": cls_value},
        {
            "keep": shared,
            "copy": long,
            "obj": PerlObject("Some::Class", {"k": 2}),
            "ref": shared,
            "sref": scalar_ref,
        },
    ]
    doc = sereal.encode(events, compress=None)
    for tag in (tags.REFP, tags.COPY, tags.OBJECTV):
        assert bytes([tag]) in doc
    fields = ["keep", "copy", "obj", "ref.deep", "sref"]
    got = sereal.decode(doc, fields=fields)
    full = sereal.decode(doc)
    assert same_value(got, project_events(full, compile_fields(fields)))
    assert got[1]["keep"] == shared and got[1]["copy"] == long
    assert got[1]["sref"] == scalar_ref
    assert got[1]["obj"].class_name == "Some::Class" and got[1]["ref"] == {"deep": shared["deep"]}
    assert got[1]["ref"]["deep"] is got[1]["keep"]["deep"]  # one list, as decoded
    assert got[0] == {}


# -- the object budget ---------------------------------------------------------------


@needs_core
def test_the_budget_counts_what_is_built() -> None:
    """A projected decode is charged for the lists and dicts it builds (a dict, then a
    key and a value per kept pair), not for what it skips; both codecs stop at the same
    budget and offset."""
    body = body_of(default_sereal.encode(generate_events(200, seed=2), compress=None))
    tree = compile_fields(["type", "status"])
    assert tree is not None

    def least(**kw: Any) -> int:
        lo, hi = 0, 10**7
        while lo < hi:
            mid = (lo + hi) // 2
            ok = outcome(compiled, body, max_objects=mid, **kw)[0] == "ok"
            lo, hi = (lo, mid) if ok else (mid + 1, hi)
        return lo

    need = least(projection=tree)
    assert need < least() / 5  # a full decode needs far more
    n = 200
    kept = sum(1 for e in generate_events(200, seed=2) for k in ("type", "status") if k in e)
    assert need == 1 + n + n + 2 * kept  # the list and slots, a dict per event, 2 per pair
    for codec in backends():
        assert outcome(codec, body, max_objects=need, projection=tree)[0] == "ok"
    over = [outcome(c, body, max_objects=need - 1, projection=tree) for c in backends()]
    assert over[0][0] == "error" and over[0][1][0] is DecodeBudgetExceeded
    assert over[0] == over[-1]


def test_project_rule_reference_is_what_is_compared() -> None:
    """The reference this module compares with narrows dicts only (a guard against a
    change of projection.project going unnoticed here)."""
    assert project([{"a": 1}], {"a": None}) == [{"a": 1}]
    assert project({"a": 1, "b": 2}, {"a": None}) == {"a": 1}
