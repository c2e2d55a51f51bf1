"""The hook twin's circuit breaker (devnode.breaker) against the shared vectors.

``tests/vectors/hook_breaker.json`` is also read by the Erlang hook's EUnit suite
(``erlang_hooks/test/riak_events_breaker_vectors_tests.erl``), so both breakers give the
same result, state and failure count at every step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from devnode.breaker import Breaker, BreakerState

VECTORS = json.loads((Path(__file__).parents[2] / "vectors" / "hook_breaker.json").read_text())


class Clock:
    """Milliseconds set by the test."""

    def __init__(self) -> None:
        self.now_ms = 0.0

    def __call__(self) -> float:
        return self.now_ms


def apply(breaker: Breaker, event: str) -> object:
    if event == "allow":
        return breaker.allow()
    if event == "success":
        breaker.success()
        return None
    if event == "failure":
        return "opened" if breaker.failure() else "counted"
    raise AssertionError(f"unknown event {event!r} in the vectors")


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"])
def test_vector(case: dict[str, Any]) -> None:
    clock = Clock()
    breaker = Breaker(
        failures_to_open=case["breaker_failures"],
        cooldown_ms=case["breaker_cooldown_ms"],
        clock=clock,
    )
    for i, step in enumerate(case["steps"], start=1):
        clock.now_ms = step["at_ms"]
        result = apply(breaker, step["event"])
        assert (i, result, breaker.state, breaker.failures) == (
            i,
            step["result"],
            step["state"],
            step["failures"],
        )


def test_vectors_cover_every_transition() -> None:
    seen = {
        (step["event"], step["result"], step["state"])
        for case in VECTORS["cases"]
        for step in case["steps"]
    }
    assert ("failure", "opened", "open") in seen
    assert ("failure", "counted", "open") in seen  # a late failure while open
    assert ("allow", True, "half_open") in seen  # the probe
    assert ("allow", False, "half_open") in seen  # one probe at a time
    assert ("success", None, "closed") in seen


def test_probe_waits_for_the_injected_clock() -> None:
    clock = Clock()
    breaker = Breaker(failures_to_open=2, cooldown_ms=10_000, clock=clock)
    assert breaker.failure() is False
    assert breaker.failure() is True
    clock.now_ms = 9_999.5
    assert breaker.allow() is False
    clock.now_ms = 10_000
    assert breaker.allow() is True
    assert breaker.state is BreakerState.HALF_OPEN


@pytest.mark.parametrize(
    ("failures", "cooldown_ms", "message"),
    [
        (0, 1000, "breaker: failures_to_open must be >= 1, not 0"),
        (1, -1, "breaker: cooldown_ms must be >= 0, not -1"),
    ],
)
def test_bad_settings_are_refused(failures: int, cooldown_ms: int, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        Breaker(failures_to_open=failures, cooldown_ms=cooldown_ms)
    assert str(raised.value) == message
