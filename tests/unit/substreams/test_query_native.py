"""The compiled evaluator of query plans against the reference (substreams/query/
evaluate.py): the same rows, value for value and kind for kind, on the shared
generator's events, on hypothesis events (missing fields, wrong kinds, nested paths,
Perl byte strings, huge integers) and random plans; and every input it does not take
(substreams/DESIGN.md, "Native evaluation") left to the reference, which answers."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sereal_codec as sereal
from relocator.events import generate_events
from sereal_codec import compression
from sereal_codec.document import read_layout
from sereal_codec.errors import SerealDecodeError
from sereal_codec.types import PerlObject, PerlRef
from substreams.examples.event_counts_q import event_counts_q
from substreams.examples.url_latency_q import url_latency_q
from substreams.examples.web_5xx_q import web_5xx_q
from substreams.query import plan as qp
from substreams.query.evaluate import evaluate
from substreams.query.native import NATIVE, compile_program, evaluate_body, evaluate_document
from substreams.query.parse import parse_query
from tests.contract.test_queries_match_functions import events as example_events
from tests.unit.sereal_codec.sereal_strategies import values as any_values

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(not NATIVE, reason="the compiled core is not built"),
]

EXAMPLES = [q.plan for q in (web_5xx_q, url_latency_q, event_counts_q)]
MODES = {"utf8": 0, "bytes": 2}


def same(a: Any, b: Any) -> bool:
    """Equal and of the same kinds throughout (1, 1.0 and True differ; NaN is NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def opened(doc: bytes) -> tuple[bytes, int, int, int]:
    """A document's body as ``decode_body`` takes it: buffer, pos, end, base."""
    layout = read_layout(doc)
    buf, pos, base = compression.unframe_body(
        doc, layout.protocol, layout.doc_type, layout.body_offset, 1 << 30
    )
    return buf, pos, len(buf), base


def native(plans: list[qp.Plan], doc: bytes, binary: str = "utf8") -> list[Any] | None:
    """The compiled walk alone on a document (None: not handled)."""
    return evaluate_body(compile_program(plans), *opened(doc), binary=MODES[binary])


def check(plans: list[qp.Plan], evs: Any, binary: str = "utf8", dedupe: bool = True) -> bool:
    """Native == reference for every plan; returns whether the walk took the chunk."""
    doc = sereal.encode(evs, dedupe_strings=dedupe)
    decoded = sereal.decode(doc, binary=binary)
    want = [evaluate(p, decoded) for p in plans]
    got = native(plans, doc, binary)
    if got is not None:
        for plan, rows, ref in zip(plans, got, want, strict=True):
            assert rows is None or same(rows, ref), (plan, rows, ref)
    full = evaluate_document(compile_program(plans), doc, binary=binary)
    assert all(same(r, w) for r, w in zip(full, want, strict=True))
    return got is not None


# -- the examples on the generator's events ----------------------------------------------


@pytest.mark.parametrize("binary", sorted(MODES))
@pytest.mark.parametrize("n", [0, 1, 500, 3000])
def test_the_examples_natively_equal_the_reference_on_the_generators_events(
    n: int, binary: str
) -> None:
    evs = generate_events(n, seed=n + 7)
    for plans in ([p] for p in EXAMPLES):
        assert check(plans, evs, binary), "the walk takes realistic chunks"
    assert check(EXAMPLES, evs, binary), "all three in one walk"


def test_a_compressed_chunk_as_relocators_write_it() -> None:
    evs = generate_events(2000, seed=1)
    doc = sereal.encode(evs, compress="zstd", level=3, dedupe_strings=True, protocol=4)
    got = native(EXAMPLES, doc)
    assert got is not None
    assert all(same(g, evaluate(p, evs)) for p, g in zip(EXAMPLES, got, strict=True))


# -- hypothesis events and plans ---------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(evs=st.lists(example_events(), max_size=30), binary=st.sampled_from(sorted(MODES)))
def test_the_examples_on_hypothesis_events(evs: list[dict[str, Any]], binary: str) -> None:
    check(EXAMPLES, evs, binary)


PATHS = [
    qp.Path(p)
    for p in [("a",), ("b",), ("c",), ("a", "x"), ("a", "0"), ("a", "-1"), ("0",), ("0", "x")]
]
LITERALS: list[Any] = [
    0, 1, -1, 500, 2**63 - 1, -(2**63), 2**64 - 1, 0.5, 500.0, -0.0, 1e300,
    True, False, "", "a", "ab", "é", "500", "web-1", "\U0001f600",
]  # fmt: skip
KIND_NAMES: list[Any] = ["null", "boolean", "integer", "float", "text", "list", "map", "other"]

leaf_values = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, 500, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), 2**53 + 1]),
    st.integers(-(2**64), 2**64 - 1).filter(lambda i: -(2**63) <= i < 2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, 500.0, -0.0, 1e300, 1e20]),
    st.text(max_size=4),
    st.sampled_from(["a", "ab", "é", "500", "web-1", "\U0001f600", "a\udcff"]),
    st.binary(max_size=4),
    st.sampled_from([b"a", b"ab", b"\xff", b"caf\xc3\xa9", b"\xc3", b"\xed\xa0\x80"]),
)
field_values = st.recursive(
    leaf_values,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["x", "0", "y"]), inner, max_size=3),
    ),
    max_leaves=6,
)


