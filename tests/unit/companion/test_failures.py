"""Failure tracking (companion/failures.py): consecutive failures counted node-wide,
a substream disabled once at ``disable_after``, the quarantine's trust told."""

from __future__ import annotations

from pathlib import Path

from companion.disabled import DisabledSet
from companion.failures import FailureTracker
from companion.quarantine import Trust
from substreams.api import Substream
from substreams.protocol import Outcome

S = Substream(name="s", function=lambda events, ctx: None, version="v1")
BAD = Outcome("s", "exception", error="boom")
OK = Outcome("s", "ok")


def test_failures_in_a_row_disable_once_and_an_ok_run_starts_the_count_again(
    tmp_path: Path,
) -> None:
    disabled = DisabledSet(tmp_path)
    tracker = FailureTracker(disabled, None, disable_after=3)
    assert [tracker.track(S, BAD) for _ in range(2)] == [None, None]
    assert tracker.track(S, OK) is None
    assert not disabled.has_failures("s")
    assert [tracker.track(S, BAD) for _ in range(2)] == [None, None]
    assert tracker.track(S, BAD) == "3 failures in a row on this node, last: boom"
    assert disabled.is_disabled("s", "v1", fresh=True)
    # Another worker's tracker, on the same node, past the count: disabled already.
    assert FailureTracker(DisabledSet(tmp_path), None, disable_after=3).track(S, BAD) is None


def test_the_trust_hears_of_every_run_and_an_unreadable_chunk_counts_for_nothing(
    tmp_path: Path,
) -> None:
    disabled = DisabledSet(tmp_path)
    trust = Trust(failing=disabled.has_failures, rejoin_after=2)
    tracker = FailureTracker(disabled, trust, disable_after=5)
    assert tracker.track(S, Outcome("s", "unreadable", error="chunk_unreadable: x")) is None
    assert not trust.trusted(S) and not disabled.has_failures("s")
    tracker.track(S, OK)
    assert trust.trusted(S)
    tracker.track(S, BAD)
    assert trust.failed(S) and disabled.has_failures("s")
    tracker.track(S, OK)
    assert not trust.trusted(S)  # 2 ok runs in a row to rejoin
    tracker.track(S, OK)
    assert trust.trusted(S)
