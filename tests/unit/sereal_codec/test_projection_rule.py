"""The projection rule (sereal_codec/projection.py): compiling fields, merging
trees, and the promise every decoder's projection is checked against: for a declared
path p and any path q starting with p, dig(project(e), q) == dig(e, q)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sereal_codec.projection import compile_fields, merge, project, project_events
from sereal_codec.types import PerlObject
from substreams.helpers import dig


def test_compile() -> None:
    assert compile_fields(None) is None
    assert compile_fields([]) == {}
    assert compile_fields(["status", "http.latency_ms", "http.status"]) == {
        "status": None,
        "http": {"latency_ms": None, "status": None},
    }
    # a whole value absorbs deeper paths, in either order
    assert compile_fields(["http.url", "http"]) == {"http": None}
    assert compile_fields(["http", "http.url"]) == {"http": None}
    assert compile_fields([("a.b", "c")]) == {"a.b": {"c": None}}


@pytest.mark.parametrize("bad", ["status", ["a..b"], [""], [".a"], [3], [("a", 1)]])
def test_compile_rejects(bad: Any) -> None:
    with pytest.raises(ValueError, match="field"):
        compile_fields(bad)


def test_merge() -> None:
    a = compile_fields(["x", "h.a"])
    b = compile_fields(["h.b", "y.z"])
    assert merge([a, b]) == {"x": None, "h": {"a": None, "b": None}, "y": {"z": None}}
    assert merge([a, compile_fields(["h"])]) == {"x": None, "h": None}
    assert merge([a, None]) is None
    assert merge([]) == {}
    assert a == {"x": None, "h": {"a": None}}  # inputs untouched


def test_project() -> None:
    e = {
        "a": 1,
        "h": {"x": 1, "y": [1, 2], "z": {"q": 1}},
        "l": [{"a": 1}],
        "o": PerlObject("C", {"k": 1}),
    }
    assert project(e, compile_fields(["h.y", "a"])) == {"a": 1, "h": {"y": [1, 2]}}
    assert list(project(e, compile_fields(["h", "a"]))) == ["a", "h"]  # the value's order
    assert project(e, compile_fields(["l.0.a"]))["l"] is e["l"]  # a list is kept whole
    assert project(e, compile_fields(["o.k"]))["o"] is e["o"]  # so is an object
    assert project(e, compile_fields(["a.b"])) == {"a": 1}  # a scalar under a deeper path
    assert project(e, compile_fields(["missing"])) == {}
    assert project(e, None) is e
    assert project_events([e, 3], compile_fields(["a"])) == [{"a": 1}, 3]


KEYS = st.sampled_from(["a", "b", "c", "0", "1"])
VALUES = st.recursive(
    st.none() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)
PATHS = st.lists(KEYS, min_size=1, max_size=3).map(".".join)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=5), st.lists(PATHS, max_size=4), PATHS)
def test_dig_sees_the_same(event: dict[str, Any], fields: list[str], suffix: str) -> None:
    projected = project(event, compile_fields(fields))
    for p in fields:
        for q in (p, f"{p}.{suffix}"):
            assert dig(projected, q, "<none>") == dig(event, q, "<none>")