@st.composite
def query_events(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 19)) == 0:  # an event that is not a dict
        return draw(st.one_of(st.lists(field_values, max_size=2), leaf_values))
    return draw(st.dictionaries(st.sampled_from(["a", "b", "c", "0", "z"]), field_values))


def constant(value: Any) -> qp.Const:
    return qp.Const(value)


operands = st.one_of(
    st.sampled_from(PATHS),
    st.sampled_from(LITERALS).map(constant),
    st.sampled_from(PATHS).map(qp.TypeOf),
)
leaf_predicates = st.one_of(
    st.builds(qp.Compare, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), operands, operands),
    st.builds(
        qp.InList,
        operands,
        st.lists(st.sampled_from(LITERALS + KIND_NAMES).map(constant), min_size=1, max_size=3).map(
            tuple
        ),
    ),
    st.builds(qp.IsNull, operands),
    st.builds(
        qp.Like, operands, st.sampled_from(["", "a", "a_", "_b", "é", "web", "5"]), st.booleans()
    ),
)
predicates = st.recursive(
    leaf_predicates,
    lambda inner: st.one_of(
        st.builds(qp.Not, inner),
        st.lists(inner, min_size=1, max_size=3).map(tuple).map(qp.And),
        st.lists(inner, min_size=1, max_size=3).map(tuple).map(qp.Or),
    ),
    max_leaves=6,
)


@st.composite
def plans(draw: st.DrawFn) -> qp.Plan:
    where = draw(st.one_of(st.none(), predicates))
    if draw(st.booleans()):  # SELECT
        paths = draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=3, unique=True))
        outputs: list[Any] = [qp.Column(f"c{i}", p) for i, p in enumerate(paths)]
        if draw(st.booleans()):
            outputs.append(qp.Column("lit", qp.Const(draw(st.sampled_from(LITERALS)))))
        return qp.Plan("q", tuple(outputs), where)
    keys = draw(st.lists(st.sampled_from(PATHS), max_size=2, unique=True))
    outputs = [qp.Column(f"k{i}", p) for i, p in enumerate(keys)]
    for i in range(draw(st.integers(1, 4))):
        function: Any = draw(st.sampled_from(["count", "sum", "min", "max", "histogram"]))
        path = draw(st.sampled_from(PATHS))
        if function == "count" and draw(st.booleans()):
            outputs.append(qp.Aggregate(f"g{i}", "count"))
        elif function == "histogram":
            bounds = draw(st.sampled_from([(0,), (-1, 0.5, 500), (0.0, 1, 2**63 - 1)]))
            outputs.append(qp.Aggregate(f"g{i}", "histogram", path, bounds))
        else:
            outputs.append(qp.Aggregate(f"g{i}", function, path))
    return qp.Plan("q", tuple(outputs), where, tuple(keys))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    qs=st.lists(plans(), min_size=1, max_size=3),
    evs=st.lists(query_events(), max_size=12),
    binary=st.sampled_from(sorted(MODES)),
    dedupe=st.booleans(),
)
def test_random_plans_on_random_events(
    qs: list[qp.Plan], evs: list[Any], binary: str, dedupe: bool
) -> None:
    check(qs, evs, binary, dedupe)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(qs=st.lists(plans(), min_size=1, max_size=2), value=any_values(cycles=False))
def test_any_value_the_codec_writes(qs: list[qp.Plan], value: Any) -> None:
    """References, objects, shared values, regexps: the walk leaves them, the reference
    answers."""
    check(qs, [{"a": value, "b": 1}, value])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_mutated_body_is_left_to_the_decoder(data: st.DataObject) -> None:
    """Wherever the walk answers on a damaged body, the decoder reads it and agrees."""
    body = bytearray(sereal.encode(generate_events(5, seed=2), dedupe_strings=True, compress=None))
    start = read_layout(bytes(body)).body_offset
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(start, len(body) - 1))] = data.draw(st.integers(0, 255))
    doc = bytes(body)
    got = native(EXAMPLES, doc)
    try:
        decoded = sereal.decode(doc)
    except SerealDecodeError:
        assert got is None
        return
    if got is not None:
        assert all(same(g, evaluate(p, decoded)) for p, g in zip(EXAMPLES, got, strict=True))


# -- what the walk leaves to the reference -----------------------------------------------

SELECT_A = parse_query("q", 'SELECT a, "a.x" AS ax FROM events WHERE b = 1')


