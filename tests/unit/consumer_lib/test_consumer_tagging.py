"""The flat view's tagging: the compiled ``tag_events`` (consumer_lib/csrc/tag_events.c) builds,
object for object, what the Python reference and ``tag_chunk`` build (a new
``TaggedEvent`` per event holding the very same objects, tracked by the collector alike),
holds no reference it should not, and refuses what it cannot build as the reference
does, with one clear error."""

from __future__ import annotations

import abc
import gc
import importlib
import sys
from dataclasses import dataclass, fields
from typing import Any

import pytest

import sereal_codec as sereal
from consumer_lib import types
from consumer_lib.types import TAG_SLOTS, Chunk, TaggedEvent, tag_chunk, tag_events, tag_events_py
from eventstore.names import ChunkKey
from relocator.events import generate_events

KEY = ChunkKey(1_700_000_000, "dc1", "web", "app", 7)
VALUES = (KEY.epoch, KEY.dc, KEY.type, KEY.subtype, KEY.chunk)


def core_tagger() -> Any:
    if sereal.IMPLEMENTATION != "c":
        pytest.skip("the compiled Sereal core is not built")
    return importlib.import_module("consumer_lib._tagger").tag_events


def same_objects(a: list[Any], b: list[Any]) -> None:
    """``a`` and ``b`` hold distinct new instances of the same type whose every slot holds
    the very same object, tracked by the collector alike, equal and hashed alike."""
    assert len(a) == len(b)
    names = [f.name for f in fields(TaggedEvent)]
    for x, y in zip(a, b, strict=True):
        assert type(x) is type(y) is TaggedEvent
        assert x is not y
        for name in names:
            assert getattr(x, name) is getattr(y, name), name
        assert gc.is_tracked(x) and gc.is_tracked(y)
        assert x == y
        assert not hasattr(x, "__dict__")


@pytest.mark.parametrize("n", [0, 1, 255, 256, 3_000])
def test_the_core_builds_what_the_references_build_object_for_object(n: int) -> None:
    core = core_tagger()
    events: list[Any] = list(generate_events(n, seed=5)) if n else []
    if n > 1:
        events[1] = ["not", "a", "dict"]  # whatever the decoder gave: held as is
        events[-1] = None
    built = core(TaggedEvent, TAG_SLOTS, VALUES, events)
    assert type(built) is list
    same_objects(built, tag_events_py(TaggedEvent, TAG_SLOTS, VALUES, events))
    same_objects(built, list(tag_chunk(Chunk(KEY, events, 1, "n"))))
    for tagged, event in zip(built, events, strict=True):
        assert tagged.event is event
        assert (tagged.epoch, tagged.dc, tagged.type, tagged.subtype, tagged.chunk) == VALUES
        assert tagged.as_dict()["event"] is event


def test_the_python_reference_builds_what_tag_chunk_builds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[Any] = list(generate_events(300, seed=2))
    expected = list(tag_chunk(Chunk(KEY, events, 1, "n")))
    same_objects(tag_events_py(TaggedEvent, TAG_SLOTS, VALUES, events), expected)
    monkeypatch.setattr(types, "TAGGER", tag_events_py)  # where the core is not built
    same_objects(tag_events(events, KEY), expected)


def test_tag_events_uses_the_core_where_it_is_built() -> None:
    core = core_tagger()
    assert types.TAGGER is core
    events = generate_events(10, seed=1)
    same_objects(tag_events(events, KEY), list(tag_chunk(Chunk(KEY, events, 1, "n"))))


def test_the_core_holds_no_reference_once_its_result_is_gone() -> None:
    core = core_tagger()
    events: list[Any] = [{"i": i} for i in range(100)]
    watched = [TaggedEvent, events, events[0], events[-1], *VALUES[1:4]]

    def counts() -> list[int]:
        return [sys.getrefcount(x) for x in watched]

    before = counts()
    built = core(TaggedEvent, TAG_SLOTS, VALUES, events)
    # each instance holds its (heap) type, its event and the values
    grown = [len(events), 0, 1, 1, *[len(events)] * 3]
    assert counts() == [b + g for b, g in zip(before, grown, strict=True)]
    del built
    assert counts() == before


def test_the_core_keeps_a_frozen_instance_frozen() -> None:
    core = core_tagger()
    (tagged,) = core(TaggedEvent, TAG_SLOTS, VALUES, [{"a": 1}])
    with pytest.raises(AttributeError):
        tagged.epoch = 1


@dataclass(frozen=True, slots=True)
class Other:
    a: int
    b: Any


class Abstract(abc.ABC):
    __slots__ = ("a", "b")

    @abc.abstractmethod
    def f(self) -> None: ...


class OwnNew:
    __slots__ = ("a", "b")

    def __new__(cls) -> OwnNew:
        return super().__new__(cls)


class ReadOnly:
    __slots__ = ()
    a = property(lambda self: 1)


OTHER = (Other.__dict__["a"], Other.__dict__["b"])


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((Other, OTHER, (1, 2), [{}]), ValueError, "1 to 16 slots and one value fewer"),
        ((Other, (), (), [{}]), ValueError, "1 to 16 slots"),
        ((Other, list(OTHER), (1,), [{}]), TypeError, "slots and values are tuples"),
        ((Other, OTHER, [1], [{}]), TypeError, "slots and values are tuples"),
        ((Other, OTHER, (1,), ({},)), TypeError, "events a list"),
        ((Other, OTHER, (1,), type("L", (list,), {})([{}])), TypeError, "events a list"),
        ((Other, (OTHER[0], OTHER[0]), (1,), [{}]), ValueError, "slot 1 is slot 0 again"),
        ((Other, (OTHER[0], "b"), (1,), [{}]), TypeError, "slot 1 is a str"),
        ((Other, (TAG_SLOTS[0], OTHER[1]), (1,), [{}]), TypeError, r"slot 0 \(epoch\)"),
        ((Other, (ReadOnly.__dict__["a"], OTHER[1]), (1,), [{}]), TypeError, "slot 0 is a"),
        ((Other, (type.__dict__["__basicsize__"], OTHER[1]), (1,), [{}]), TypeError, "slot 0"),
        ((Abstract, (Abstract.a, Abstract.b), (1,), [{}]), TypeError, "object.__new__"),  # type: ignore[attr-defined]
        ((OwnNew, (OwnNew.a, OwnNew.b), (1,), [{}]), TypeError, "object.__new__"),  # type: ignore[attr-defined]
        (("Other", OTHER, (1,), [{}]), TypeError, "must be type"),
    ],
)
def test_the_core_refuses_what_it_cannot_build_naming_it(
    args: tuple[Any, ...], error: type[Exception], match: str
) -> None:
    core = core_tagger()
    with pytest.raises(error, match=match):
        core(*args)


def test_the_core_builds_another_slotted_class() -> None:
    core = core_tagger()
    events: list[Any] = [{"x": 1}, 2]
    built = core(Other, OTHER, ("fixed",), events)
    assert built == [Other("fixed", {"x": 1}), Other("fixed", 2)]  # type: ignore[arg-type]
    assert all(b.b is e for b, e in zip(built, events, strict=True))
