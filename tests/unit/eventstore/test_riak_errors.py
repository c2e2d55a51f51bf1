"""Pure parts of the Riak client: the status table, retry policy, node choice, paths."""

from __future__ import annotations

import random

import pytest

from eventstore.devnode.errors import WEBMACHINE_404_PAGE
from eventstore.errors import EventStoreError
from eventstore.riak import paths
from eventstore.riak.errors import (
    BadRequest,
    BucketTypeNotFound,
    ConnectionFailed,
    NotFound,
    Overload,
    PreconditionFailed,
    QuorumNotMet,
    RiakError,
    ServerError,
    Siblings,
    TooLarge,
    Unavailable,
    UnexpectedResponse,
    error_for,
)
from eventstore.riak.nodes import NodeSet
from eventstore.riak.retry import Retry
from eventstore.riak.settings import RiakSettings
from eventstore.riak.types import Location
from eventstore.settings import SettingsError

pytestmark = pytest.mark.unit

LOC = Location("events", "events", "1413813813:1:t:s:0")


@pytest.mark.parametrize(
    ("status", "body", "headers", "cls", "retriable"),
    [
        (404, b"not found\n", {}, NotFound, False),
        (404, b"not found\n", {"x-riak-deleted": "true"}, NotFound, False),
        (404, b"Unknown bucket type: x\n", {}, BucketTypeNotFound, False),
        (300, b"Siblings:\nabc\ndef\n", {}, Siblings, False),
        (400, b"Missing Content-Type request header", {}, BadRequest, False),
        (412, b"", {}, PreconditionFailed, False),
        (413, b"object exceeds the limit of 1000 bytes\n", {}, TooLarge, False),
        (503, b"R-value unsatisfied: 0/1\n", {}, QuorumNotMet, True),
        (503, b"PW-value unsatisfied: 1/2\n", {}, QuorumNotMet, True),
        (503, b"Too Many write failures to satisfy W/DW\n", {}, QuorumNotMet, True),
        (503, b"request timed out\n", {}, Unavailable, True),
        (503, b"overload\n", {}, Overload, True),
        (500, b"Error:\noverload\n", {}, Overload, True),
        (429, b"", {}, Overload, True),
        (500, b"Error:\nbadarg\n", {}, ServerError, True),
        (418, b"", {}, UnexpectedResponse, False),
    ],
)
def test_status_table(
    status: int, body: bytes, headers: dict[str, str], cls: type[RiakError], retriable: bool
) -> None:
    error = error_for(status, body, headers, location=LOC, node="http://n1:8098")
    assert type(error) is cls
    assert error.retriable is retriable
    assert isinstance(error, EventStoreError)
    assert "events/events/1413813813:1:t:s:0" in str(error)
    assert "http://n1:8098" in str(error)


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        # GET props of an unknown type: webmachine's plain page, no word of a bucket type.
        (404, WEBMACHINE_404_PAGE, BucketTypeNotFound),
        # PUT props: riak_core's reason as a JSON string.
        (400, b'"undefined"', BucketTypeNotFound),
        (400, b'"no_type"', BucketTypeNotFound),
        (400, b'"not_active"', BucketTypeNotFound),
        # PUT type props with security on.
        (404, b'Cannot modify unknown bucket type: <<"x">>', BucketTypeNotFound),
        # Any other refusal of props stays what it was.
        (400, b'"no_default_update"', BadRequest),
        (400, b'[{"n_val":"must be a positive integer"}]', BadRequest),
        (503, b"overload\n", Overload),
    ],
)
def test_props_answers_of_an_unknown_type(status: int, body: bytes, cls: type[RiakError]) -> None:
    error = error_for(status, body, {}, location=None, node="n", props_of="x")
    assert type(error) is cls
    if cls is BucketTypeNotFound:
        assert "Unknown bucket type: x" in str(error)
        assert error.retriable is False


def test_plain_404_is_an_unknown_type_only_on_props() -> None:
    # On an object path the same page would mean "not found" (Riak never sends it there).
    assert type(error_for(404, WEBMACHINE_404_PAGE, {}, location=LOC, node="n")) is NotFound


def test_tombstone_and_siblings_details() -> None:
    gone = error_for(
        404, b"", {"x-riak-deleted": "true", "x-riak-vclock": "abc="}, location=LOC, node="n"
    )
    assert isinstance(gone, NotFound) and gone.deleted and gone.vclock == "abc="
    siblings = error_for(300, b"Siblings:\nv1\nv2\n", {}, location=LOC, node="n")
    assert isinstance(siblings, Siblings) and siblings.vtags == ("v1", "v2")


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def make_retry(t: FakeTime, **kw: float | int) -> Retry:
    return Retry(sleep=t.sleep, clock=t.clock, rng=random.Random(1), **kw)  # type: ignore[arg-type]


