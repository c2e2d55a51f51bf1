"""The reference evaluator of query plans: the semantics of substreams/DESIGN.md
("Declarative substreams", "Semantics"), one rule a test: missing fields and NULL,
three-valued logic, values of another kind, Perl byte strings, nested paths and list
indices, int against float, NaN, LIKE prefixes, typeof; SELECT rows; GROUP BY
partials; and merging partials, which must equal evaluating all the events at once."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sereal_codec.types import PerlObject, PerlRef
from substreams.errors import InvalidDeclaration
from substreams.query import evaluate, merge_partials, query
from substreams.query.parse import parse_query


def where(condition: str, events: list[Any]) -> list[int]:
    """The ids of the events ``condition`` keeps."""
    plan = parse_query("t", f"SELECT id FROM events WHERE {condition}")
    return [row["id"] for row in evaluate(plan, events)]


def ids(*values: Any, key: str = "v") -> list[dict[str, Any]]:
    """One event per value (``id`` = its position); ``MISSING`` leaves the key out."""
    return [{"id": i} if v is MISSING else {"id": i, key: v} for i, v in enumerate(values)]


MISSING = object()


def test_a_missing_field_and_none_are_null_and_comparing_null_is_unknown() -> None:
    events = ids(MISSING, None, 1)
    assert where("v = 1", events) == [2]
    assert where("v <> 1", events) == []
    assert where("NOT v = 1", events) == [], "NOT unknown is unknown: not kept"
    assert where("v IS NULL", events) == [0, 1]
    assert where("v IS NOT NULL", events) == [2]
    assert where("v = 1 OR TRUE = TRUE", events) == [0, 1, 2], "unknown OR true is true"
    assert where("v = 1 AND 1 = 2", events) == [], "unknown AND false is false"
    assert where("NOT (v = 1 AND 1 = 2)", events) == [0, 1, 2]
    assert where("v IN (1, 2)", events) == [2]
    assert where("NOT v IN (1, 2)", events) == []


def test_values_of_another_kind_are_not_equal_nor_ordered_never_an_error() -> None:
    events = ids("500", b"500", 500, [500], {"a": 500}, PerlRef(500), PerlObject("C", {}))
    assert where("v = 500", events) == [2]
    assert where("v <> 500", events) == [0, 1, 3, 4, 5, 6]
    assert where("v >= 500", events) == [2]
    assert where("v < 500", events) == []
    assert where("v = '500'", events) == [0, 1], "a Perl byte string is its UTF-8 text"
    assert where("v > '1'", events) == [0, 1]
    assert where("v IN ('500', 500)", events) == [0, 1, 2]


def test_int_float_and_bool_compare_as_numbers() -> None:
    events = ids(500, 500.0, 500.5, True, False, 1)
    assert where("v = 500", events) == [0, 1]
    assert where("v = 500.0", events) == [0, 1]
    assert where("v > 500", events) == [2]
    assert where("v = TRUE", events) == [3, 5], "TRUE is 1, as in Perl and Python"
    assert where("v = 0", events) == [4]


def test_nan_is_null_and_infinity_a_number() -> None:
    events = ids(float("nan"), float("inf"), float("-inf"))
    assert where("v IS NULL", events) == [0]
    assert where("v > 1e300", events) == [1]
    assert where("v < 0", events) == [2]
    assert where("typeof(v) = 'null'", events) == [0]


def test_byte_strings_are_read_as_the_codecs_default_mode_reads_them() -> None:
    events = ids(b"caf\xc3\xa9", "café", b"\xff", "\udcff")
    assert where("v = 'café'", events) == [0, 1]
    assert where("v LIKE 'caf%'", events) == [0, 1]
    assert where("typeof(v) = 'text'", events) == [0, 1, 2, 3]
    plan = parse_query("t", "SELECT v, count(*) AS n FROM events GROUP BY v")
    groups = evaluate(plan, events)
    assert [g["n"] for g in groups] == [2, 2], "a stray byte is the same text either way"
    assert groups[0]["v"] == b"caf\xc3\xa9", "a group shows the first value as held"


def test_nested_paths_and_list_indices_follow_dig() -> None:
    events = [
        {"id": 0, "search": {"city": "Paris"}, "q": [10, 20]},
        {"id": 1, "search": "Paris", "q": {"0": 10}},
        {"id": 2, "search": {"city": None}, "q": [10]},
        {"id": 3, "search": [{"city": "Paris"}], "q": []},
        {"id": 4, "search": {"city": "Paris", "0": "x"}},
    ]
    assert where("\"search.city\" = 'Paris'", events) == [0, 4]
    assert where('"search.city" IS NULL', events) == [1, 2, 3]
    assert where('"q.0" = 10', events) == [0, 1, 2]
    assert where('"q.-1" = 20', events) == [0]
    assert where('"q.1" IS NULL', events) == [1, 2, 3, 4]
    plan = parse_query("t", 'SELECT id, "search.city" AS city FROM events WHERE id < 2')
    assert evaluate(plan, events) == [{"id": 0, "city": "Paris"}, {"id": 1, "city": None}]


def test_like_matches_a_prefix_with_underscore_as_any_one_character() -> None:
    events = ids("/api/v2/x", "/api/v12", "/api/", "/API/v2", 5, "/api/v2")
    assert where("v LIKE '/api/v_/%'", events) == [0]
    assert where("v LIKE '/api/%'", events) == [0, 1, 2, 5]
    assert where("v LIKE '/api/v2'", events) == [5], "without % the whole text"
    assert where("v NOT LIKE '/api/%'", events) == [3, 4]


def test_typeof_names_each_kind() -> None:
    values = (MISSING, None, True, 3, 2.5, "s", b"b", [1], (1,), {"a": 1}, PerlRef(1))
    kinds = {
        kind: where(f"typeof(v) = '{kind}'", ids(*values))
        for kind in ("null", "boolean", "integer", "float", "text", "list", "map", "other")
    }
    assert kinds == {
        "null": [0, 1], "boolean": [2], "integer": [3], "float": [4], "text": [5, 6],
        "list": [7, 8], "map": [9], "other": [10],
    }  # fmt: skip


def test_a_select_gives_every_column_of_every_kept_event_in_order() -> None:
    plan = parse_query("t", "SELECT url, v AS value, 'x' AS k FROM events WHERE v > 1")
    events = [{"v": 2, "url": b"/a"}, {"v": 1}, {"v": [1]}, {"v": 5.5}]
    assert evaluate(plan, events) == [
        {"url": b"/a", "value": 2, "k": "x"},
        {"url": None, "value": 5.5, "k": "x"},
    ]
    assert evaluate(plan, []) == []


def test_a_group_by_gives_one_row_per_group_with_its_aggregates() -> None:
    plan = parse_query(
        "t",
        """SELECT host, count(*) AS n, count(ms) AS with_ms, sum(ms) AS total, min(ms) AS lo,
                  max(ms) AS hi, histogram(ms, 10, 100) AS h
           FROM events GROUP BY host""",
    )
    events = [
        {"host": "a", "ms": 5},
        {"host": "b", "ms": "slow"},
        {"host": "a", "ms": 150.5},
        {"host": "a"},
        {"host": "b", "ms": None},
        {"ms": 10},
        {"host": [1], "ms": True},
    ]
    assert evaluate(plan, events) == [
        {"host": "a", "n": 3, "with_ms": 2, "total": 155.5, "lo": 5, "hi": 150.5, "h": [1, 0, 1]},
        {"host": "b", "n": 2, "with_ms": 1, "total": None, "lo": "slow", "hi": "slow",
         "h": [0, 0, 0]},
        {"host": None, "n": 2, "with_ms": 2, "total": 11, "lo": True, "hi": 10, "h": [2, 0, 0]},
    ]  # fmt: skip


def test_group_keys_keep_their_kind_and_min_max_put_numbers_before_texts() -> None:
    plan = parse_query(
        "t", "SELECT v, count(*) AS n, min(w) AS lo, max(w) AS hi FROM events GROUP BY v"
    )
    events = [{"v": 1, "w": "b"}, {"v": 1.0, "w": 3}, {"v": True, "w": "a"}, {"v": "1", "w": 2}]
    assert evaluate(plan, events) == [
        {"v": 1, "n": 1, "lo": "b", "hi": "b"},
        {"v": 1.0, "n": 1, "lo": 3, "hi": 3},
        {"v": True, "n": 1, "lo": "a", "hi": "a"},
        {"v": "1", "n": 1, "lo": 2, "hi": 2},
    ]
    both = evaluate(parse_query("t", "SELECT min(w) AS lo, max(w) AS hi FROM events"), events)
    assert both == [{"lo": 2, "hi": "b"}]


def test_an_aggregate_without_group_by_is_one_row_even_for_no_event() -> None:
    plan = parse_query("t", "SELECT count(*) AS n, sum(v) AS s, histogram(v, 1) AS h FROM events")
    assert evaluate(plan, []) == [{"n": 0, "s": None, "h": [0, 0]}]
    assert merge_partials(plan, []) == [{"n": 0, "s": None, "h": [0, 0]}]
    assert merge_partials(plan, [evaluate(plan, [{"v": 1}]), evaluate(plan, [])]) == [
        {"n": 1, "s": 1, "h": [1, 0]}
    ]


def test_an_integer_sum_stays_exact_while_a_result_can_store_it() -> None:
    plan = parse_query("t", "SELECT sum(v) AS s FROM events")
    big = 2**63
    assert evaluate(plan, [{"v": big}, {"v": 1}]) == [{"s": big + 1}]
    beyond = evaluate(plan, [{"v": 2**64 - 1}, {"v": 1}])
    assert beyond == [{"s": 2.0**64}] and isinstance(beyond[0]["s"], float)
    assert merge_partials(plan, [[{"s": 2**64 - 1}], [{"s": 1}]]) == [{"s": 2.0**64}]


def test_merging_refuses_what_is_not_a_partial_of_the_query() -> None:
    plan = parse_query(
        "t", "SELECT host, count(*) AS n, histogram(v, 1) AS h FROM events GROUP BY host"
    )
    with pytest.raises(ValueError, match=r"query t: a partial result is NoneType.*a gap"):
        merge_partials(plan, [None])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="lacks a column"):
        merge_partials(plan, [[{"host": "a", "n": 1}]])
    with pytest.raises(ValueError, match="h: a histogram without 2 buckets"):
        merge_partials(
            plan, [[{"host": "a", "n": 1, "h": [1, 0]}], [{"host": "a", "n": 1, "h": [1]}]]
        )
    function = query(name="f", sql="SELECT a FROM events")
    assert merge_partials(function, [[{"a": 1}], [], [{"a": 2}]]) == [{"a": 1}, {"a": 2}]


def test_merge_takes_a_query_its_declaration_or_its_plan_but_not_a_function() -> None:
    from substreams import substream

    @substream(name="fn")
    def fn(events: list[Any], ctx: Any) -> int:
        return 0

    with pytest.raises(InvalidDeclaration, match="'fn' is a function, not a query"):
        merge_partials(fn.__substream__, [])  # type: ignore[attr-defined]


# -- merging partials is evaluating everything at once -------------------------------

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    # below 2**58, so 25 of them sum within the range a result stores: past it a sum
    # becomes a float, and a float sum depends on the order of the additions
    st.integers(-(2**58), 2**58),
    st.sampled_from(["a", "b", "é", ""]),
    st.binary(max_size=2),
    st.lists(st.integers(), max_size=2),
)
EVENT = st.dictionaries(st.sampled_from(["k", "v", "w"]), VALUES, max_size=3)
GROUPED = parse_query(
    "t",
    """SELECT k, count(*) AS n, count(v) AS c, sum(v) AS s, min(w) AS lo, max(w) AS hi,
              histogram(v, -5, 0, 7) AS h
       FROM events WHERE NOT w = 'b' OR w IS NULL GROUP BY k""",
)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(EVENT, max_size=25), cuts=st.lists(st.integers(0, 25), max_size=4))
def test_merged_partials_equal_one_evaluation_of_all_the_events(
    events: list[dict[str, Any]], cuts: list[int]
) -> None:
    bounds = [0, *sorted(min(c, len(events)) for c in cuts), len(events)]
    chunks = [events[a:b] for a, b in itertools.pairwise(bounds)]
    merged = merge_partials(GROUPED, [evaluate(GROUPED, c) for c in chunks])
    whole = evaluate(GROUPED, events)
    # Group keys show the first value as held; a bytes key and its text are one group.
    assert len(merged) == len(whole)
    for m, w in zip(merged, whole, strict=True):
        assert {k: v for k, v in m.items() if k != "k"} == {k: v for k, v in w.items() if k != "k"}
        assert m["k"] == w["k"]
