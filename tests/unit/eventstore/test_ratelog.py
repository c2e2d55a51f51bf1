"""eventstore.ratelog: one summary line per key per interval, nothing noted left unsaid."""

from __future__ import annotations

import logging

import pytest

from eventstore.ratelog import LogSummary

MESSAGE = "%(count)d retries on node %(key)s in the last %(seconds).0f s; last error: %(last)s"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.ratelog"]


@pytest.fixture
def summary() -> tuple[LogSummary, Clock]:
    clock = Clock()
    return LogSummary(logging.getLogger("test.ratelog"), MESSAGE, clock=clock), clock


def test_a_storm_of_retries_is_one_line_per_minute_per_node(
    summary: tuple[LogSummary, Clock], caplog: pytest.LogCaptureFixture
) -> None:
    log, clock = summary
    caplog.set_level(logging.WARNING, "test.ratelog")
    # Ten retries a second on node a for two and a half minutes, one a second on b.
    for tenth in range(1500):
        clock.now = 1000.0 + tenth / 10
        log.note("http://a:8098", f"refused #{tenth}")
        if tenth % 10 == 0:
            log.note("http://b:8098", f"timeout #{tenth}")
    assert lines(caplog) == [
        "1 retries on node http://a:8098 in the last 0 s; last error: refused #0",
        "1 retries on node http://b:8098 in the last 0 s; last error: timeout #0",
        "600 retries on node http://a:8098 in the last 60 s; last error: refused #600",
        "60 retries on node http://b:8098 in the last 60 s; last error: timeout #600",
        "600 retries on node http://a:8098 in the last 60 s; last error: refused #1200",
        "60 retries on node http://b:8098 in the last 60 s; last error: timeout #1200",
    ]
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    # What came after the last line is said by flush (a daemon stopping).
    assert log.flush() == 2
    assert lines(caplog)[-2:] == [
        "299 retries on node http://a:8098 in the last 30 s; last error: refused #1499",
        "29 retries on node http://b:8098 in the last 30 s; last error: timeout #1490",
    ]
    assert log.flush() == 0


def test_a_line_is_due_at_the_next_occurrence_after_a_quiet_spell(
    summary: tuple[LogSummary, Clock], caplog: pytest.LogCaptureFixture
) -> None:
    log, clock = summary
    caplog.set_level(logging.WARNING, "test.ratelog")
    assert log.note("n", "e1")
    clock.now += 10
    assert not log.note("n", "e2", n=4)
    clock.now += 300
    assert log.note("n", "e3")
    assert lines(caplog)[-1] == "5 retries on node n in the last 310 s; last error: e3"


def test_first_and_last_details_and_bad_arguments(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = LogSummary(
        logging.getLogger("test.ratelog"),
        "dc=%(key)s: no metadata for %(count)d epochs (%(first)s..%(last)s)",
        interval_s=60,
        level=logging.INFO,
        clock=clock,
    )
    caplog.set_level(logging.INFO, "test.ratelog")
    for epoch in range(100, 200):
        clock.now += 1
        log.note("ams4", str(epoch))
    assert lines(caplog) == [
        "dc=ams4: no metadata for 1 epochs (100..100)",
        "dc=ams4: no metadata for 60 epochs (101..160)",
    ]
    assert not log.note("ams4", "x", n=0)
    with pytest.raises(ValueError, match="interval_s"):
        LogSummary(logging.getLogger("x"), "%(count)d", interval_s=-1)
