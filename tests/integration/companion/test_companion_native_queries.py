"""Query plugins run natively in a real companion (issue 23 item 3): the worker walks
the fetched chunk once for all its query plugins (``companion/queries.py``), beside the
child of its Python plugins, never in it; each stored record is byte for byte the one
a sandboxed child gives (the fork server road); a chunk whose plugins are all queries
forks nothing, so its results are stored ok while the companion cannot fork at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from companion.testing import Stack, children_of, fork_servers_of, forks_refused, wait_for
from eventstore.blob import DecodeLimits
from eventstore.names import ChunkKey
from relocator.events import generate_events
from substreams.api import Substream
from substreams.examples import web_5xx
from substreams.forkserver import ForkServer
from substreams.loader import load_file
from substreams.protocol import DEFAULT_CAP
from substreams.results import stored_value

EXAMPLES = Path(web_5xx.__file__).parent
QUERIES = ("web_5xx_q", "url_latency_q", "event_counts_q")
EPOCH = 1_700_004_000


def _chunks(seed: int) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    events = generate_events(1200, seed=seed)
    web = [e for e in events if e["type"] == "web"]
    return {
        ("web", "main", 0): web[:300],
        ("web", "main", 1): web[300:],
        ("lb", "main", 0): [e for e in events if e["type"] == "lb"],
        ("cron", "", 0): [e for e in events if e["type"] == "cron"],
    }


def _plugins(stack: Stack) -> dict[str, Substream]:
    """The plugins as the companion loaded them (same files: same versions)."""
    return {s.name: s for path in stack.plugin_dir.glob("*.py") for s in load_file(path)}


def _stored(stack: Stack, name: str, key: ChunkKey) -> bytes:
    return stack.riak.get("substreams", name, key.format()).value


def _childs_record(fork_server: ForkServer, stack: Stack, sub: Substream, key: ChunkKey) -> bytes:
    """The record a sandboxed child gives for ``sub`` on the stored chunk."""
    blob = stack.riak.get("events", "events", key.format()).value
    served = fork_server.run_chunks(
        [([sub], blob, key)], decode_limits=DecodeLimits(), cap=DEFAULT_CAP, where="test"
    )
    ((outcome,),) = (chunk.outcomes for chunk in served.chunks)
    assert outcome is not None and outcome.ok, (served, outcome)
    return stored_value(sub, outcome)


def _status_when(stack: Stack, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    # Each worker writes its statistics snapshot every 0.2 s: wait for them.
    deadline = time.monotonic() + 20
    status: dict[str, Any] = stack.companion.json("/v1/status")
    while not ready(status) and time.monotonic() < deadline:
        time.sleep(0.1)
        status = stack.companion.json("/v1/status")
    return status


@pytest.mark.parametrize("isolation", ["chunk", "substream"])
def test_queries_run_beside_the_child_with_its_records_and_without_a_fork(
    stack_factory: Callable[..., Stack], fork_server: ForkServer, isolation: str
) -> None:
    files = {f"{name}.py": (EXAMPLES / f"{name}.py").read_text() for name in QUERIES}
    files["web_5xx.py"] = (EXAMPLES / "web_5xx.py").read_text()  # a Python plugin
    stack = stack_factory(plugins=files, companion={"isolation": isolation})
    plugins = _plugins(stack)
    keys = stack.write_epoch(EPOCH, "dc1", _chunks(31))
    web_keys = [k for k in keys if k.type == "web"]
    reads = {"web_5xx": web_keys, "web_5xx_q": web_keys, "url_latency_q": web_keys}
    reads["event_counts_q"] = keys
    for name, expect in reads.items():
        for key, record in stack.wait_results(name, expect).items():
            assert record.status == "ok", (name, key, record.error)
            # The same record as a sandboxed child's, byte for byte.
            expected = _childs_record(fork_server, stack, plugins[name], key)
            assert _stored(stack, name, key) == expected, (name, key)
    assert any((r := stack.result("web_5xx_q", k)) and r.result for k in web_keys), "5xx rows"

    # Counted as any run: runs, ok, wall time; the walk's own stage.
    status = _status_when(
        stack, lambda s: s["substreams"].get("event_counts_q", {}).get("ok", 0) >= 4
    )
    assert status["substreams"]["event_counts_q"]["runs"] == 4
    assert status["substreams"]["event_counts_q"]["ok"] == 4
    assert status["substreams"]["web_5xx_q"]["ok"] == 2
    assert status["substreams"]["web_5xx_q"]["p99_ms"] is not None
    assert status["substreams"]["web_5xx"]["ok"] == 2
    assert status["stages_s"]["queries"] > 0

    # No process can be made: the query plugins' results are still stored ok, with the
    # child's records (an lb or cron chunk has only event_counts_q: nothing to fork);
    # the Python plugin's runs end "sandbox: fork failed".
    master = stack.companion.pid
    assert master is not None
    wait_for(lambda: len(children_of(master)) == 2)
    workers = children_of(master)
    servers: list[int] = []
    if isolation == "chunk":  # each worker's fork server forks the children: refused too
        servers = fork_servers_of(workers)
    with forks_refused(workers + servers):
        keys = stack.write_epoch(EPOCH + 1, "dc1", _chunks(32))
        web_keys = [k for k in keys if k.type == "web"]
        for key, record in stack.wait_results("web_5xx", web_keys).items():
            assert record.status == "error", (key, record)
            assert (record.error or "").startswith("sandbox: fork failed"), record.error
        results = {
            name: stack.wait_results(name, web_keys if name != "event_counts_q" else keys)
            for name in QUERIES
        }
    for name, found in results.items():
        for key, record in found.items():
            assert record.status == "ok", (name, key, record.error)
            expected = _childs_record(fork_server, stack, plugins[name], key)
            assert _stored(stack, name, key) == expected, (name, key)
    # The failures were the machine's: not counted against the Python plugin.
    assert not list((stack.root / "state" / "disabled").glob("*.json"))
