"""Projected decoding (issue 16): ``decode(blob, fields=...)`` builds only the declared
fields of each event, and equals ``project_events(decode(blob), compile_fields(fields))``
(eventstore/sereal/DESIGN.md, "Projection")."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from eventstore.blob import pack_blob, unpack_blob
from eventstore.sereal.projection import compile_fields, project_events
from relocator.events import generate_events

pytestmark = pytest.mark.unit

WEB_FIELDS = ["type", "status", "url", "method", "duration_ms", "search.city"]


def test_decode_with_fields_is_the_projection(sereal: ModuleType) -> None:
    events = generate_events(300, seed=3)
    doc = sereal.encode(events)
    got = sereal.decode(doc, fields=WEB_FIELDS)
    assert got == project_events(events, compile_fields(WEB_FIELDS))
    assert got[0] == {
        k: events[0][k]
        for k in events[0]
        if k in {"type", "status", "url", "method", "duration_ms"}
    } | ({"search": {"city": events[0]["search"]["city"]}} if "search" in events[0] else {})
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


def test_unpack_blob_passes_fields_through() -> None:
    events = generate_events(50, seed=4)
    blob = pack_blob(events)
    fields = iter(["status", "http.latency_ms"])  # any iterable, read once
    assert unpack_blob(blob, fields=fields) == project_events(
        events, compile_fields(["status", "http.latency_ms"])
    )
    with pytest.raises(ValueError, match="field"):
        unpack_blob(blob, fields="status")
