"""Every admitted chunk ends with a stored result per matching substream, whatever fails
inside the companion (real gunicorn companion, devnode, its hook).

- the sandbox cannot fork (a real kernel limit on the workers' processes, no code
  flag): every matching substream gets ``error`` naming the cause, and the plugins are
  not blamed for it;
- chunks shed while a plugin is disabled: the disabled plugin's results are marked too;
- a result deleted from the store: the auditor, on by default and learning the dc
  from the key groups, writes it again without rewriting the results that exist;
- a chunk that cannot be read (bad checksum: found by the chunk thread; not an array,
  or a body that does not decode: found by the child that decodes it): every matching
  substream gets ``error`` naming why, and the plugins are not blamed for it;
- each substream sees the events narrowed to the fields it declares, as the
  consumer's fallback gives them (the child decodes their union once).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import sereal_codec as sereal
from companion.testing import Stack, children_of, fork_servers_of, forks_refused, wait_for
from eventstore.blob import add_postfix, pack_blob
from eventstore.names import ChunkKey
from eventstore.testing import store_chunks
from sereal_codec.projection import project_events
from substreams.api import Context
from substreams.loader import load_file
from substreams.results import ResultRecord

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


FIELDS = """
from substreams import substream

@substream(name="keys_i", types=["t"], fields=["i"])
def keys_i(events, ctx):
    return [sorted(e) for e in events]

@substream(name="nested", types=["t"], fields=["n.a", "c"])
def nested(events, ctx):
    return [[e.get("n"), e.get("c")] for e in events]

@substream(name="undeclared", types=["t"], fields=["n.a", "c"])
def undeclared(events, ctx):
    # reads a field it did not declare: an error naming it, as in the fallback
    return [[e.get("c"), e.get("i")] for e in events]

@substream(name="whole", types=["t"])
def whole(events, ctx):
    return [sorted(e) for e in events]
