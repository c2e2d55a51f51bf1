"""Node-wide behaviour with real processes: one key group spread over every worker,
failures in a row counted for the node, and plugin versions compared between the
workers of a node and between nodes (through a real ZooKeeper)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from companion.testing import Stack, wait_for

EPOCH = 1_700_002_000

SLOW_FAILING = """
import time
from substreams import substream

@substream(name="slow_failing", timeout_s=2.0)
def slow_failing(events, ctx):
    time.sleep(0.3)
    raise ValueError("no such field: price")
"""


def plugin(version_text: str) -> str:
    return (
        "from substreams import substream\n"
        "@substream(name='versioned')\n"
        f"def versioned(events, ctx):\n    return {version_text!r}\n"
    )


def worker_snapshots(stack: Stack) -> list[dict[str, Any]]:
    snapshots = []
    for path in (stack.root / "state" / "status").glob("*.json"):
        snapshots.append(json.loads(path.read_text()))
    return snapshots


def test_one_key_group_is_spread_over_the_workers_and_failures_count_for_the_node(
    stack_factory: Callable[..., Stack],
) -> None:
    # 2 workers x 1 thread, disabled after 4 failures in a row: the 4 chunks of one key
    # group go to both workers, so no worker alone sees 4 failures; the node does.
    stack = stack_factory(
        plugins={"slow_failing.py": SLOW_FAILING},
        companion={"workers": 2, "threads": 1, "disable_after": 4},
    )
    chunks = {("web", "main", i): [{"n": i}] for i in range(4)}
    keys = stack.write_epoch(EPOCH, "dc1", chunks)
    results = stack.wait_results("slow_failing", keys)
    assert all(r.status == "error" for r in results.values())

    marker = stack.root / "state" / "disabled" / "slow_failing.json"
    wait_for(marker.exists)
    assert "4 failures in a row on this node" in json.loads(marker.read_text())["reason"]

    def runs_per_worker() -> list[int] | None:
        runs = [
            s.get("substreams", {}).get("slow_failing", {}).get("runs", 0)
            for s in worker_snapshots(stack)
        ]
        return runs if sum(runs) == 4 else None

    runs = wait_for(runs_per_worker)
    assert len(runs) == 2 and all(0 < n < 4 for n in runs), runs

    # Disabled for the whole node: the next chunk gets a marked result without a run.
    more = stack.write_epoch(EPOCH + 1, "dc1", {("web", "main", 0): [{}]})
    record = stack.wait_results("slow_failing", more)[more[0]]
    assert record.error is not None and record.error.startswith("disabled")
    page = stack.companion.request("GET", "/")[1].decode()
    assert 'data-name="slow_failing" data-state="disabled"' in page


def test_the_status_page_shows_workers_that_disagree_on_a_version(
    stack_factory: Callable[..., Stack],
) -> None:
    # No periodic reload: a worker keeps the version it loaded at start.
    stack = stack_factory(
        plugins={"versioned.py": plugin("one")},
        companion={"workers": 2, "reload_interval_s": 3600.0},
    )
    # Both workers have loaded the first version before it changes.
    status = wait_for(lambda: (v := stack.companion.json("/v1/status"))["workers"] == 2 and v)
    assert status["version_conflicts"] == {}
    assert list(status["loaded"]["versioned"].values()) == [2]
    (old,) = status["loaded"]["versioned"]
    stack.write_plugin("versioned.py", plugin("two"))
    # A worker killed by the OOM killer: gunicorn starts a new one, which loads the new
    # file while the other worker still runs the old one.
    victim = worker_snapshots(stack)[0]["pid"]
    os.kill(victim, signal.SIGKILL)

    def conflict() -> Any:
        view = stack.companion.json("/v1/status")
        return view["version_conflicts"].get("versioned")

    found = wait_for(conflict)
    assert set(found["workers"]) == {old, *found["workers"]} and len(found["workers"]) == 2
    page = stack.companion.request("GET", "/")[1].decode()
    assert 'data-name="versioned" data-state="enabled" data-versions="disagree"' in page
    assert "versions differ: workers" in page and old in page


def test_the_status_page_shows_nodes_that_disagree_on_a_version(
    stack_factory: Callable[..., Stack],
    zookeeper_server: Any,
    zookeeper: str,
) -> None:
    zk = {
        "zk_hosts": zookeeper_server.hosts,
        "zk_root": zookeeper,
        "zk_health_interval_s": 0.3,
    }
    first = stack_factory(
        plugins={"versioned.py": plugin("one")},
        companion={"node": "dev1@127.0.0.1", "workers": 1},
        **zk,
    )
    second = stack_factory(
        plugins={"versioned.py": plugin("two")},
        companion={"node": "dev2@127.0.0.1", "workers": 1},
        **zk,
    )
    mine = first.companion.json("/v1/status")["loaded"]["versioned"]
    theirs = second.companion.json("/v1/status")["loaded"]["versioned"]
    assert mine != theirs

    def conflict(stack: Stack) -> Any:
        return stack.companion.json("/v1/status")["version_conflicts"].get("versioned")

    # (Until a node's workers report, it is listed without the substream: also a
    # disagreement, so wait for the versions themselves.)
    expected = {"nodes": {"dev2@127.0.0.1": sorted(theirs)}}
    wait_for(lambda: conflict(first) == expected)
    expected = {"nodes": {"dev1@127.0.0.1": sorted(mine)}}
    wait_for(lambda: conflict(second) == expected)
    page = first.companion.request("GET", "/")[1].decode()
    (version_two,) = theirs
    assert f"versions differ: node dev2@127.0.0.1 has {version_two}" in page

    # The second node catches up: the pages agree again.
    second.write_plugin("versioned.py", plugin("one"))
    wait_for(lambda: conflict(first) is None)
    page = first.companion.request("GET", "/")[1].decode()
    assert 'data-name="versioned" data-state="enabled" data-versions="agree"' in page


def test_a_killed_worker_leaves_the_queued_chunks_to_the_others(
    stack_factory: Callable[..., Stack],
) -> None:
    # Chunks queued in the node's inbox are not the receiving worker's: killing a worker
    # loses at most the one chunk it was running, not the queue.
    slow = (
        "import time\nfrom substreams import substream\n"
        "@substream(name='slow_ok', timeout_s=2.0)\n"
        "def slow_ok(events, ctx):\n    time.sleep(0.4)\n    return len(events)\n"
    )
    stack = stack_factory(
        plugins={"slow_ok.py": slow}, companion={"workers": 2, "threads": 1, "max_wait_s": 30.0}
    )
    keys = stack.write_epoch(EPOCH + 5, "dc1", {("web", "main", i): [{}] * i for i in range(8)})
    wait_for(lambda: len(worker_snapshots(stack)) == 2)
    time.sleep(0.2)
    os.kill(worker_snapshots(stack)[0]["pid"], signal.SIGKILL)

    def ok_results() -> int:
        records = [stack.result("slow_ok", k) for k in keys]
        return sum(1 for r in records if r is not None and r.status == "ok")

    wait_for(lambda: ok_results() >= len(keys) - 1, timeout_s=30)
