"""The auditor's cursor file: saved atomically, read back as written, and a corrupt one
moved aside with one error naming the file and what is wrong (never a crash)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from companion.audit_cursor import CURSOR_FILE, CursorFile, DcCursor, read_audit_status

pytestmark = pytest.mark.unit


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
    with caplog.at_level(logging.ERROR, logger="companion.audit_cursor"):
        assert CursorFile(tmp_path).load() == {}
    [record] = caplog.records
    assert str(path) in record.getMessage() and reason in record.getMessage()
    assert not path.exists()
    assert path.with_name("cursors.json.corrupt").read_text() == text
    assert read_audit_status(tmp_path, settled=1000) == {}
