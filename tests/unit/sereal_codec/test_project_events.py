"""The compiled ``project_events`` (``csrc/project_events.c``) against the reference
(``sereal_codec.projection._project_events_py``): equal results, the same objects
where the reference keeps a value whole, new plain dicts where it narrows one, the
event's key order; the same ValueError for a bad tree. Each test also runs on the
reference alone, so the rule holds with or without the core."""

from __future__ import annotations

import importlib
from collections import OrderedDict
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sereal_codec import projection
from sereal_codec.projection import _project_events_py, project
from sereal_codec.types import PerlObject, PerlRef

try:
    _core: ModuleType | None = importlib.import_module("sereal_codec._sereal")
except ImportError:  # pragma: no cover - the core is built in CI (test_core.py checks)
    _core = None

needs_core = pytest.mark.skipif(_core is None, reason="compiled core not built")

Project = Callable[[list[Any], Any], list[Any]]
IMPLS: dict[str, Project] = {"reference": _project_events_py}
if _core is not None:
    IMPLS["compiled"] = _core.project_events


@pytest.fixture(params=sorted(IMPLS))
def impl(request: pytest.FixtureRequest) -> Project:
    return IMPLS[request.param]


class Sub(dict[Any, Any]):
    """A dict subclass: projected like a dict (isinstance), to a plain dict."""


class StrSub(str):
    """A str subclass key: equal to the tree's str key, kept as the event's object."""

    __slots__ = ()


# Few keys, so trees name keys the events have (non-ASCII ones of each str kind); not
# only str keys in events.
KEYS = st.sampled_from(["a", "b", "c", "d", "http", "x.y", "", "né", "日本", "\U0001f600"])
EVENT_KEYS = st.one_of(KEYS, KEYS.map(StrSub), st.integers(0, 3), st.binary(max_size=2))
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5)
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    dicts = st.dictionaries(EVENT_KEYS, children, max_size=6)
    return st.one_of(
        st.lists(children, max_size=3),
        dicts,
        dicts.map(Sub),
        dicts.map(_reordered),
        st.builds(PerlObject, st.just("Cls"), children),
        st.builds(PerlRef, children),
    )


def _reordered(d: dict[Any, Any]) -> OrderedDict[Any, Any]:
    # An OrderedDict whose order is not its storage's: items() must be what counts.
    od = OrderedDict(d)
    if od:
        od.move_to_end(next(iter(od)))
    return od


VALUES = st.recursive(SCALARS, _containers, max_leaves=25)
EVENTS = st.lists(VALUES, max_size=6)
TREES = st.recursive(
    st.dictionaries(KEYS, st.none(), max_size=4),
    lambda sub: st.dictionaries(KEYS, st.one_of(st.none(), sub), max_size=4),
    max_leaves=12,
)


def check(result: Any, value: Any, tree: Any) -> None:
    """``result`` is ``project(value, tree)`` in value, identity, type and key order."""
    if tree is None or not isinstance(value, dict):
        assert result is value
        return
    expected = project(value, tree)
    assert type(result) is dict
    assert result is not value
    assert list(result) == list(expected)
    assert all(a is b for a, b in zip(result, expected, strict=True))  # the event's keys
    for key, item in value.items():
        if key in tree:
            check(result[key], item, tree[key])


@settings(max_examples=400, deadline=None)
@given(events=EVENTS, tree=st.one_of(st.none(), TREES))
def test_differential(events: list[Any], tree: Any) -> None:
    out = {name: f(events, tree) for name, f in IMPLS.items()}
    for result in out.values():
        if tree is None:
            assert result is events
            continue
        assert type(result) is list and result is not events
        assert len(result) == len(events)
        for r, e in zip(result, events, strict=True):
            check(r, e, tree)
    assert out.get("compiled", out["reference"]) == out["reference"]


def test_examples(impl: Project) -> None:
    http = {"status": 200, "url": "/", "latency_ms": 3}
    tags = ["a", "b"]
    event = {"z": 1, "http": http, "tags": tags, "a": "x"}
    [out] = impl([event], {"a": None, "tags": None, "http": {"latency_ms": None, "no": None}})
    assert list(out.items()) == [("http", {"latency_ms": 3}), ("tags", tags), ("a", "x")]
    assert out["tags"] is tags and out["http"] is not http
    # a path into a value that is no dict keeps it whole; not a dict: kept as is
    ref = PerlRef(5)
    assert impl([{"http": ref}, 7, [event]], {"http": {"x": None}}) == [{"http": ref}, 7, [event]]
    # the empty tree keeps no key; None: the list itself
    assert impl([event, Sub(a=1)], {}) == [{}, {}]
    events = [event]
    assert impl(events, None) is events


def test_subclasses(impl: Project) -> None:
    od = OrderedDict([("a", 1), ("b", 2), ("c", 3)])
    od.move_to_end("a")
    [out] = impl([od], {"a": None, "c": None})
    assert type(out) is dict and list(out.items()) == [("c", 3), ("a", 1)]
    [out] = impl([Sub(b=Sub(c=1, d=2))], {"b": {"d": None}})
    assert type(out) is dict and type(out["b"]) is dict and out == {"b": {"d": 2}}


def test_large_tree(impl: Project) -> None:
    # More keys than the core's hash table of a tree holds: looked up in the dict.
    tree: dict[str, Any] = {f"k{i}": None for i in range(20)}
    tree["k3"] = {"x": None, "y": {"z": None}}
    event = {f"k{i}": {"x": i, "y": {"z": i, "w": 0}, "v": 1} for i in range(25, -1, -1)}
    outs = impl([event, Sub(event)], tree)
    assert outs == _project_events_py([event, Sub(event)], tree)
    out = outs[0]
    assert list(out) == [f"k{i}" for i in range(19, -1, -1)]
    assert out["k3"] == {"x": 3, "y": {"z": 3}} and out["k4"] is event["k4"]


class Boom:
    """A key equal in hash to "a" whose comparison raises."""

    def __hash__(self) -> int:
        return hash("a")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("boom")


def test_key_comparison_error_propagates(impl: Project) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        impl([{Boom(): 1}], {"a": None})


def _deep(depth: int) -> dict[str, Any]:
    tree: dict[str, Any] = {"k": None}
    for _ in range(depth - 1):
        tree = {"k": tree}
    return tree


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        (["a"], "is a dict"),
        ({"a": 1}, "is a dict"),
        ({"a": {"b": "c"}}, "is a dict"),
        ({1: None}, "keys are str"),
        ({"a": {b"b": None}}, "keys are str"),
        (_deep(1001), "deeper than"),
    ],
)
def test_bad_tree(impl: Project, tree: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        impl([], tree)


@needs_core
def test_deepest_tree() -> None:
    # The deepest tree the check admits; the reference's own recursion stops short of
    # it at Python's default limit, the compiled one does not.
    assert _core is not None
    event: Any = 1
    for _ in range(1000):
        event = {"k": event, "j": 0}
    [out] = _core.project_events([event], _deep(1000))
    for _ in range(1000):
        assert list(out) == ["k"]
        out = out["k"]
    assert out == 1


@needs_core
def test_dispatch() -> None:
    assert _core is not None
    assert projection._project_events is _core.project_events
