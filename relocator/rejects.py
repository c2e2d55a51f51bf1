"""Events the relocator will not store: counted by reason, logged at most once per
interval per reason (a hostile or broken producer can send millions; the log must not
grow with them, the counter must count every one).

The counter is ``relocator_events_dropped_total{reason}``. Reasons: ``malformed`` (a
frame header intake cannot read), ``oversized`` (a frame above ``max_event_bytes``,
or an event too big for a chunk of its own), ``too_large`` (a document whose
decompressed body is, or claims to be, above ``max_event_bytes``), ``not_a_dict`` (an
event that is not a hash), ``undecodable``, ``overload`` (UDP, journal queue full).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from eventstore.ratelog import LogSummary
from relocator.metrics import Metrics
from relocator.wire import Received

log = logging.getLogger(__name__)


class Rejections:
    """Counts rejected events into the metric; logs each reason at most every
    ``interval_s`` seconds with how many were rejected since the last line
    (:class:`eventstore.ratelog.LogSummary`). Thread-safe.

    Args:
        metrics: the relocator's metrics.
        where: the stage that rejects ("tcp", "udp", "sealer"), in each log line.
        interval_s: least time between two log lines of one reason, seconds.
        clock: monotonic seconds (injected for tests).
    """

    def __init__(
        self,
        metrics: Metrics,
        where: str,
        *,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._metrics = metrics
        self._summary = LogSummary(
            log,
            f"{where}: rejected %(count)d event(s) (%(key)s) in the last %(seconds).0f s; "
            "latest: %(last)s",
            interval_s=interval_s,
            clock=clock,
        )

    def add(self, reason: str, n: int = 1, detail: str = "") -> None:
        """Count ``n`` events rejected for ``reason``; ``detail`` (what and whose) goes
        into the log line when one is due."""
        if n <= 0:
            return
        self._metrics.dropped.labels(reason).inc(n)
        self._summary.note(reason, detail, n)


def count_rejected(rejections: Rejections, received: Received, detail: str) -> None:
    """Count the frames intake left out of ``received``, by reason."""
    for reason, n in (
        ("malformed", received.malformed),
        ("oversized", received.oversized),
        ("too_large", received.too_large),
        ("not_a_dict", received.not_a_dict),
    ):
        rejections.add(reason, n, detail)
