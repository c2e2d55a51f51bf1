"""Pure parts of issue 21's reader side: epochs named with UTC, gap labels, and which
chunks a substream read without its plugin keeps (consumer_lib.unplugged)."""

from __future__ import annotations

import pytest

from consumer_lib.errors import SubstreamNotFound
from consumer_lib.gaps import NO_PLUGIN, ReadSummary, gap_label
from consumer_lib.instants import range_text, when_text
from consumer_lib.types import Served, SubstreamResult
from consumer_lib.unplugged import no_substream, served_groups_only
from eventstore.names import ChunkKey


def res(
    epoch: int, type_: str, served: Served = "server", reason: str | None = None
) -> SubstreamResult:
    status = NO_PLUGIN if served == "gap" else None
    return SubstreamResult(
        "s",
        ChunkKey(epoch, "d", type_, "", 0),
        served,
        reason,
        None,
        "",
        None,
        0,
        status,
    )


def test_epochs_are_named_with_their_utc_instant() -> None:
    assert when_text(1700000000) == "1700000000 (2023-11-14T22:13:20Z)"
    assert range_text(0, 1) == "[0 (1970-01-01T00:00:00Z), 1 (1970-01-01T00:00:01Z))"


def test_gap_labels_say_why_nothing_was_computed_here() -> None:
    assert gap_label(res(1, "web", "gap", "missing")) == "missing, no plugin to run"
    off = SubstreamResult("s", ChunkKey(1, "d", "web", "", 0), "gap", "shed", None, "")
    assert gap_label(off) == "shed, fallback off"
    assert gap_label(res(1, "web")) == ""


def test_without_plugin_types_with_no_result_are_left_out_within_the_window() -> None:
    missing: tuple[Served, str] = ("gap", "missing")
    stream = [
        res(10, "web", *missing),  # web gets a result at 12: a gap
        res(10, "lb", *missing),  # lb never: left out
        res(11, "cron", *missing),  # cron gets one at 80: past the window, left out
        res(12, "web"),
        res(80, "cron"),
    ]
    summary = ReadSummary("s")
    got = [(r.epoch, r.type, r.served) for r in served_groups_only(
        stream, summary, window_epochs=60, not_found=None
    )]  # fmt: skip
    assert got == [(10, "web", "gap"), (12, "web", "server"), (80, "cron", "server")]
    assert dict(summary.not_read) == {"lb:": 1, "cron:": 1}


def test_no_result_at_all_is_a_name_not_found_with_the_closest_name() -> None:
    error = no_substream("web5xx", ["web_5xx", "event_counts"], shown=20)
    with pytest.raises(SubstreamNotFound) as info:
        list(served_groups_only(
            [res(1, "web", "gap", "missing")], ReadSummary("s"), window_epochs=5,
            not_found=lambda: error,
        ))  # fmt: skip
    assert (
        str(info.value)
        == "no substream web5xx; known: event_counts, web_5xx (did you mean web_5xx?)"
    )
    assert (
        list(served_groups_only([], ReadSummary("s"), window_epochs=5, not_found=lambda: error))
        == []
    )
