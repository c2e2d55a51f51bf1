"""``substream test``'s report (issue 21): the summary first, one line per failed run,
every run only with ``verbose``; as JSON an object with the summary and the runs; an
empty result says so (never "result 90 bytes": a packed empty result is ~90 bytes)."""

from __future__ import annotations

import json
from typing import Any

from eventstore.names import ChunkKey
from substreams import declaration_of, substream
from substreams.api import Substream
from substreams.harness import HarnessRun, format_runs, result_shape
from substreams.protocol import Outcome


def _sub(name: str) -> Substream:
    declared = declaration_of(substream(name=name, fields=["url"])(lambda events, ctx: None))
    assert declared is not None
    return declared


def _runs() -> list[HarnessRun]:
    slow, other = _sub("slow"), _sub("other")
    runs = []
    for chunk in range(100):
        key = ChunkKey(1_700_000_000 + chunk, "ams4", "web", "", 10000)
        runs.append(HarnessRun(slow, key, 300, Outcome("slow", "ok"), 90, []))
        if chunk == 7:
            error = "exception: UndeclaredField: field 'host' is not declared\n  at p.py:3 in f"
            outcome = Outcome("other", "exception", error=error)
            runs.append(HarnessRun(other, key, 300, outcome, 120, None))
        else:
            runs.append(HarnessRun(other, key, 300, Outcome("other", "ok"), 200, [{"u": 1}]))
    return runs


def test_the_report_is_a_summary_then_one_line_per_problem() -> None:
    text = format_runs(_runs())
    lines = text.splitlines()
    assert lines[0] == "200 runs on 100 chunks: 199 ok, 1 failed"
    assert (
        lines[1].startswith("  slow@")
        and "100 runs, 100 ok; 100 of 100 ok results empty" in lines[1]
    )
    assert lines[2].startswith("  other@") and "100 runs, 99 ok, 1 error; 0 of 99" in lines[2]
    assert lines[3:] == [
        "problems (1):",
        "  other on 1700000007:ams4:web::10000: error (exception): exception: "
        "UndeclaredField: field 'host' is not declared",
    ]


def test_verbose_gives_every_run_and_an_empty_result_says_so() -> None:
    text = format_runs(_runs(), verbose=True)
    assert text.count(" events): ") == 200
    assert "empty result, 90 bytes stored" in text and "result 90 bytes" not in text
    assert "1 row, 200 bytes stored" in text


def test_json_is_an_object_with_the_summary_and_the_runs() -> None:
    report: dict[str, Any] = json.loads(format_runs(_runs(), as_json=True))
    assert sorted(report) == ["runs", "summary"]
    summary = report["summary"]
    assert (summary["runs"], summary["chunks"], summary["ok"], summary["failed"]) == (
        200,
        100,
        199,
        1,
    )
    assert summary["substreams"]["other"]["failed"] == {"error": 1}
    assert summary["substreams"]["slow"]["empty_results"] == 100
    assert len(report["runs"]) == 200 and report["runs"][0]["substream"] == "slow"


def test_result_shapes() -> None:
    assert [result_shape(r) for r in (None, [], {}, "", [1, 2], {"a": 1}, 3)] == [
        "empty result", "empty result", "empty result", "empty result", "2 rows", "1 key", "a int",
    ]  # fmt: skip
