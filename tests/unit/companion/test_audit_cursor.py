"""The auditor's cursor file: saved atomically, read back as written, and a corrupt one
moved aside with one error naming the file and what is wrong (never a crash)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from companion.audit_cursor import CURSOR_FILE, CursorFile, DcCursor, read_audit_status


def test_cursors_are_read_back_as_saved_and_no_temporary_file_stays(tmp_path: Path) -> None:
    cursors = {"dc1": DcCursor(1000, [990, 995], 3), "dc2": DcCursor(1005)}
    CursorFile(tmp_path).save(cursors)
    assert CursorFile(tmp_path).load() == cursors
    assert sorted(p.name for p in (tmp_path / "audit").iterdir()) == ["cursors.json"]
    status = read_audit_status(tmp_path, settled=1004)
    assert status["dc1"] == {"cursor": 990, "lag_s": 14.0, "pending": 2, "given_up": 3}
    assert status["dc2"]["lag_s"] == 0.0  # caught up


def test_no_file_is_a_new_node(tmp_path: Path) -> None:
    assert CursorFile(tmp_path).load() == {}
    assert read_audit_status(tmp_path, settled=1000) == {}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "Expecting property name"),
        ('{"version": 9, "dcs": {}}', "not a version 1 cursor file"),
        ('{"version": 1, "dcs": {"dc1": {"next": -1}}}', "dc 'dc1': 'next' must be an epoch"),
        ('{"version": 1, "dcs": {"dc1": {"next": 5, "pending": [7]}}}', "older than 'next'"),
        ('{"version": 1, "dcs": {"dc1": {"next": 5, "pending": "x"}}}', "'pending' must be"),
    ],
)
def test_a_corrupt_file_is_moved_aside_with_one_error_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, reason: str
) -> None:
    path = tmp_path / CURSOR_FILE
    path.parent.mkdir()
    path.write_text(text)
    cursors = CursorFile(tmp_path)
    with caplog.at_level(logging.ERROR, logger="companion.audit_cursor"):
        assert cursors.load() == {}
    corrupt, horizon = caplog.records
    assert str(path) in corrupt.getMessage() and reason in corrupt.getMessage()
    assert "starting from the horizon" in horizon.getMessage()
    assert cursors.lost  # no previous file: what it had not confirmed is gone
    assert not path.exists()
    assert path.with_name("cursors.json.corrupt").read_text() == text
    assert read_audit_status(tmp_path, settled=1000) == {}


def test_a_corrupt_file_gives_way_to_the_previous_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Restarting from the horizon after every corrupt file re-audits hours of epochs (a
    # chaos campaign's results lagged minutes behind); the file saved before is older,
    # so nothing is skipped and only the epochs since are visited again.
    older, newer = {"dc1": DcCursor(1000, [990])}, {"dc1": DcCursor(1010)}
    cursors = CursorFile(tmp_path)
    cursors.save(older)
    cursors.save(newer)
    path = tmp_path / CURSOR_FILE
    path.write_bytes(b"\xa1 not a cursor file")
    with caplog.at_level(logging.ERROR, logger="companion.audit_cursor"):
        assert cursors.load() == older
    assert not cursors.lost
    assert "using the previous cursor file" in caplog.records[-1].getMessage()