"""


def chunks(n: int) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    return {("t", "", c): [{"i": i, "c": c} for i in range(5)] for c in range(n)}


def assert_unreadable(got: dict[ChunkKey, ResultRecord], *, checksum_failed: ChunkKey) -> None:
    """Every result an error naming its chunk as unreadable; ``checksum_failed``'s names
    the checksum."""
    for key, record in got.items():
        assert record.status == "error", (key, record)
        assert record.error is not None and record.error.startswith("chunk_unreadable: ")
        assert key.format() in record.error, record.error
    error = got[checksum_failed].error or ""
    assert "ChecksumMismatch" in error or "xxh3" in error, error


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
    # Each worker's fork server (companion/forkserver.py) forks the chunks' children:
    # it must be refused too, once it is up (a thread per chunk thread of its worker,
    # started before the worker's first chunk may use it).
    servers = fork_servers_of(workers)
    with forks_refused(workers + servers):
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
    stack.wait_results("stamp", keys)
    stack.wait_results("counts", keys)
    stack.wait_results("firsts", keys)
    # The epoch is old enough for the auditor at once, so a round may have admitted a
    # chunk whose results the hook's run had not written yet (both compute it; the later
    # stamp stays). Take the stamps once no round writes any more: equal over a second
    # (three rounds).
    stamps = {key: stack.result("stamp", key) for key in keys}
    deadline = time.monotonic() + 30
    while True:
        time.sleep(1.0)
        again = {key: stack.result("stamp", key) for key in keys}
        if again == stamps or time.monotonic() > deadline:
            break
        stamps = again
    victim = keys[1]
    stack.riak.delete("substreams", "counts", victim.format())
    assert stack.result("counts", victim) is None
    record = stack.wait_results("counts", [victim], timeout_s=30)[victim]
    assert record.status == "ok" and record.result == 5
    # Only the missing result was written: the others of that chunk (a stamp differs
    # on every run) are the ones the hook's run stored.
    for key in keys:
        assert stack.result("stamp", key) == stamps[key]


def test_an_unreadable_chunk_gets_an_error_naming_why_on_every_matching_substream(
    stack_factory: Callable[..., Stack],
) -> None:
    # One worker, the plugins trusted there (an ok run): the chunks go through the
    # shared child, not the lanes of new plugins.
    stack = stack_factory(
        plugins={"counts.py": COUNTS}, companion={"disable_after": 2, "workers": 1}
    )
    first = stack.write_epoch(EPOCH + 29, "dc1", chunks(1))
    assert stack.wait_results("firsts", first)[first[0]].status == "ok"
    assert stack.wait_results("counts", first)[first[0]].status == "ok"
    good = pack_blob([{"i": i} for i in range(5)])
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF  # the checksum no longer matches: the chunk thread
    document = sereal.encode([{"i": i} for i in range(50)], compress=None)
    blobs = [
        ("t", "", bytes(flipped)),
        ("t", "", pack_blob({"not": "events"})),  # decodes, but to no array: the child
        ("t", "", add_postfix(document[:-20])),  # checksum right, body cut: the child
    ]
    keys = store_chunks([stack.riak], EPOCH + 30, "dc1", blobs)
    for name in ("counts", "firsts"):
        got = stack.wait_results(name, keys)
        assert_unreadable(got, checksum_failed=keys[0])
        assert "holds a dict, not an array of events" in (got[keys[1]].error or "")
        assert "does not decode" in (got[keys[2]].error or ""), got[keys[2]].error
    # The chunks', not the plugins' failures: three in a row disabled nothing, and
    # the next chunk is processed as usual.
    markers = stack.root / "state" / "disabled"  # disabled: *.json; failure counts
    assert not [*markers.glob("*.json"), *markers.glob("*.failures")]
    after = stack.write_epoch(EPOCH + 31, "dc1", chunks(1))
    assert stack.wait_results("counts", after)[after[0]].status == "ok"
    status = wait_for(
        lambda: (
            (v := stack.companion.json("/v1/status"))["counters"]["chunks_unreadable"] == 3 and v
        )
    )
    assert status["substreams"]["counts"]["failures"] == {}


def test_each_substream_sees_the_events_narrowed_to_its_own_fields(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(plugins={"fields.py": FIELDS})
    events: list[dict[str, Any]] = [
        {"i": 1, "c": "x", "n": {"a": 1, "b": 2}, "q": [1]},
        {"i": 2, "n": [3]},  # not a dict below: kept whole
        {"c": "y", "q": None},
    ]
    keys = stack.write_epoch(EPOCH + 40, "dc1", {("t", "", 0): events})
    subs = {s.name: s for s in load_file(stack.plugin_dir / "fields.py")}
    ctx = Context.of(keys[0])
    for name, sub in subs.items():
        if name == "undeclared":
            continue
        record = stack.wait_results(name, keys)[keys[0]]
        assert record.status == "ok", record
        # What the consumer's fallback and `substream test` give the same plugin.
        assert record.result == sub.function(project_events(events, sub.projection), ctx)
    assert stack.wait_results("nested", keys)[keys[0]].result == [
        [{"a": 1}, "x"],
        [[3], None],
        [None, "y"],
    ]
    # Reading an undeclared field is the plugin's error, naming the field (issue 21),
    # counted against it and shown with its message in /v1/status.
    failed = stack.wait_results("undeclared", keys)[keys[0]]
    message = (
        "UndeclaredField: field 'i' is not declared (declared fields: n.a, c); "
        "add 'i' to @substream(fields=[...])"
    )
    assert failed.status == "error" and failed.error is not None
    assert failed.error.startswith(f"exception: {message}\n"), failed.error
    view = wait_for(
        lambda: (
            (v := stack.companion.json("/v1/status"))["substreams"]
            .get("undeclared", {})
            .get("runs")
            and v
        ),
        what="the undeclared run counted",
    )
    stats = view["substreams"]["undeclared"]
    assert stats["failures"] == {"exception": 1} and message in stats["last_error"]


QUERY_ONLY = """
from substreams.query import query

firsts_q = query(name="firsts_q", types=["t"], sql="SELECT i FROM events WHERE i = 0")
"""


def test_an_unreadable_chunk_whose_plugins_are_all_queries_gets_the_same_errors(
    stack_factory: Callable[..., Stack],
) -> None:
    # Such a chunk is not checked before the walk (companion/DESIGN.md, "Query plugins"):
    # the walk's own checks must give what the chunk thread's check gives above.
    stack = stack_factory(plugins={"q.py": QUERY_ONLY}, companion={"workers": 1})
    first = stack.write_epoch(EPOCH + 40, "dc1", chunks(1))
    assert stack.wait_results("firsts_q", first)[first[0]].status == "ok"
    good = pack_blob([{"i": i} for i in range(5)])
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF
    document = sereal.encode([{"i": i} for i in range(50)], compress=None)
    blobs = [("t", "", bytes(flipped)), ("t", "", add_postfix(document[:-20]))]
    keys = store_chunks([stack.riak], EPOCH + 41, "dc1", blobs)
    got = stack.wait_results("firsts_q", keys)
    assert_unreadable(got, checksum_failed=keys[0])
    markers = stack.root / "state" / "disabled"
    assert not [*markers.glob("*.json"), *markers.glob("*.failures")]
    wait_for(lambda: stack.companion.json("/v1/status")["counters"]["chunks_unreadable"] == 2)
