"""A strict projection (``project_events(events, tree, strict=refuse)``, issue 21): the
same events as the plain one, each narrowed dict refusing the keys the tree does not
name at its level (``d[k]``, ``d.get(k)``, ``k in d``) with ``refuse(path, k)``'s
exception, a named key it lacks reading as on a plain dict; the compiled core's
``StrictDict`` and the reference's alike, copies included. The substreams' declared
fields are enforced this way (``tests/unit/substreams/test_declared_fields.py``)."""

from __future__ import annotations

import copy
import gc
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from sereal_codec.projection import _project_events_py, compile_fields, project

try:
    _core: ModuleType | None = importlib.import_module("sereal_codec._sereal")
except ImportError:  # pragma: no cover - the core is built in CI (test_core.py checks)
    _core = None

Project = Callable[..., list[Any]]
IMPLS: dict[str, Project] = {"reference": _project_events_py}
if _core is not None:
    IMPLS["compiled"] = _core.project_events

EVENTS: list[Any] = [
    {"url": "/a", "status": 200, "host": "w1", "search": {"city": "Paris", "n": 2}, "q": [1]},
    {"url": "/b", "host": "w2", "search": ["not", "a", "dict"]},
    "not an event",
]
TREE = compile_fields(["url", "status", "search.city", "q"])


class Refused(Exception):
    pass


def refuse(path: tuple[str, ...], key: Any) -> Refused:
    return Refused(".".join((*path, str(key))))


@pytest.fixture(params=sorted(IMPLS))
def impl(request: pytest.FixtureRequest) -> Project:
    return IMPLS[request.param]


def test_the_same_events_as_the_plain_projection(impl: Project) -> None:
    strict = impl(EVENTS, TREE, strict=refuse)
    assert strict == [project(e, TREE) for e in EVENTS]
    assert [list(e) for e in strict[:2]] == [["url", "status", "search", "q"], ["url", "search"]]
    assert type(strict[0]) is not dict and isinstance(strict[0], dict)
    assert type(strict[0]["search"]) is type(strict[0])  # a narrowed level: strict too
    assert strict[0]["q"] is EVENTS[0]["q"] and strict[2] is EVENTS[2]  # kept whole
    assert impl(EVENTS, None, strict=refuse) is EVENTS


@pytest.mark.parametrize(
    "read",
    [
        lambda e: e["host"],
        lambda e: e.get("host"),
        lambda e: e.get("host", 0),
        lambda e: "host" in e,
    ],
    ids=["[]", "get", "get default", "in"],
)
def test_a_key_the_tree_does_not_name_is_refused_even_when_the_event_had_it(
    impl: Project, read: Callable[[Any], Any]
) -> None:
    (event, other, _) = impl(EVENTS, TREE, strict=refuse)
    for e in (event, other):
        with pytest.raises(Refused, match=r"^host$"):
            read(e)
    with pytest.raises(Refused, match=r"^search\.n$"):
        event["search"].get("n")


def test_a_named_key_the_event_lacks_reads_as_on_a_plain_dict(impl: Project) -> None:
    (_, other, _) = impl(EVENTS, TREE, strict=refuse)
    assert other.get("status") is None and other.get("status", -1) == -1
    assert "status" not in other and "url" in other and other["url"] == "/b"
    with pytest.raises(KeyError) as info:
        other["status"]
    assert type(info.value) is KeyError and info.value.args == ("status",)


def test_the_refusal_may_raise_and_must_be_an_exception(impl: Project) -> None:
    def raising(path: tuple[str, ...], key: Any) -> Refused:
        raise Refused("raised")

    with pytest.raises(Refused, match="raised"):
        impl(EVENTS, TREE, strict=raising)[0].get("host")
    with pytest.raises(TypeError, match="returns an exception, not int"):
        impl(EVENTS, TREE, strict=lambda path, key: 3)[0].get("host")
    with pytest.raises(TypeError, match="strict is None or a callable, not int"):
        impl(EVENTS, TREE, strict=3)


def test_copies_refuse_alike_and_the_tree_is_read_once(impl: Project) -> None:
    tree = compile_fields(["url"])
    assert tree is not None
    (event, _, _) = impl(EVENTS, tree, strict=refuse)
    tree["host"] = None  # changed afterwards: the events refuse what they refused
    for made in (copy.copy(event), copy.deepcopy(event)):
        assert made == {"url": "/a"} and type(made) is type(event)
        with pytest.raises(Refused, match="host"):
            made.get("host")
    assert type(event)() == {} and type(event)().get("x") is None  # no level: plain


@pytest.mark.skipif(_core is None, reason="compiled core not built")
def test_compiled_strict_dicts_are_tracked_by_the_collector_as_plain_dicts_are() -> None:
    assert _core is not None
    tree = compile_fields(["url", "search.city", "q"])
    strict = _core.project_events(EVENTS, tree, strict=refuse)
    plain = _core.project_events(EVENTS, tree)
    assert [gc.is_tracked(e) for e in strict[:2]] == [gc.is_tracked(e) for e in plain[:2]]
    assert [gc.is_tracked(e) for e in strict[:2]] == [True, True]  # a dict, a list in them
    scalars = _core.project_events(EVENTS, compile_fields(["url"]), strict=refuse)
    assert not gc.is_tracked(scalars[0])
    scalars[0]["later"] = []  # a container put in later: tracked, as a plain dict
    assert gc.is_tracked(scalars[0])
