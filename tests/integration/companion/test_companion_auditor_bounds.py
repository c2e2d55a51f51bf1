"""The auditor's bounds and cursor, against a real devnode (the auditor in this process,
its clock fixed, its ``/v1/audit`` answers given by the test; ``audit_lookback_s`` 12,
so epochs older than NOW - 12 are the cursor's, younger ones the window's):

- at most ``audit_max_keys`` keys per round, the cursor's epochs oldest first, the next
  round going on where the cap stopped the last one; the dcs learned from key groups;
- the persisted cursor moves only over epochs confirmed complete: an epoch whose
  repairs are admitted stays pending (not posted again while they run) until a later
  visit finds nothing missing, and a new auditor (a restarted master) starts from the
  saved cursor;
- the cursor never passes an epoch whose metadata was unreadable (the store stopped),
  nor one whose results were unreadable; once the store is back it goes on from there;
- epochs older than ``audit_horizon_s`` are given up, counted and kept in the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from companion.audit_check import AuditAnswer
from companion.audit_cursor import CursorFile, DcCursor, read_audit_status
from companion.auditor import Auditor, SeenDcs
from companion.settings import CompanionSettings
from devnode.testing import DevnodeProcess
from eventstore.names import ChunkKey, MetadataKey, Namespaces, format_metadata
from eventstore.riak import Retry, RiakClient
from eventstore.riak.settings import RiakSettings

NOW = 1_700_004_000
LOOKBACK = 12
#: Where a caught-up cursor is: every epoch up to NOW - LOOKBACK confirmed.
CAUGHT_UP = NOW - LOOKBACK + 1
COMPLETE = AuditAnswer()


def write_metadata(riak: RiakClient, epoch: int, dc: str, chunks: int) -> list[str]:
    keys = [ChunkKey(epoch, dc, "t", "", c) for c in range(chunks)]
    meta = MetadataKey(epoch, dc)
    riak.put(*Namespaces().metadata_location(meta), format_metadata(keys).encode(),
             content_type="text/plain")  # fmt: skip
    return [k.format() for k in keys]


class Answers:
    """A ``post`` that records what it was sent and answers from a script
    (``(epoch, dc) -> answer``; complete when not scripted)."""

    def __init__(self) -> None:
        self.posted: list[tuple[int, str, int]] = []
        self.script: dict[tuple[int, str], AuditAnswer | None] = {}

    def __call__(self, epoch: int, dc: str, keys: list[str]) -> AuditAnswer | None:
        self.posted.append((epoch, dc, len(keys)))
        return self.script.get((epoch, dc), COMPLETE)


def make_auditor(
    riak: RiakClient, state: Path, dc: str, answers: Answers, **settings: Any
) -> Auditor:
    options: dict[str, Any] = {
        "audit_max_keys": 6,
        "audit_lookback_s": LOOKBACK,
        "audit_dcs": (dc,),
    }
    return Auditor(
        CompanionSettings(state_dir=state, **{**options, **settings}),
        riak,
        answers,
        seen=SeenDcs(state / "dcs", clock=lambda: NOW),
        clock=lambda: NOW,
    )


def test_rounds_are_capped_oldest_first_and_go_on_where_the_cap_stopped(
    riak: RiakClient, riak_url: str, dc: str, tmp_path: Path
) -> None:
    for age in (14, 15, 16):
        write_metadata(riak, NOW - age, dc, 5)
    CursorFile(tmp_path).save({dc: DcCursor(NOW - 20)})
    seen = SeenDcs(tmp_path / "dcs", clock=lambda: NOW)
    answers = Answers()
    auditor = Auditor(
        CompanionSettings(
            state_dir=tmp_path,
            riak=RiakSettings(nodes=(riak_url,)),
            audit_max_keys=6,
            audit_lookback_s=LOOKBACK,
        ),
        riak,
        answers,
        seen=seen,
        clock=lambda: NOW,
    )
    assert auditor.dcs() == []  # nothing configured, no key group yet
    seen.note(dc)
    assert auditor.dcs() == [dc]
    rounds = [auditor.run_once() for _ in range(3)]
    assert rounds == [5, 5, 5]  # one epoch of 5 keys each time: 10 would pass the cap
    assert answers.posted == [(NOW - 16, dc, 5), (NOW - 15, dc, 5), (NOW - 14, dc, 5)]
    assert auditor.cursors[dc].next == CAUGHT_UP  # the empty epochs too


def test_an_epoch_with_repairs_stays_pending_until_confirmed_and_the_cursor_survives(
    riak: RiakClient, dc: str, tmp_path: Path
) -> None:
    for age in (15, 14):
        write_metadata(riak, NOW - age, dc, 2)
    answers = Answers()
    answers.script[(NOW - 15, dc)] = AuditAnswer(missing=1, accepted=1)
    CursorFile(tmp_path).save({dc: DcCursor(NOW - 20)})
    first = make_auditor(riak, tmp_path, dc, answers, audit_dcs=(dc, "fresh"))
    first.run_once()
    cursor = first.cursors[dc]
    assert cursor.pending == [NOW - 15] and cursor.next == CAUGHT_UP
    assert first.cursors["fresh"].next == CAUGHT_UP  # a new dc starts at NOW - LOOKBACK
    # A new master (kill -9 and restart) reads the saved cursor: the pending epoch is
    # visited again, and only it (the others were confirmed).
    answers.posted.clear()
    second = make_auditor(riak, tmp_path, dc, answers)
    assert second.cursors[dc].pending == [NOW - 15]
    second.run_once()  # still missing (the repair not done yet): stays pending
    assert answers.posted == [(NOW - 15, dc, 2)]
    assert second.cursors[dc].pending == [NOW - 15]
    status = read_audit_status(tmp_path, settled=NOW - LOOKBACK)
    assert status[dc] == {"cursor": NOW - 15, "lag_s": 3.0, "pending": 1, "given_up": 0}
    del answers.script[(NOW - 15, dc)]
    # Its repairs were just admitted: not posted again before they can be done (they
    # would be admitted twice), still pending.
    second.run_once()
    assert answers.posted == [(NOW - 15, dc, 2)]
    assert second.cursors[dc].pending == [NOW - 15]
    third = make_auditor(riak, tmp_path, dc, answers)  # (or the same, seconds later)
    third.run_once()
    assert answers.posted[1:] == [(NOW - 15, dc, 2)]
    assert third.cursors[dc].pending == []
    assert CursorFile(tmp_path).load()[dc].oldest() == CAUGHT_UP


@pytest.fixture
def own_devnode(tmp_path: Path) -> Iterator[DevnodeProcess]:
    devnode = DevnodeProcess(tmp_path / "devnode").start()
    yield devnode
    devnode.stop()


def test_the_cursor_never_passes_an_epoch_whose_metadata_or_results_were_unreadable(
    own_devnode: DevnodeProcess, dc: str, tmp_path: Path
) -> None:
    riak = RiakClient([own_devnode.url], retry=Retry(max_tries=2, deadline_s=1.0))
    for age in (18, 16, 14):
        write_metadata(riak, NOW - age, dc, 2)
    state = tmp_path / "state"
    CursorFile(state).save({dc: DcCursor(NOW - 20)})
    answers = Answers()
    auditor = make_auditor(riak, state, dc, answers, audit_max_keys=100)
    own_devnode.stop()  # the store down: the first metadata read fails
    assert auditor.run_once() == 0
    assert answers.posted == []
    assert CursorFile(state).load()[dc].oldest() == NOW - 20
    own_devnode.start()
    # Back up, but the results of NOW - 16 unreadable: the cursor stops right there.
    answers.script[(NOW - 16, dc)] = AuditAnswer(unreadable=2)
    auditor.run_once()
    assert answers.posted == [(NOW - 18, dc, 2), (NOW - 16, dc, 2)]
    assert CursorFile(state).load()[dc].oldest() == NOW - 16
    del answers.script[(NOW - 16, dc)]
    answers.posted.clear()
    auditor.run_once()
    assert answers.posted == [(NOW - 16, dc, 2), (NOW - 14, dc, 2)]
    assert CursorFile(state).load()[dc].oldest() == CAUGHT_UP
    riak.close()


def test_epochs_older_than_the_horizon_are_given_up_and_counted(
    riak: RiakClient, dc: str, tmp_path: Path
) -> None:
    CursorFile(tmp_path).save({dc: DcCursor(NOW - 50, pending=[NOW - 90, NOW - 70])})
    auditor = make_auditor(riak, tmp_path, dc, Answers(), audit_horizon_s=30)
    before = given_up_total(dc)
    auditor.run_once()
    cursor = CursorFile(tmp_path).load()[dc]
    # Two pending and 20 never reached (NOW-50 .. NOW-31): given up, counted.
    assert cursor.given_up == 22
    assert given_up_total(dc) - before == 22
    assert cursor.pending == [] and cursor.oldest() == CAUGHT_UP


def given_up_total(dc: str) -> float:
    value = REGISTRY.get_sample_value("companion_audit_given_up_total", {"dc": dc})
    return value or 0.0


@pytest.mark.parametrize("garbage", [b"\x00" * 64, b"\xff\xfe not utf-8 \x80", b'{"version": 1'])
def test_a_corrupt_cursor_file_restarts_from_the_horizon_and_skips_no_epoch(
    riak: RiakClient, dc: str, tmp_path: Path, garbage: bytes
) -> None:
    # The file held epochs not yet confirmed complete (an epoch whose key group was
    # shed): starting LOOKBACK back, as a new node does, passed them for good (a chaos
    # campaign left 27 chunks without a result that way); a file not in UTF-8 ended the
    # companion at every start.
    path = tmp_path / "audit" / "cursors.json"
    path.parent.mkdir()
    path.write_bytes(garbage)
    missed = NOW - 25  # older than LOOKBACK, inside the horizon
    write_metadata(riak, missed, dc, 2)
    answers = Answers()
    auditor = make_auditor(riak, tmp_path, dc, answers, audit_horizon_s=30, audit_max_keys=100)
    auditor.run_once()
    assert (missed, dc, 2) in answers.posted
    assert path.with_name("cursors.json.corrupt").read_bytes() == garbage
    # A file that is merely absent is a new node: it starts LOOKBACK back, as before.
    fresh = tmp_path / "fresh"
    other = Answers()
    make_auditor(riak, fresh, dc, other, audit_horizon_s=30, audit_max_keys=100).run_once()
    assert all(epoch >= NOW - LOOKBACK for epoch, _, _ in other.posted)
