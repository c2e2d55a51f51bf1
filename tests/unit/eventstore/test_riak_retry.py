"""How the Riak client rides out failures: the retry policy (backoff with jitter,
non-retriable errors, the deadline) and the node choice (round robin past failed and
excluded nodes)."""

from __future__ import annotations

import random

import pytest

from eventstore.riak.errors import (
    ConnectionFailed,
    NotFound,
    Overload,
    Unavailable,
)
from eventstore.riak.nodes import NodeSet
from eventstore.riak.retry import Retry


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
