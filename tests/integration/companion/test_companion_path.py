"""The whole path with real processes: devnode hook -> companion (gunicorn) -> results.

Chunks and metadata are written through the Riak client; the devnode's hook twin POSTs
the key group to the companion; the companion's workers fetch, decode once, run the
plugins sandboxed and store results under substreams/<name>/<key>; the test reads them
back and compares with the plugin called in-process on the same events.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from companion.testing import Stack
from eventstore.names import ChunkKey
from relocator.events import generate_events
from substreams.api import Context, declaration_of
from substreams.examples import event_counts, url_latency, web_5xx

EXAMPLES = Path(web_5xx.__file__).parent
EPOCH = 1_700_000_100


def example_plugins() -> dict[str, str]:
    return {p.name: p.read_text() for p in EXAMPLES.glob("[!_]*.py")}


def test_hook_drives_the_companion_and_every_result_is_stored(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(plugins=example_plugins())
    events = generate_events(1500, seed=7)
    chunks = {
        ("web", "main", 0): [e for e in events if e["type"] == "web"][:400],
        ("web", "main", 1): [e for e in events if e["type"] == "web"][400:],
        ("lb", "main", 0): [e for e in events if e["type"] == "lb"],
        ("cron", "", 0): [e for e in events if e["type"] == "cron"],
    }
    keys = stack.write_epoch(EPOCH, "dc1", chunks)
    web_keys = [k for k in keys if k.type == "web"]
    for module, expect_keys in ((web_5xx, web_keys), (url_latency, web_keys), (event_counts, keys)):
        sub = next(d for v in vars(module).values() if (d := declaration_of(v)) is not None)
        results = stack.wait_results(sub.name, expect_keys)
        for key, record in results.items():
            assert record.status == "ok", record.error
            assert record.substream == sub.name
            # Same function, same events, in-process: the same result.
            chunk = chunks[(key.type, key.subtype, key.chunk)]
            assert record.result == sub(chunk, Context.of(key))
            # The version recorded is the hash of the plugin file the companion loaded.
            assert record.version == sub.version
    # Types a substream does not read get no result at all.
    assert stack.result("web_5xx", ChunkKey(EPOCH, "dc1", "lb", "main", 0)) is None

    # Observability: health, the merged status of both workers, Prometheus metrics.
    health = stack.companion.json("/healthz")
    assert health["status"] == "ok"
    # The examples and their query twins (substreams/examples/*_q.py).
    assert health["substreams"] == sorted(
        n for base in ("event_counts", "url_latency", "web_5xx") for n in (base, f"{base}_q")
    )
    # Each worker writes its status snapshot periodically; under load the second one can
    # lag the work itself, so wait for both snapshots as well as for the runs.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = stack.companion.json("/v1/status")
        runs = status["substreams"].get("event_counts", {}).get("runs", 0)
        if runs >= 4 and status["workers"] == 2:
            break
        time.sleep(0.1)
    assert status["workers"] == 2
    assert status["substreams"]["event_counts"]["ok"] == 4
    assert status["substreams"]["web_5xx"]["p99_ms"] is not None
    code, body = stack.companion.request("GET", "/metrics")
    assert code == 200
    text = body.decode()
    runs = re.findall(
        r'companion_substream_runs_total\{kind="ok",status="ok",substream="event_counts"\} (\S+)',
        text,
    )
    assert sum(float(r) for r in runs) == 4.0
    assert "companion_substream_seconds_bucket" in text


WRITES_STORE = """
from eventstore.riak import Retry, RiakClient
from substreams import substream

@substream(name="writes_store", timeout_s=2)
def writes_store(events, ctx):
    # Tries to forge another substream's result through the Riak client.
    client = RiakClient([events[0]["riak"]], retry=Retry(max_tries=1))
    client.put("substreams", "forged", str(ctx.key), b"forged")
    return "wrote"
