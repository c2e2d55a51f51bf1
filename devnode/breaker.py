"""A circuit breaker for one companion (pure; the clock is injected).

The twin of the Erlang hook's ``riak_events_breaker`` (erlang_hooks/src), with the same
states, transitions and settings; both are held to ``tests/vectors/hook_breaker.json``:

- ``closed``: requests go; ``failures_to_open`` consecutive failures open it.
- ``open``: requests are refused until ``cooldown_ms`` has passed since it opened; then
  the next request is let through as a probe and the breaker is ``half_open``.
- ``half_open``: other requests are refused while the probe runs; its success closes the
  breaker, its failure opens it for another cool-down.

Any success closes the breaker (a request sent before it opened may still answer). A
failure while open (such a late answer) is counted but does not move the cool-down.

Not thread-safe: the hook calls it under its own lock. No I/O, no time of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import Enum

__all__ = ["Breaker", "BreakerState", "monotonic_ms"]


class BreakerState(str, Enum):
    """Where a breaker stands (the Erlang module's ``status()`` atoms)."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


def monotonic_ms() -> float:
    """The default clock: monotonic milliseconds."""
    return time.monotonic() * 1000.0


class Breaker:
    """One companion's breaker.

    Args:
        failures_to_open: consecutive failures that open a closed breaker (the hook's
            ``breaker_failures``), at least 1.
        cooldown_ms: how long an open breaker refuses before it lets one probe through
            (``breaker_cooldown_ms``), milliseconds.
        clock: monotonic milliseconds (injected by tests).

    Raises:
        ValueError: ``failures_to_open`` below 1 or ``cooldown_ms`` negative.
    """

    def __init__(
        self,
        *,
        failures_to_open: int,
        cooldown_ms: float,
        clock: Callable[[], float] = monotonic_ms,
    ) -> None:
        if failures_to_open < 1:
            raise ValueError(f"breaker: failures_to_open must be >= 1, not {failures_to_open}")
        if cooldown_ms < 0:
            raise ValueError(f"breaker: cooldown_ms must be >= 0, not {cooldown_ms}")
        self._failures_to_open = failures_to_open
        self._cooldown_ms = cooldown_ms
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._until_ms = 0.0

    @property
    def state(self) -> BreakerState:
        """Closed, open or half open."""
        return self._state

    @property
    def failures(self) -> int:
        """Failures counted since the last success."""
        return self._failures

    def allow(self) -> bool:
        """May a request go now? An open breaker past its cool-down lets this one through
        as the probe and turns half open."""
        if self._state is BreakerState.CLOSED:
            return True
        if self._state is BreakerState.OPEN and self._clock() >= self._until_ms:
            self._state = BreakerState.HALF_OPEN
            return True
        return False

    def success(self) -> None:
        """A request succeeded: the breaker closes and its count restarts."""
        self._state = BreakerState.CLOSED
        self._failures = 0

    def failure(self) -> bool:
        """A request failed now.

        Returns:
            True when this failure opened the breaker (the probe failed, or the count
            reached ``failures_to_open``), False when it was only counted.
        """
        if self._state is BreakerState.HALF_OPEN:
            self._open()
            return True
        self._failures += 1
        if self._state is BreakerState.CLOSED and self._failures >= self._failures_to_open:
            self._open()
            return True
        return False

    def _open(self) -> None:
        self._state = BreakerState.OPEN
        self._until_ms = self._clock() + self._cooldown_ms
