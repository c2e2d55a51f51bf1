"""A quarantined run: one substream on one chunk, in its lane's thread, in a child of
its own (``quarantine.py`` says who runs apart and why).

The lane's thread is the run's end: nobody waits for a value from it (a chunk thread
waits at most a while, for a new plugin's first run, on the item's ``done``). So it
stores the result itself and tells and counts it exactly as the chunk thread does for
its runs, through the same parts: the writer, the reporter (``reports.py``) and the
failure tracker (``failures.py``).

    disabled since it was queued (the marker read afresh) -> "error: disabled: ..."
    waited past its deadline for its turn                 -> "shed: quarantined: ..."
    else run it in a child (nice +10 once it has failed here: a loop gets the CPU the
        others leave); store; tell; count (an unreadable chunk: told, not counted)

Failure semantics: the sandbox unable to fork, or a bug, gives an ``error`` result
naming the cause, not counted against the plugin. Nothing raises to the lane.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from companion import defaults
from companion.chunkrun import error_writes
from companion.disabled import DisabledSet
from companion.failures import FailureTracker
from companion.quarantine import LaneItem, Trust
from companion.reports import Reporter
from companion.settings import CompanionSettings
from companion.shedding import disabled_value, shed_value
from companion.writer import ResultWriter
from substreams.api import Context
from substreams.results import stored_value
from substreams.sandbox import SandboxUnavailable, run_substreams

log = logging.getLogger(__name__)

__all__ = ["LaneRunner"]


class LaneRunner:
    """Runs, stores, tells and counts one lane item (:meth:`run`, the lanes' ``run``).

    Args:
        settings: the companion's settings (cap, ``max_wait_s``).
        writer: stores the result.
        disabled: the node's disabled markers (read afresh before each run).
        trust: whether the substream failed here (then its child runs at a lower
            priority).
        tracker: counts the run's end.
        reporter: tells it.
        clock: the monotonic clock of the items' deadlines.
    """

    def __init__(
        self,
        settings: CompanionSettings,
        *,
        writer: ResultWriter,
        disabled: DisabledSet,
        trust: Trust,
        tracker: FailureTracker,
        reporter: Reporter,
        clock: Callable[[], float],
    ) -> None:
        self._settings = settings
        self._writer = writer
        self._disabled = disabled
        self._trust = trust
        self._tracker = tracker
        self._reporter = reporter
        self._clock = clock

    def run(self, item: LaneItem) -> None:
        """A lane's run of one substream on one chunk (module docstring)."""
        sub, key = item.sub, item.key
        if self._disabled.is_disabled(sub.name, sub.version, fresh=True):  # while it waited
            self._writer.store_all(key, [(sub, disabled_value(sub), "error")])
            return
        # Not before it failed: on a busy machine a new plugin's first run would wait
        # behind everything, and a good one stay in quarantine meanwhile.
        failed = self._trust.failed(sub)
        if self._clock() > item.deadline:
            reason = (
                f"quarantined: {sub.name} runs apart, one chunk at a time, since it is new "
                f"here or failed recently; this chunk waited over {self._settings.max_wait_s}s "
                "for its turn"
            )
            self._writer.store_all(key, [(sub, shed_value(sub, reason), "shed")])
            self._reporter.shed(key, sub, reason)
            return
        try:
            (outcome,) = run_substreams(
                [sub],
                item.source,
                Context.of(key),
                cap=self._settings.cap,
                isolation="substream",
                nice=defaults.QUARANTINE_NICE if failed else 0,
            )
        except SandboxUnavailable as e:  # not the plugin's fault: not counted
            # Counted as the chunk's failure, as in the chunk thread: its result of
            # this substream is marked for a cause of the companion's.
            self._reporter.failed(key, [sub], str(e), "sandbox")
            self._writer.store_all(key, error_writes([sub], str(e)))
            return
        except Exception as e:
            log.exception("companion: key=%s substream=%s: quarantined run failed", key, sub.name)
            cause = f"internal: {type(e).__name__}: {e}"
            self._reporter.failed(key, [sub], cause, "internal")
            self._writer.store_all(key, error_writes([sub], cause))
            return
        item.source = []  # freed while the result is stored
        self._writer.store_all(key, [(sub, stored_value(sub, outcome), outcome.status)])
        if outcome.kind == "unreadable":  # the chunk's, not the plugin's: not counted
            self._reporter.unreadable(key, outcome.error or "")  # a read of its own: counted
            return
        self._reporter.ran(key, sub, outcome)
        disabled = self._tracker.track(sub, outcome)
        if disabled is not None:
            self._reporter.disabled(sub, disabled)
