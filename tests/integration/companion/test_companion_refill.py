"""``riak-events substream refill NAME`` against a real companion and devnode (issue 21,
item 8): after ``substream enable``, the gaps of the disabled period (``disabled``
results), ``shed`` results and missing ones are run again and served by the server;
a result the plugin gave (ok, or its own error) is never touched; a companion that
sheds the refill is sent the epoch again, backing off, until every gap is filled."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from companion.testing import Stack
from eventstore.names import ChunkKey
from substreams.results import error_value

RIAK_EVENTS = str(Path(sys.executable).parent / "riak-events")

#: A result that differs on every run: rewriting it would show.
STAMP = """
import time
from substreams import substream

@substream(name="stamp", types=["t"], fields=["i"])
def stamp(events, ctx):
    return [time.time_ns(), len(events)]
"""

EPOCH = 1_700_200_000


def _cli(*args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RIAK_EVENTS, *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )


def _chunks(n: int) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    return {("t", "", 10000 * (i + 1)): [{"i": i, "j": j} for j in range(3)] for i in range(n)}


def _refill(stack: Stack, start: int, end: int, *more: str) -> subprocess.CompletedProcess[str]:
    return _cli(
        "substream", "refill", "stamp", "--node", stack.devnode.url, "--dc", "dc1",
        "--start", str(start), "--end", str(end), "--companion", stack.companion.url,
        "--json", *more,
    )  # fmt: skip


def _switch(stack: Stack, action: str) -> None:
    """``substream enable|disable stamp``, then the time every worker takes to see it
    (each re-reads the node's markers at most every 0.5 s)."""
    assert _cli("substream", action, "stamp", "--companion", stack.companion.url).returncode == 0
    time.sleep(0.6)


def _stored(stack: Stack, keys: list[ChunkKey]) -> dict[ChunkKey, tuple[str, Any, str | None]]:
    found: dict[ChunkKey, tuple[str, Any, str | None]] = {}
    for key in keys:
        record = stack.result("stamp", key)
        assert record is not None, key
        found[key] = (record.status, record.result, record.error)
    return found


def test_the_gaps_of_a_disabled_period_shed_and_missing_results_are_refilled(
    stack_factory: Callable[..., Stack],
) -> None:
    # The auditor off: only the refill may fill anything.
    stack = stack_factory(plugins={"stamp.py": STAMP}, companion={"audit_interval_s": 0})
    before = stack.write_epoch(EPOCH, "dc1", _chunks(2))
    stack.wait_results("stamp", before)
    kept_before = _stored(stack, before)
    assert {s for s, _, _ in kept_before.values()} == {"ok"}

    _switch(stack, "disable")
    disabled = stack.write_epoch(EPOCH + 1, "dc1", _chunks(2))
    disabled += stack.write_epoch(EPOCH + 2, "dc1", _chunks(2))
    stack.wait_results("stamp", disabled)
    assert {v[2] for v in _stored(stack, disabled).values()} == {"disabled: on this node"}

    # While disabled, a refill is refused with one line saying what to do.
    refused = _refill(stack, EPOCH, EPOCH + 4)
    assert refused.returncode == 1, refused
    assert "disabled on this node: enable it first" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr

    _switch(stack, "enable")
    last = stack.write_epoch(EPOCH + 3, "dc1", _chunks(4))
    stack.wait_results("stamp", last)
    version = stack.result("stamp", last[0]).version  # type: ignore[union-attr]
    ok_kept, shed, failed, missing = last
    shed_value = error_value("shed", "stamp", version, "shed: overload: queue full")
    stack.riak.put("substreams", "stamp", shed.format(), shed_value)
    own_error = error_value("error", "stamp", version, "exception: ValueError: boom")
    stack.riak.put("substreams", "stamp", failed.format(), own_error)
    stack.riak.delete("substreams", "stamp", missing.format())
    untouched = [*before, ok_kept, failed]
    stored_before = _stored(stack, untouched)

    dry = _refill(stack, EPOCH, EPOCH + 4, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["gaps"] == 6
    assert stack.result("stamp", missing) is None  # a dry run changes nothing

    done = _refill(stack, EPOCH, EPOCH + 4)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["epochs"] == 4 and report["epochs_with_data"] == 4 and report["keys"] == 10
    assert (report["gaps"], report["refilled"], report["left"], report["kept"]) == (6, 6, 0, 4)
    assert "4/4 epochs" in done.stderr  # progress

    # Every gap is an ok result now; what the plugin had answered is as it was.
    refilled = _stored(stack, [*disabled, shed, missing])
    assert {s for s, _, _ in refilled.values()} == {"ok"}, refilled
    assert _stored(stack, untouched) == stored_before

    # Read back as a consumer, no fallback: every refilled result is served by the
    # server; the one gap is the plugin's own error, kept.
    read = _cli(
        "read", "--node", stack.devnode.url, "--dc", "dc1", "--start", str(EPOCH + 1),
        "--end", str(EPOCH + 4), "--substream", "stamp", "--fallback", "off",
    )  # fmt: skip
    assert read.returncode == 4, read.stderr
    assert "7 served, 0 computed here, 1 gap(s)" in read.stderr
    rows = [json.loads(line) for line in read.stdout.splitlines()]
    served = {(r["epoch"], r["chunk"]) for r in rows if r["served"] == "server"}
    assert served == {(k.epoch, k.chunk) for k in [*disabled, ok_kept, shed, missing]}, rows

    # Again: nothing left to refill, nothing rewritten.
    again = _refill(stack, EPOCH, EPOCH + 4)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["gaps"] == 0
    assert _stored(stack, [*disabled, shed, missing]) == refilled


def test_a_refill_the_companion_sheds_is_sent_again_until_every_gap_is_filled(
    stack_factory: Callable[..., Stack],
) -> None:
    # One thread and a queue of one: most of an epoch's refill is shed on arrival.
    stack = stack_factory(
        plugins={"stamp.py": STAMP},
        companion={"workers": 1, "threads": 1, "queue_max": 1, "audit_interval_s": 0},
    )
    # Trusted first (an ok run): its runs are not paced one at a time in a lane.
    stack.wait_results("stamp", stack.write_epoch(EPOCH + 9, "dc1", _chunks(1)))
    _switch(stack, "disable")
    keys = stack.write_epoch(EPOCH + 10, "dc1", _chunks(8))
    stack.wait_results("stamp", keys)
    _switch(stack, "enable")

    done = _refill(stack, EPOCH + 10, EPOCH + 11)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["retries"] > 0, report  # it was shed, and sent again
    assert (report["refilled"], report["left"]) == (8, 0), report
    assert {s for s, _, _ in _stored(stack, keys).values()} == {"ok"}
