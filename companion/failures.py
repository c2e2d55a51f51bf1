"""Failure tracking: each plugin run's end counted, node-wide and in this worker.

A run that ends ok or failed (not ``unreadable``: the chunk's fault, nobody's run) is
noted by the quarantine's trust (``quarantine.Trust``: whether the plugin runs in the
shared child of this worker) and counted in the node's consecutive failures
(``disabled.py``: one file per substream under ``flock``, shared by every worker; an ok
run removes it). At ``disable_after`` failures in a row the substream is disabled on the
node. The chunk threads and the lanes both track their runs here, so a run counts the
same wherever it ran. A run the companion could not start (``sandbox``, ``internal``)
is never tracked: it is not the plugin's.

Failure semantics: "in a row" is in the order workers finish runs (two workers ending
at once may interleave an ok and a failure either way). Two workers reaching
``disable_after`` together disable it once: only the one whose marker was new is told
it disabled the substream.
"""

from __future__ import annotations

from companion.disabled import DisabledSet
from companion.quarantine import Trust
from substreams.api import Substream
from substreams.protocol import Outcome

__all__ = ["FailureTracker"]


class FailureTracker:
    """Counts each substream's consecutive failures on the node; disables at a count.

    Args:
        disabled: the node's disabled markers and failure counts.
        trust: the quarantine's trust in this worker, told of every run; None when the
            ``quarantine`` setting is off.
        disable_after: failures in a row that disable a substream on the node.
    """

    def __init__(self, disabled: DisabledSet, trust: Trust | None, *, disable_after: int) -> None:
        self._disabled = disabled
        self._trust = trust
        self._disable_after = disable_after

    def track(self, sub: Substream, outcome: Outcome) -> str | None:
        """Count how ``sub``'s run ended.

        Returns:
            The reason it was disabled, when this run disabled it; else None.
        """
        if outcome.kind == "unreadable":  # the chunk's, not the plugin's
            return None
        if self._trust is not None:
            self._trust.note(sub, outcome.ok)
        if outcome.ok:
            self._disabled.clear_failures(sub.name)
            return None
        n = self._disabled.count_failure(sub.name, sub.version)
        if n < self._disable_after:
            return None
        reason = f"{n} failures in a row on this node, last: {outcome.error}"
        if not self._disabled.disable(sub.name, sub.version, reason):
            return None  # another worker disabled it first
        return reason
