"""The chunk pipeline's pure stages (companion/chunkrun.py): what a chunk's runs end
as, as values, without a process."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from companion.chunkrun import Laps, Prepared, SharedRun, settle, triage
from companion.disabled import DisabledSet
from companion.shedding import disabled_value
from companion.writer import Write
from eventstore.names import ChunkKey
from substreams.api import Substream
from substreams.protocol import Outcome
from substreams.results import error_value

KEY = ChunkKey(1_700_000_000, "dc1", "web", "main", 0)


def sub(name: str) -> Substream:
    return Substream(name=name, function=lambda events, ctx: None, version="v1")


A, B, C, D, Q = (sub(n) for n in "abcdq")


def names(writes: tuple[Write, ...] | list[Write]) -> list[tuple[str, str]]:
    return [(s.name, status) for s, _, status in writes]


def test_triage_marks_the_disabled_ones_and_keeps_the_others_in_order(tmp_path: Path) -> None:
    disabled = DisabledSet(tmp_path)
    assert disabled.disable("b", "v1", "by the test")
    enabled, skipped = triage([A, B, C], disabled)
    assert enabled == [A, C]
    assert names(skipped) == [("b", "error")]
    assert skipped[0][1] == disabled_value(B)


def test_settle_writes_the_skipped_then_the_runs_then_the_lost_with_their_causes() -> None:
    ok = Outcome("a", "ok", payload=b"P", cpu_s=0.1, load_cpu_s=0.2, child_cpu_s=0.5)
    shared = SharedRun(
        (ok, None, None), causes={1: "sandbox: refused"}, lost_cause="sandbox: fork failed"
    )
    skipped: tuple[Write, ...] = ((D, b"D", "error"),)
    prepared = Prepared(KEY, b"blob", [], (A, B, C), skipped=skipped)
    settled = settle(prepared, shared, [])
    assert names(settled.writes) == [("d", "error"), ("a", "ok"), ("b", "error"), ("c", "error")]
    assert settled.writes[1][1] == b"P"
    assert settled.writes[2][1] == error_value("error", "b", "v1", "sandbox: refused")
    assert settled.writes[3][1] == error_value("error", "c", "v1", "sandbox: fork failed")
    assert settled.lost == (("sandbox: refused", (B,)), ("sandbox: fork failed", (C,)))
    assert settled.done == ((A, ok),)
    assert settled.unreadable is None
    # Not in a batch: the chunk's own children, outside their runs and loads.
    assert settled.children_cpu_s == pytest.approx(0.2)
    assert (settled.plugins_cpu_s, settled.load_cpu_s) == (0.1, 0.2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.shared = ()  # type: ignore[misc]


def test_settle_puts_the_queries_after_the_shared_runs_and_names_an_unreadable_chunk() -> None:
    unread = Outcome("a", "unreadable", error="chunk_unreadable: not an array")
    shared = SharedRun((unread,), children_cpu_s=0.3)  # a batch's share
    walked = Outcome("q", "ok", payload=b"Q", cpu_s=0.05)
    prepared = Prepared(KEY, b"", [], (A,), queries=(Q,))
    settled = settle(prepared, shared, [walked])
    assert [s.name for s, _ in settled.done] == ["a", "q"]
    assert names(settled.writes) == [("a", "error"), ("q", "ok")]
    assert settled.unreadable == "chunk_unreadable: not an array"
    assert settled.children_cpu_s == 0.3
    with pytest.raises(ValueError):  # an outcome for every substream, or it is a bug
        settle(prepared, shared, [])


def test_settle_without_a_shared_run_stores_the_queries_and_the_skipped() -> None:
    walked = Outcome("q", "too_large", error="too_large: 2 MB of rows")
    skipped: tuple[Write, ...] = ((D, b"D", "shed"),)
    settled = settle(Prepared(KEY, b"", [], (), queries=(Q,), skipped=skipped), None, [walked])
    assert names(settled.writes) == [("d", "shed"), ("q", "error")]
    assert settled.done == ((Q, walked),)
    assert settled.lost == ()


def test_laps_time_each_stage_from_the_last_and_never_count_negative_cpu() -> None:
    now = [10.0]
    laps = Laps(lambda: now[0])
    now[0] = 10.5
    laps.lap("fetch")
    now[0] = 10.75
    laps.lap("queries", extra_cpu_s=-100.0)  # the plugins' own, counted elsewhere
    laps.add({"sandbox": 2.0}, {"sandbox": 0.5, "server": 0.25})
    assert laps.wall == {"fetch": 0.5, "queries": 0.25, "sandbox": 2.0}
    assert laps.cpu["queries"] == 0.0
    assert (laps.cpu["sandbox"], laps.cpu["server"]) == (0.5, 0.25)
    assert laps.started == 10.0
