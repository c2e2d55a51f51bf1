"""The plugin API: declarations, matching, versions, helpers, result values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from substreams import Context, count_by, declaration_of, dig, pick, substream, version_of, where
from substreams.errors import InvalidDeclaration
from substreams.examples import web_5xx
from substreams.results import Status, error_value, ok_value, read_result


def test_the_decorator_returns_the_function_itself_with_its_declaration() -> None:
    def f(events: list[dict[str, object]], ctx: Context) -> int:
        return len(events)

    decorated = substream(name="f", types=["web", "lb.*"], timeout_s=0.5, memory_mb=64)(f)
    assert decorated is f
    declared = declaration_of(f)
    assert declared is not None
    assert (declared.name, declared.types, declared.timeout_s, declared.memory_mb) == (
        "f",
        ("web", "lb.*"),
        0.5,
        64,
    )
    assert declared([{}, {}], Context(1, "dc", "web", "", 0)) == 2
    assert declared.version == version_of(Path(__file__).read_bytes())


@pytest.mark.parametrize(
    ("types", "subtypes", "type_", "subtype", "expected"),
    [
        (None, None, "web", "", True),
        (["*"], None, "anything", "x", True),
        (["web"], None, "web", "main", True),
        (["web"], None, "lb", "main", False),
        (["web.*"], None, "web.api", "", True),
        (["web"], ["main"], "web", "api", False),
        (["web"], ["main", "api"], "web", "api", True),
    ],
)
def test_matching_by_type_and_subtype(
    types: list[str] | None, subtypes: list[str] | None, type_: str, subtype: str, expected: bool
) -> None:
    declared = declaration_of(substream(name="m", types=types, subtypes=subtypes)(lambda e, c: 0))
    assert declared is not None and declared.matches(type_, subtype) is expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "bad name"},
        {"name": ""},
        {"name": "ok", "timeout_s": 0},
        {"name": "ok", "timeout_s": 31},
        {"name": "ok", "timeout_s": float("nan")},
        {"name": "ok", "memory_mb": -1},
        {"name": "ok", "max_result_bytes": 10**9},
        {"name": "ok", "types": ["web/x"]},
        {"name": "ok", "timeout_s": True},
    ],
)
def test_bad_declarations_are_refused_with_the_reason(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidDeclaration):
        substream(**kwargs)  # type: ignore[arg-type]


def test_context_names_its_chunk_key() -> None:
    ctx = Context(1413813813, "dc2", "type3", "", 0)
    assert ctx.key.format() == "1413813813:dc2:type3::0"
    assert Context.of(ctx.key) == ctx


def test_helpers_never_raise_on_odd_events() -> None:
    event = {"http": {"status": 503, "hops": [{"ms": 4}, {"ms": 9}]}, "host": "a", "n": None}
    assert dig(event, "http.status") == 503
    assert dig(event, "http.hops.1.ms") == 9
    assert dig(event, "http.hops.9.ms", "none") == "none"
    assert dig(event, "http.status.x") is None
    assert dig("not a dict", "a") is None
    assert dig(event, "n", 5) is None
    assert pick(event, "http.status", "missing", "host", rename={"http.status": "s"}) == {
        "s": 503,
        "host": "a",
    }
    events = [event, {"host": "b"}, {"host": "a", "http": "text"}]
    assert where(events, host="a") == [event, events[2]]
    assert where(events, lambda e: e["http"]["status"] > 500) == [event]
    assert count_by(events, "host") == {"a": 2, "b": 1}
    assert count_by(events, "host", "http.status", missing="-") == {"a|503": 1, "b|-": 1, "a|-": 1}


def test_helpers_treat_every_kind_of_mapping_and_path_alike() -> None:
    from types import MappingProxyType

    plain = {"a": {"b": [10, 20]}, "a.b": "literal", "--1": "dashes"}
    proxy = MappingProxyType(plain)
    for event in (plain, proxy):
        assert dig(event, "a.b.-1") == 20
        assert dig(event, "a.b.--1", "d") == "d"  # not an index, not a key
        assert dig(event, "a.b") == [10, 20]  # a dotted path is a path, never a key
        assert dig(event, "--1") == "dashes"
        assert dig(event, "missing", 0) == 0
    assert dig([1, 2], "0") == 1 and dig((1, 2), "5", "x") == "x"
    counts = count_by([{"k": "z"}, {"k": 1}, {}, {"k": "z"}], "k", missing="?")
    assert counts == {"z": 2, "1": 1, "?": 1} and type(counts) is dict
    assert list(counts) == ["z", "1", "?"]  # first appearance first


def test_result_values_round_trip_with_their_status() -> None:
    ok = read_result(ok_value("web_5xx", "abc", [{"url": "/", "ms": 1.5}]))
    assert (ok.status, ok.substream, ok.version, ok.result, ok.error) == (
        "ok",
        "web_5xx",
        "abc",
        [{"url": "/", "ms": 1.5}],
        None,
    )
    statuses: tuple[Status, ...] = ("error", "timeout", "killed", "shed")
    for status in statuses:
        record = read_result(error_value(status, "s", "v", f"{status}: why"))
        assert (record.status, record.error, record.ok) == (status, f"{status}: why", False)
    with pytest.raises(ValueError, match="failure status"):
        error_value("ok", "s", "v", "x")


def test_example_plugins_run_as_plain_calls() -> None:
    events: list[dict[str, Any]] = [
        {"type": "web", "url": "/a", "status": 503, "duration_ms": 12.5, "host": "h1"},
        {"type": "web", "url": "/b", "status": 200, "duration_ms": 3.0, "host": "h2"},
        {"type": "web", "status": "weird"},
    ]
    out = web_5xx.web_5xx(events, Context(1, "dc", "web", "main", 0))
    assert out == [{"url": "/a", "status": 503, "ms": 12.5, "host": "h1", "request_id": None}]