"""


@pytest.mark.parametrize("isolation", ["substream", "chunk"])
def test_hostile_plugins_through_the_companion(
    stack_factory: Callable[..., Stack], isolation: str
) -> None:
    from tests.integration.substreams.test_sandbox_containment import HOSTILE

    stack = stack_factory(
        plugins={"hostile.py": HOSTILE, "writes_store.py": WRITES_STORE, **example_plugins()},
        companion={"disable_after": 100, "max_parallel": 4, "isolation": isolation},
    )
    events = [e for e in generate_events(600, seed=3) if e["type"] == "web"]
    events[0]["riak"] = stack.devnode.url
    keys = stack.write_epoch(EPOCH + 1, "dc1", {("web", "main", 0): events})
    expected = {
        "good": "ok",
        "infinite_loop": "timeout",
        "stubborn_loop": "timeout",
        "sleeper": "timeout",
        "memory_bomb": "killed",
        "exits": "killed",
        "segfault": "killed",
        "raises": "error",
        "oversized": "error",
        "forks": "error",
        "forks_via_libc": "killed",  # the seccomp filter refuses fork through libc
        "opens_socket": "error",
        "writes_file": "error",
        "unencodable": "error",
        "writes_store": "error",
        "web_5xx": "ok",
        "url_latency": "ok",
        "event_counts": "ok",
    }
    got = {name: stack.wait_results(name, keys)[keys[0]] for name in expected}
    assert {n: r.status for n, r in got.items()} == expected
    # The well-behaved plugins' results are intact, next to the hostile ones.
    assert got["web_5xx"].result == web_5xx.web_5xx(events, Context.of(keys[0]))
    assert got["good"].result["n"] == len(events)
    assert "memory" in (got["memory_bomb"].error or "")
    assert "socket.__new__ is not allowed" in (got["opens_socket"].error or "")
    assert "not allowed" in (got["writes_store"].error or "")
    assert stack.result("forged", keys[0]) is None
    # The companion still serves, and nothing the plugins started is left running.
    assert stack.companion.json("/healthz")["status"] == "ok"
    assert "seccomp" in (got["forks_via_libc"].error or "")
    # Failures are shown by kind on the node's status.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        status = stack.companion.json("/v1/status")["substreams"]
        if status.get("segfault", {}).get("failures"):
            break
        time.sleep(0.1)
    assert status["segfault"]["failures"] == {"killed": 1}
    assert status["sleeper"]["failures"] == {"timeout": 1}
    assert "SIGSEGV" in status["segfault"]["last_error"]


def test_a_substream_failing_in_a_row_is_disabled_until_re_enabled(
    stack_factory: Callable[..., Stack],
) -> None:
    flaky = (
        "from substreams import substream\n"
        "@substream(name='flaky')\n"
        "def flaky(events, ctx):\n"
        "    raise RuntimeError('boom')\n"
    )
    stack = stack_factory(plugins={"flaky.py": flaky}, companion={"disable_after": 2, "workers": 1})
    first = stack.write_epoch(EPOCH + 10, "dc1", {("t", "", 0): [{"a": 1}], ("t", "", 1): [{}]})
    assert {r.status for r in stack.wait_results("flaky", first).values()} == {"error"}
    deadline = time.monotonic() + 5
    while "flaky" not in _disabled(stack) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "flaky" in _disabled(stack)
    later = stack.write_epoch(EPOCH + 11, "dc1", {("t", "", 0): [{"a": 1}]})
    record = stack.wait_results("flaky", later)[later[0]]
    assert record.status == "error"
    assert record.error is not None and record.error.startswith("disabled")
    code, _ = stack.companion.request("POST", "/v1/substreams/flaky/enable", {})
    assert code == 200
    assert "flaky" not in _disabled(stack)


def _disabled(stack: Stack) -> set[str]:
    return {p.stem for p in (stack.root / "state" / "disabled").glob("*.json")}


def test_overload_is_shed_and_marked_while_writes_keep_their_pace(
    stack_factory: Callable[..., Stack],
) -> None:
    slow = (
        "import time\n"
        "from substreams import substream\n"
        "@substream(name='slow', timeout_s=2)\n"
        "def slow(events, ctx):\n"
        "    time.sleep(0.4)\n"
        "    return len(events)\n"
    )
    stack = stack_factory(
        plugins={"slow.py": slow},
        companion={"workers": 1, "threads": 1, "queue_max": 2, "max_wait_s": 0.5},
    )
    keys: list[ChunkKey] = []
    for i in range(4):
        keys += stack.write_epoch(
            EPOCH + 20 + i, "dc1", {("t", "", c): [{"c": c}] for c in range(5)}
        )
    results = stack.wait_results("slow", keys, timeout_s=30)
    statuses = [r.status for r in results.values()]
    assert statuses.count("shed") >= len(keys) // 2
    assert "ok" in statuses
    assert set(statuses) <= {"ok", "shed"}
    shed = next(r for r in results.values() if r.status == "shed")
    assert shed.error is not None and shed.error.startswith("shed:")
    # The hook never had to wait for the companion: every POST was answered.
    stats = stack.riak.stats()
    assert stats["devnode_hook_failed_total"] == 0
    assert stats["devnode_hook_dropped_total"] == 0
    assert stats["devnode_hook_posted_total"] == 4


def test_the_auditor_processes_chunks_whose_notification_was_lost(
    stack_factory: Callable[..., Stack],
) -> None:
    # The hook posts to a path the companion does not serve: every notification is lost.
    stack = stack_factory(
        plugins=example_plugins(),
        hook={"path": "/lost"},
        companion={"audit_interval_s": 0.5, "audit_dcs": ["dc1"], "audit_lookback_s": 60},
    )
    epoch = int(time.time()) - 15  # old enough for the auditor, young enough to be seen
    events = [e for e in generate_events(300, seed=9) if e["type"] == "web"]
    keys = stack.write_epoch(epoch, "dc1", {("web", "main", 0): events, ("lb", "", 0): [{}]})
    records = stack.wait_results("event_counts", keys, timeout_s=30)
    assert {r.status for r in records.values()} == {"ok"}
    assert stack.wait_results("web_5xx", keys[:1])[keys[0]].status == "ok"
    assert stack.riak.stats()["devnode_hook_failed_total"] == 1
    # Idempotent: later rounds find nothing missing and admit nothing more.
    time.sleep(1.5)
    status = stack.companion.json("/v1/status")
    assert status["counters"]["chunks_accepted"] == 2
