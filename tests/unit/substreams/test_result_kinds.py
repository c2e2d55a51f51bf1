"""A stored failure's kind (substreams/results.py): a field of its own, read structurally."""

from __future__ import annotations

from eventstore.blob import pack_blob
from substreams.results import DISABLED, disabled_value, error_value, read_result


def test_a_failure_stores_its_kind_as_a_field() -> None:
    record = read_result(error_value("timeout", "s", "v", "timeout: 0.5 s"))
    assert record.kind == "timeout"
    assert read_result(disabled_value("s", "v")).kind == DISABLED


def test_the_stored_kind_wins_over_the_text() -> None:
    # A reader acts on the field, not on how the text for people happens to start.
    value = {"status": "error", "substream": "s", "version": "v", "error": "disabled: no"}
    value["kind"] = "exception"
    assert read_result(pack_blob(value)).kind == "exception"


def test_a_record_written_before_the_field_gets_its_kind_from_the_text() -> None:
    old = {"status": "error", "substream": "s", "version": "v", "error": "disabled: on this node"}
    assert read_result(pack_blob(old)).kind == DISABLED
    ok = {"status": "ok", "substream": "s", "version": "v", "result": 3}
    assert read_result(pack_blob(ok)).kind == ""
