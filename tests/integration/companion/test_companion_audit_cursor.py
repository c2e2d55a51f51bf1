"""The auditor's persisted cursor with real processes (gunicorn companion, devnode, its
hook): no epoch is skipped, whatever the outages and restarts.

``audit_lookback_s`` is 15 s here, so an epoch leaves the window the auditor re-visits
at every round within seconds: what repairs the older ones is the cursor alone.

- the store stopped while the companion's result writes fail, for the whole time the
  epoch is in the window, then started again: every chunk ends with its results;
- the companion killed -9 while the auditor's repairs run, restarted once the epochs
  are older than the window: the new process reads the saved cursor and finishes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from companion.testing import Stack, wait_for

LOOKBACK_S = 15

SLOW = """
import time
from substreams import substream

@substream(name="slow", types=["t"], timeout_s=5)
def slow(events, ctx):
    time.sleep(SECONDS)
    return len(events)
"""

COUNTS = """
from substreams import substream

@substream(name="counts", types=["t"])
def counts(events, ctx):
    return len(events)
"""


def chunks(n: int) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    return {("t", "", c): [{"i": i, "c": c} for i in range(5)] for c in range(n)}


def sleep_until(unix_time: float) -> None:
    time.sleep(max(0.0, unix_time - time.time()))


def not_stored(stack: Stack) -> float:
    """``companion_results_not_stored_total``, summed (the workers answer it without
    the store)."""
    status, body = stack.companion.request("GET", "/metrics")
    assert status == 200
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in body.decode().splitlines()
        if line.startswith("companion_results_not_stored_total{")
    )


def test_results_whose_writes_failed_while_the_store_was_down_are_written_once_it_is_back(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(
        plugins={"slow.py": SLOW.replace("SECONDS", "1.0"), "counts.py": COUNTS},
        companion={"audit_interval_s": 0.5, "audit_lookback_s": LOOKBACK_S},
    )
    # Old enough that the window would see it within 2 s, as a store outage starts.
    epoch = int(time.time()) - 8
    keys = stack.write_epoch(epoch, "dc9", chunks(4))
    time.sleep(0.4)  # the hook delivered, the chunks read, the slow runs under way
    stack.devnode.stop()
    wait_for(lambda: not_stored(stack) >= 1, 20, "a result write failing")
    # Down for as long as the epoch is in the window (10-15 s old), and a bit more:
    # every visit of the window finds the store down.
    sleep_until(epoch + LOOKBACK_S + 2)
    stack.devnode.start()
    for name in ("slow", "counts"):
        for key, record in stack.wait_results(name, keys, timeout_s=40).items():
            assert record.status == "ok" and record.result == 5, (name, key, record)
    # The cursor passed the epoch once confirmed, and says so.
    audit = wait_for(
        lambda: stack.companion.json("/v1/status")["audit"].get("dc9", {}).get("cursor", 0) > epoch,
        20,
        "the cursor past the repaired epoch",
    )
    assert audit


def test_a_companion_killed_during_repairs_finishes_them_from_its_saved_cursor(
    stack_factory: Callable[..., Stack],
) -> None:
    # The hook posts to a path the companion does not serve: every key group is lost,
    # only the auditor writes results (dc8 configured: no key group tells it). Long
    # max_wait_s and a large inbox: repairs are run, never shed.
    stack = stack_factory(
        plugins={"slow.py": SLOW.replace("SECONDS", "0.5")},
        companion={
            "audit_interval_s": 0.5,
            "audit_lookback_s": LOOKBACK_S,
            "audit_dcs": ["dc8"],
            "max_wait_s": 60.0,
            "queue_max": 256,
        },
        hook={"path": "/v1/nowhere"},
    )
    now = int(time.time())
    keys = []
    for epoch in (now - 12, now - 11, now - 10):  # in the window, not yet the cursor's
        keys += stack.write_epoch(epoch, "dc8", chunks(12))
    # (Any key: a chunk thread may run several chunks in one child, their results
    # stored together.)
    wait_for(lambda: any(stack.result("slow", k) for k in keys), 30, "the auditor's first repair")
    stack.companion.kill()  # kill -9 of the master, its workers and their children
    missing = [k for k in keys if stack.result("slow", k) is None]
    assert missing, "every repair ended before the kill: nothing left to prove"
    # Restarted once every epoch is older than the window: the cursor alone leads there.
    sleep_until(now - 10 + LOOKBACK_S + 2)
    stack.companion.start()
    for key, record in stack.wait_results("slow", keys, timeout_s=45).items():
        assert record.status == "ok" and record.result == 5, (key, record)
    metrics = stack.companion.request("GET", "/metrics")[1].decode()
    assert 'companion_audit_lag_seconds{dc="dc8"}' in metrics