def test_retry_backs_off_with_jitter_then_raises_last_error() -> None:
    t = FakeTime()
    calls: list[float] = []

    def fail(remaining: float) -> None:
        calls.append(remaining)
        raise ConnectionFailed(f"try {len(calls)}", node="n")

    with pytest.raises(ConnectionFailed, match="try 4"):
        make_retry(t, max_tries=4, delay_s=0.1, backoff=2, jitter=0.5, deadline_s=100)(fail)
    assert len(calls) == 4
    assert len(t.sleeps) == 3
    for sleep, base in zip(t.sleeps, [0.1, 0.2, 0.4], strict=True):
        assert base * 0.5 <= sleep <= base * 1.5


def test_retry_stops_at_non_retriable() -> None:
    t = FakeTime()
    calls = 0

    def missing(remaining: float) -> None:
        nonlocal calls
        calls += 1
        raise NotFound("not found")

    with pytest.raises(NotFound):
        make_retry(t)(missing)
    assert calls == 1 and t.sleeps == []


def test_retry_respects_deadline() -> None:
    t = FakeTime()
    calls = 0

    def slow(remaining: float) -> None:
        nonlocal calls
        calls += 1
        t.now += 3.0
        raise Unavailable("busy")

    with pytest.raises(Unavailable):
        make_retry(t, max_tries=100, delay_s=0.5, jitter=0, deadline_s=10)(slow)
    assert calls == 3  # 3 s each + 0.5, 1.0 of sleep: the 4th would start after 10 s


def test_retry_returns_success_and_passes_remaining_time() -> None:
    t = FakeTime()
    seen: list[float] = []

    def flaky(remaining: float) -> str:
        seen.append(remaining)
        if len(seen) < 2:
            raise Overload("busy")
        return "ok"

    assert make_retry(t, delay_s=1.0, jitter=0, deadline_s=5)(flaky) == "ok"
    assert seen == [5.0, 4.0]


def test_node_set_round_robin_skips_failed_and_excluded() -> None:
    t = FakeTime()
    nodes = NodeSet(["a", "b", "c"], cooldown_s=2.0, clock=t.clock)
    assert [nodes.pick() for _ in range(3)] == ["a", "b", "c"]
    nodes.failed("b")
    assert [nodes.pick() for _ in range(4)] == ["a", "c", "c", "a"]
    assert nodes.pick(exclude="c") in ("a",)
    t.now += 2.5
    assert "b" in [nodes.pick() for _ in range(3)]
    assert nodes.cooling() == []


def test_node_set_all_failed_still_picks_and_exclude_alone() -> None:
    t = FakeTime()
    nodes = NodeSet(["a", "b"], cooldown_s=5, clock=t.clock)
    nodes.failed("a")
    nodes.failed("b")
    assert nodes.pick(exclude="a") == "b"
    single = NodeSet(["only"], cooldown_s=5, clock=t.clock)
    assert single.pick(exclude="only") == "only"
    with pytest.raises(ValueError):
        NodeSet([], cooldown_s=1)
    with pytest.raises(ValueError):
        NodeSet(["a", "a"], cooldown_s=1)


def test_paths_quote_every_reserved_character() -> None:
    assert paths.object_path("events", "events", "1413813813:1:t:s:0") == (
        "/types/events/buckets/events/keys/1413813813%3A1%3At%3As%3A0"
    )
    assert paths.object_path(None, "epochs", "1413813813-1") == "/buckets/epochs/keys/1413813813-1"
    assert paths.object_path("default", "b", "a/b c%") == "/buckets/b/keys/a%2Fb%20c%25"
    assert paths.bucket_type_props_path("events") == "/types/events/props"
    assert paths.bucket_props_path("t", "b") == "/types/t/buckets/b/props"


def test_query_keeps_riak_names_and_drops_defaults() -> None:
    assert paths.query({"r": 1, "pr": None, "notfound_ok": True, "basic_quorum": False}) == (
        "?r=1&notfound_ok=true&basic_quorum=false"
    )
    assert paths.query({"w": None}) == ""


def test_riak_settings_from_mapping() -> None:
    s = RiakSettings.from_mapping({"nodes": ["http://a:8098", "http://b:8098"], "timeout_s": 3})
    assert s.nodes == ("http://a:8098", "http://b:8098")
    assert s.timeout_s == 3.0
    with pytest.raises(SettingsError, match="nodes"):
        RiakSettings.from_mapping({"nodes": []})
    with pytest.raises(SettingsError, match="unknown"):
        RiakSettings.from_mapping({"node": ["x"]})
