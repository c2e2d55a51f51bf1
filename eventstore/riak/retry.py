"""Retry as an object: tries, exponential backoff with jitter, and a deadline.

In the manner of kazoo's ``KazooRetry``: a :class:`Retry` holds the policy; calling it
runs a function until it succeeds, raises an error that is not ``retriable``, runs out
of tries, or would start a try after the deadline. The last error is then re-raised
unchanged, so the caller sees what actually went wrong and where. The clock and sleep
are injectable for tests.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from eventstore.riak import defaults
from eventstore.riak.errors import RiakError

T = TypeVar("T")


@dataclass(frozen=True)
class Retry:
    """A retry policy.

    Attributes:
        max_tries: tries in all, the first included (1: never retry).
        delay_s: sleep before the second try.
        backoff: factor applied to the delay after each retry.
        max_delay_s: cap of one delay.
        jitter: each delay is multiplied by a random factor in [1 - jitter, 1 + jitter].
        deadline_s: no try starts later than this after the first.
    """

    max_tries: int = defaults.RETRY_MAX_TRIES
    delay_s: float = defaults.RETRY_DELAY_S
    backoff: float = defaults.RETRY_BACKOFF
    max_delay_s: float = defaults.RETRY_MAX_DELAY_S
    jitter: float = defaults.RETRY_JITTER
    deadline_s: float = defaults.RETRY_DEADLINE_S
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_tries < 1:
            raise ValueError(f"max_tries must be at least 1, got {self.max_tries}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be in [0, 1], got {self.jitter}")

    def with_(self, **changes: float | int) -> Retry:
        """A copy with some fields changed (e.g. ``retry.with_(max_tries=1)``)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def __call__(self, func: Callable[[float], T]) -> T:
        """Run ``func(remaining_s)`` until it succeeds or the policy gives up.

        Args:
            func: one try; gets the seconds left before the deadline (to bound its own
                timeouts) and raises :class:`RiakError` on failure.

        Returns:
            What ``func`` returned.

        Raises:
            RiakError: the first non-retriable error, or the last retriable one.
        """
        start = self.clock()
        delay = self.delay_s
        tries = 0
        while True:
            tries += 1
            remaining = self.deadline_s - (self.clock() - start)
            try:
                return func(max(remaining, 0.001))
            except RiakError as error:
                if not error.retriable or tries >= self.max_tries:
                    raise
                pause = min(delay, self.max_delay_s) * self.rng.uniform(
                    1 - self.jitter, 1 + self.jitter
                )
                if self.clock() + pause - start >= self.deadline_s:
                    raise
                self.sleep(pause)
                delay *= self.backoff
