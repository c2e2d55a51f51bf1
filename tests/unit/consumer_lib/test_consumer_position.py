"""The tail's position file: round trip, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from consumer_lib import PositionError
from consumer_lib.tail import Position


def test_position_file_round_trip_and_refusals(tmp_path: Path) -> None:
    position = Position(tmp_path / "p.json", "dc1")
    assert position.load() is None
    position.save(123)
    assert position.load() == 123
    assert not list(tmp_path.glob(".*tmp"))
    assert json.loads((tmp_path / "p.json").read_text())["dc"] == "dc1"
    with pytest.raises(PositionError):
        Position(tmp_path / "p.json", "dc2").load()
    (tmp_path / "p.json").write_text("{not json")
    with pytest.raises(PositionError):
        position.load()
    with pytest.raises(PositionError):
        Position(tmp_path / "missing-dir" / "p.json", "dc1").save(1)