@pytest.mark.parametrize(
    "evs",
    [
        [{"a": PerlRef(1), "b": 1}],  # REFN to a scalar as a column: built by the decoder
        [{"a": [1], "b": 1}],  # a container as a column
        [{"a": PerlObject("C", {}), "b": 2}],  # an object anywhere
        [{"z": True, "b": 1}, {"z": True}],  # fine: TRUE / FALSE tags, no object
    ],
)
def test_what_the_walk_leaves_is_answered_by_the_reference(evs: list[Any]) -> None:
    took = check([SELECT_A], evs)
    assert took == (evs[0].get("z") is True)


def test_shared_values_are_left_to_the_reference() -> None:
    shared = {"x": 1}
    assert not check([SELECT_A], [{"a": shared, "b": 2}, {"a": shared, "b": 2}])


def test_the_latin1_mode_is_left_to_the_reference() -> None:
    doc = sereal.encode([{"a": b"caf\xe9", "b": 1}])
    assert evaluate_body(compile_program([SELECT_A]), *opened(doc), binary=1) is None
    got = evaluate_document(compile_program([SELECT_A]), doc, binary="latin1")
    assert got == [[{"a": "café", "ax": None}]]


def test_a_key_twice_in_one_hash_is_left_to_the_reference() -> None:
    # {"a": {"x": 1}, "a": 5}: the decoder keeps the last value, so "a.x" is missing
    body = b"\x28\x2b\x01\x28\x2a\x03\x61a\x51\x61x\x01\x61b\x01\x61a\x05"
    doc = sereal.encode(None)[:-1] + body
    assert native([SELECT_A], doc) is None
    assert evaluate_document(compile_program([SELECT_A]), doc) == [[{"a": 5, "ax": None}]]


def test_a_select_past_its_max_result_bytes_is_the_references() -> None:
    evs = [{"a": "x" * 100, "b": 1} for _ in range(50)]
    doc = sereal.encode(evs)
    program = compile_program([SELECT_A, SELECT_A], max_result_bytes=[1000, 1 << 20])
    got = evaluate_body(program, *opened(doc))
    assert got is not None and got[0] is None and got[1] == evaluate(SELECT_A, evs)
    assert evaluate_document(program, doc) == [evaluate(SELECT_A, evs)] * 2


def test_a_plan_the_program_cannot_say_is_the_references() -> None:
    huge = parse_query("q", "SELECT a FROM events WHERE a < 100000000000000000000000")
    program = compile_program([huge, SELECT_A])
    assert program.native == (1,)
    evs = [{"a": 2**64 - 1, "b": 1}]
    assert evaluate_document(program, sereal.encode(evs)) == [
        evaluate(huge, evs),
        evaluate(SELECT_A, evs),
    ]


def test_the_program_is_data_checked_before_use() -> None:
    from sereal_codec import _sereal

    query_evaluate = _sereal.query_evaluate

    program = compile_program([SELECT_A])
    doc = sereal.encode([{"a": 1}])
    args = (doc, 7, len(doc), 6, 0, 512, -1)
    bad = bytearray(program.words)
    bad[8] = 200  # a node count past the words
    with pytest.raises(ValueError, match="not a query program"):
        query_evaluate(*args, bytes(bad), program.pool, program.names, program.consts)
    with pytest.raises(ValueError, match="not a query program"):
        query_evaluate(*args, program.words[:-8], program.pool, program.names, program.consts)
    with pytest.raises(ValueError, match="column names"):
        query_evaluate(*args, program.words, program.pool, ((),), program.consts)


# -- the walk's memo of which field a key names (query_walk.c, child_named) -----------------


def test_a_key_deduplicated_across_parents_names_each_parent_s_own_field() -> None:
    # With deduplicated strings the key "field" is written once and copied (COPY: keys
    # of four bytes or more): under the top level, under "alpha" and under "beta". The
    # walk remembers a key's field by the key's position and the node it was looked up
    # under; were the node left out, "alpha.field" would be read as the top-level
    # "field" (and the walk give up on a key seen twice) from the first copy on.
    sql = 'SELECT field, "alpha.field" AS ax, "beta.field" AS bx FROM events'
    plan = parse_query("m", sql + ' WHERE "beta.field" > 1')
    evs = [{"field": i, "alpha": {"field": 10 + i}, "beta": {"field": 100 + i}} for i in range(40)]
    evs += [{"beta": {"field": 5}, "alpha": {"field": 6}, "field": 7}]  # another order
    doc = sereal.encode(evs, dedupe_strings=True, compress=None)
    assert doc.count(b"field") == 1, "the key is copied, not written again"
    assert check([plan], evs, dedupe=True), "the walk takes deduplicated keys"
    rows = native([plan], doc)
    assert rows is not None and rows[0] is not None
    assert rows[0][0] == {"field": 0, "ax": 10, "bx": 100}
    assert rows[0][-1] == {"field": 7, "ax": 6, "bx": 5}
    # More distinct keys than the memo has entries (512): collisions fall back to a scan.
    wide = [{f"key{j}": j for j in range(700)} | {"field": i} for i in range(3)]
    assert check([parse_query("w", "SELECT field, key699 FROM events")], wide, dedupe=True)
