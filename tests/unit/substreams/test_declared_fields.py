"""The declared-fields contract (issue 21): on the events a substream declaring
``fields=[...]`` is given, reading a field it did not declare raises ``UndeclaredField``
naming the field and the declared ones, whichever accessor (``dig`` and the helpers
built on it, ``.get``, ``[]``, ``in``), at the top level and inside a narrowed dict; a
declared field the event lacks reads as absent, as on a plain dict. The child gives
these events on both of its paths (the companion's loader, a caller's list). Pure: no
process is forked here (the three paths end to end:
``tests/integration/consumer_lib/test_consumer_fallback_fields.py``,
``tests/integration/companion/test_companion_every_chunk_answered.py``)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

import pytest

from eventstore.blob import pack_blob, unpack_blob
from sereal_codec.projection import project_events
from substreams import count_by, declaration_of, dig, pick, substream, where
from substreams.api import Substream
from substreams.child import Loaded, declared_for
from substreams.errors import UndeclaredField

EVENTS = [
    {"url": "/a", "status": 200, "host": "web-1", "search": {"city": "Paris", "nights": 2}},
    {"url": "/b", "host": "web-2", "search": {"city": "Oslo", "country": "NO"}},
]


def _sub(fields: list[str] | None) -> Substream:
    declared = declaration_of(substream(name="s", fields=fields)(lambda events, ctx: None))
    assert declared is not None
    return declared


def _given(fields: list[str] | None) -> list[Any]:
    sub = _sub(fields)
    return declared_for(sub, project_events(EVENTS, sub.projection))


READS: dict[str, Callable[[Any], Any]] = {
    "dig": lambda e: dig(e, "host"),
    "get": lambda e: e.get("host"),
    "[]": lambda e: e["host"],
    "in": lambda e: "host" in e,
    "pick": lambda e: pick(e, "url", "host"),
}


@pytest.mark.parametrize("accessor", sorted(READS))
def test_reading_an_undeclared_field_raises_naming_it_and_the_declared_ones(
    accessor: str,
) -> None:
    (event, _) = _given(["url", "status"])
    with pytest.raises(UndeclaredField) as info:
        READS[accessor](event)
    assert str(info.value) == (
        "field 'host' is not declared (declared fields: url, status); "
        "add 'host' to @substream(fields=[...])"
    )
    # the same read on every field is fine with no declaration (plain dicts)
    (plain, _) = _given(None)
    assert type(plain) is dict and READS[accessor](plain) is not None


def test_the_helpers_over_lists_raise_too_and_except_keyerror_does_not_swallow_it() -> None:
    events = _given(["url"])
    with pytest.raises(UndeclaredField, match="'status'"):
        count_by(events, "status")
    with pytest.raises(UndeclaredField, match="'status'"):
        where(events, status=200)
    with pytest.raises(UndeclaredField):
        where(events, lambda e: e["status"] == 200)  # a predicate's KeyError is swallowed
    with pytest.raises(UndeclaredField), contextlib.suppress(KeyError):  # not swallowed
        events[0]["host"]


def test_a_declared_field_an_event_lacks_reads_as_absent() -> None:
    events = _given(["url", "status"])
    assert [dig(e, "status") for e in events] == [200, None]
    assert [e.get("status", -1) for e in events] == [200, -1]
    assert ["status" in e for e in events] == [True, False]
    with pytest.raises(KeyError) as info:
        events[1]["status"]
    assert type(info.value) is KeyError
    assert pick(events[1], "url", "status") == {"url": "/b"}


def test_inside_a_narrowed_dict_only_the_declared_keys_may_be_read() -> None:
    events = _given(["search.city"])
    assert [dig(e, "search.city") for e in events] == ["Paris", "Oslo"]
    message = "field 'search.country' is not declared (declared fields: search.city)"
    with pytest.raises(UndeclaredField, match=re.escape(message)):
        dig(events[1], "search.country")
    with pytest.raises(UndeclaredField, match=r"search\.country"):
        events[1]["search"].get("country")
    # a path naming a whole value keeps it plain: every key of it may be read
    (whole, _) = _given(["search"])
    assert whole["search"].get("country") is None and type(whole["search"]) is dict


def test_the_events_are_the_narrowed_ones_otherwise() -> None:
    events = _given(["url", "search.city"])
    assert events == [
        {"url": "/a", "search": {"city": "Paris"}},
        {"url": "/b", "search": {"city": "Oslo"}},
    ]
    assert [sorted(e) for e in events] == [["search", "url"], ["search", "url"]]
    assert unpack_blob(pack_blob(events)) == events  # a result holding events encodes
    assert _given([]) == [{}, {}]
    with pytest.raises(UndeclaredField, match=r"declared fields: none"):
        _given([])[0].get("url")


def test_the_child_gives_declared_events_on_the_loader_path_too() -> None:
    """The companion's path: the chunk loaded once with the union of the fields, each
    substream given its own (the union's own list included)."""
    narrow, wide = _sub(["url"]), _sub(["url", "host"])
    source = Loaded(lambda tree: project_events(EVENTS, tree))
    source.load([narrow, wide], [0, 1])
    for sub in (narrow, wide):
        events = source.events_for(sub)
        assert events == project_events(EVENTS, sub.projection)
        assert events is source.events_for(sub), "made once per field set"
    assert source.events_for(wide)[0].get("host") == "web-1"
    with pytest.raises(UndeclaredField, match="'host'"):
        source.events_for(narrow)[0].get("host")
