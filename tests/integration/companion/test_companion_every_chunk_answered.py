"""Every admitted chunk ends with a stored result per matching substream, whatever fails
inside the companion (real gunicorn companion, devnode, its hook).

- the sandbox cannot fork (a real kernel limit on the workers' processes, no code
  flag): every matching substream gets ``error`` naming the cause, and the plugins are
  not blamed for it;
- chunks shed while a plugin is disabled: the disabled plugin's results are marked too;
- a result deleted from the store: the auditor, on by default and learning the dc
  from the key groups, writes it again without rewriting the results that exist.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from companion.testing import Stack, children_of, forks_refused

pytestmark = pytest.mark.integration

EPOCH = 1_700_003_000

COUNTS = """
from substreams import substream

@substream(name="counts", types=["t"])
def counts(events, ctx):
    return len(events)

@substream(name="firsts", types=["t"])
def firsts(events, ctx):
    return [e.get("i") for e in events[:3]]
"""

STAMP = """
import os, time
from substreams import substream

@substream(name="stamp", types=["t"])
def stamp(events, ctx):
    return {"pid": os.getpid(), "at": time.time()}  # differs on every run
"""

FLAKY = """
from substreams import substream

@substream(name="flaky", types=["t"])
def flaky(events, ctx):
    raise RuntimeError("boom")
"""

SLOW = """
import time
from substreams import substream

@substream(name="slow", types=["t"], timeout_s=2)
def slow(events, ctx):
    time.sleep(0.3)
    return len(events)
"""


def wait_for(condition: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout_s}s")


def chunks(n: int) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    return {("t", "", c): [{"i": i, "c": c} for i in range(5)] for c in range(n)}


def test_a_fork_failure_leaves_an_error_naming_the_cause_on_every_matching_substream(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(plugins={"counts.py": COUNTS}, companion={"disable_after": 2})
    before = stack.write_epoch(EPOCH, "dc1", chunks(2))
    assert {r.status for r in stack.wait_results("counts", before).values()} == {"ok"}
    master = stack.companion.pid
    assert master is not None
    # Both workers booted (the harness is healthy once one answers; on a loaded machine
    # the second may still be starting).
    wait_for(lambda: len(children_of(master)) == 2)
    workers = children_of(master)
    assert len(workers) == 2
    with forks_refused(workers):
        keys = stack.write_epoch(EPOCH + 1, "dc1", chunks(3))
        for name in ("counts", "firsts"):
            for key, record in stack.wait_results(name, keys).items():
                assert record.status == "error", (key, record)
                assert record.error is not None
                assert record.error.startswith("sandbox: fork failed: [Errno 11]"), record.error
    # The failures were the machine's, not the plugins': three in a row did not disable
    # them, and they run again once processes can be made.
    assert not list((stack.root / "state" / "disabled").glob("*.json"))
    after = stack.write_epoch(EPOCH + 2, "dc1", chunks(1))
    assert stack.wait_results("counts", after)[after[0]].status == "ok"
    # Node-wide counters merge each worker's snapshot, written every 0.2 s: wait for them.
    deadline = time.monotonic() + 10
    status = stack.companion.json("/v1/status")
    while status["counters"]["chunks_failed"] < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
        status = stack.companion.json("/v1/status")
    assert status["counters"]["chunks_failed"] == 3
    assert status["substreams"]["counts"]["failures"] == {"sandbox": 3}


def test_chunks_shed_while_a_plugin_is_disabled_get_its_result_too(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(
        plugins={"flaky.py": FLAKY, "slow.py": SLOW},
        companion={
            "workers": 1,
            "threads": 1,
            "queue_max": 1,
            "max_wait_s": 0.5,
            "disable_after": 1,
        },
    )
    first = stack.write_epoch(EPOCH + 10, "dc1", chunks(1))
    assert stack.wait_results("flaky", first)[first[0]].status == "error"
    wait_for((stack.root / "state" / "disabled" / "flaky.json").exists)
    keys = stack.write_epoch(EPOCH + 11, "dc1", chunks(8))
    slow = stack.wait_results("slow", keys, timeout_s=30)
    assert "shed" in {r.status for r in slow.values()}
    flaky = stack.wait_results("flaky", keys, timeout_s=30)
    for key, record in flaky.items():
        assert record.status == "error", (key, record)
        assert record.error == "disabled: on this node"


def test_the_auditor_writes_a_deleted_result_again_and_nothing_else(
    stack_factory: Callable[..., Stack],
) -> None:
    # No audit_dcs configured: the auditor audits the dcs of the key groups it received.
    stack = stack_factory(
        plugins={"counts.py": COUNTS, "stamp.py": STAMP}, companion={"audit_interval_s": 0.3}
    )
    epoch = int(time.time()) - 15  # old enough for the auditor, within its lookback
    keys = stack.write_epoch(epoch, "dc7", chunks(3))
    stamps = stack.wait_results("stamp", keys)
    stack.wait_results("counts", keys)
    stack.wait_results("firsts", keys)
    victim = keys[1]
    stack.riak.delete("substreams", "counts", victim.format())
    assert stack.result("counts", victim) is None
    record = stack.wait_results("counts", [victim], timeout_s=30)[victim]
    assert record.status == "ok" and record.result == 5
    # Only the missing result was written: the others of that chunk (a stamp differs
    # on every run) are the ones the hook's run stored.
    for key in keys:
        assert stack.result("stamp", key) == stamps[key]
