"""What a substream read returned, counted: served, computed here, and gaps by why, with
how to fill each kind of gap. The ``read`` command prints it at the end (and exits 4
when it holds gaps); :attr:`SubstreamResults.summary` gives it to library callers.

Pure logic, no I/O.

A gap's *label* is its ``reason`` (why the server's result was not used) and, after a
comma, why nothing was computed here::

    missing, no plugin to run       no result on the server, no plugin code here
    shed, fallback off              fallback="off" (or --fallback off)
    missing, fallback timeout       the run here failed too (timeout, killed, error)
    disabled                        the server disabled this plugin version
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from consumer_lib.types import SubstreamResult

__all__ = ["NO_PLUGIN", "ReadSummary", "SubstreamResults", "gap_label"]

#: ``fallback_status`` of a gap that nothing could fill here: no plugin code.
NO_PLUGIN = "no_plugin"


def gap_label(res: SubstreamResult) -> str:
    """The gap's label (see the module); a result that is not a gap has none ("")."""
    if res.served != "gap":
        return ""
    reason = res.reason or "missing"
    if res.fallback_status == NO_PLUGIN:
        return f"{reason}, no plugin to run"
    if res.fallback_status is not None:
        return f"{reason}, fallback {res.fallback_status}"
    if reason == "disabled":
        return reason
    return f"{reason}, fallback off"


def _hint(label: str, name: str) -> str:
    """How to fill the gaps of one label."""
    if label.endswith("no plugin to run"):
        return (
            "to compute them here give the plugin's code: --plugin-dir DIR (the companions' "
            "plugins directory; EventsClient(plugin_dirs=...)) or install it as a "
            "riak_events.substreams entry point; --fallback off reads only what the "
            "server holds"
        )
    if label.endswith("fallback off"):
        return "--fallback auto (the default) computes them here"
    if label == "disabled":
        return (
            f"the server disabled this plugin version: fix it, `riak-events substream "
            f"enable {name}`, then refill the range"
        )
    return "the plugin failed here too (each result's error says how): fix the plugin"


@dataclass
class ReadSummary:
    """Counts of one substream read, updated as results are handed out.

    Attributes:
        substream: the substream's name.
        served: results the server stored.
        fallback: results computed here.
        gaps: gap label -> count.
        not_read: chunks skipped without a plugin: their type:subtype had no result of
            the substream in the range, so they are taken as not read by it
            (``"type:subtype"`` -> count).
    """

    substream: str
    served: int = 0
    fallback: int = 0
    gaps: Counter[str] = field(default_factory=Counter)
    not_read: Counter[str] = field(default_factory=Counter)

    def add(self, res: SubstreamResult) -> None:
        """Count one result handed out."""
        if res.served == "server":
            self.served += 1
        elif res.served == "fallback":
            self.fallback += 1
        else:
            self.gaps[gap_label(res)] += 1

    @property
    def gap_count(self) -> int:
        """Gaps of every label."""
        return sum(self.gaps.values())

    def lines(self) -> list[str]:
        """The summary in words: with gaps, one line of totals, then one per gap label
        with how to fill those gaps; then the chunks taken as not read (if any)."""
        total = self.served + self.fallback + self.gap_count
        lines = []
        if self.gaps:
            lines.append(
                f"substream {self.substream}: {total} result(s): {self.served} served, "
                f"{self.fallback} computed here, {self.gap_count} gap(s)"
            )
        for label, count in sorted(self.gaps.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {count} gap(s) {label}: {_hint(label, self.substream)}")
        if self.not_read:
            groups = ", ".join(f"{g} ({n})" for g, n in sorted(self.not_read.items()))
            lines.append(
                f"substream {self.substream}: not counted: chunks of {groups}: no result of "
                "it for them in the range and no plugin here, taken as types it does not read"
            )
        return lines


class SubstreamResults(Iterator[SubstreamResult]):
    """The results of :meth:`EventsClient.substream`, in order, counted as they are
    handed out (:attr:`summary`). ``close()`` stops the read (queued fetches are
    cancelled)."""

    def __init__(self, results: Iterator[SubstreamResult], summary: ReadSummary) -> None:
        self._results = results
        #: what was handed out so far; complete once the iteration ended.
        self.summary = summary

    def __iter__(self) -> SubstreamResults:
        return self

    def __next__(self) -> SubstreamResult:
        res = next(self._results)
        self.summary.add(res)
        return res

    def close(self) -> None:
        """Stop the read early."""
        close = getattr(self._results, "close", None)
        if close is not None:
            close()
