"""The client-side fallback is bounded: plugins run in the companion's sandbox (a forked
child with the plugin's declared limits), through a real devnode.

A plugin that outlives its deadline (even one swallowing the soft alarm), a memory
bomb, a plugin that kills its own process: each read returns, at once, a gap whose
``fallback_status`` and ``error`` say why; the caller (this process) is unharmed, no
child is left behind, and the runs are counted in ``consumer_fallback_runs_total``. A
plugin the server disabled is reported ``disabled``, not run here. Stored values are
written exactly as the companion writes them (``substreams.results``; the disabled
marker as ``companion/worker.py`` stores it)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from consumer_helpers import client_with_plugin, write_epoch
from prometheus_client import REGISTRY

from consumer_lib import EventsClient
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient
from fleet.harness import children_of
from substreams.results import error_value
from substreams.testing import stubborn_sleeper_source

E0 = 1_700_000_400

PLUGIN = (
    """
import ctypes
import os
import time

from substreams import substream

"""
    + stubborn_sleeper_source("{name}_slow", 8.0)
    + """
# timeout_s=30: the memory limit is reached first, even on a loaded machine
@substream(name="{name}_bomb", types=["web"], memory_mb=64, timeout_s=30)
def bomb(events, ctx):
    blocks = []
    while True:
        blocks.append(bytearray(16 * 2**20))  # zero-filled: every page is touched

@substream(name="{name}_exit", types=["web"])
def leave(events, ctx):
    os._exit(3)

@substream(name="{name}_segv", types=["web"])
def segv(events, ctx):
    ctypes.string_at(0)

@substream(name="{name}_count", types=["web"])
def count(events, ctx):
    return {{"n": len(events), "chunk": ctx.chunk}}
"""
)


def runs(status: str) -> float:
    return REGISTRY.get_sample_value("consumer_fallback_runs_total", {"status": status}) or 0.0


def fallbacks(reason: str) -> float:
    return REGISTRY.get_sample_value("consumer_fallback_total", {"reason": reason}) or 0.0


def children(of: int | None = None) -> set[int]:
    """The live child processes of ``of`` (default: this process), from /proc."""
    return set(children_of(os.getpid() if of is None else of))


Setup = tuple[EventsClient, str, list[ChunkKey]]


@pytest.fixture
def setup(tmp_path: Path, riak: RiakClient, dc: str) -> Iterator[Setup]:
    name = f"hostile_{dc}"
    keys = write_epoch([riak], E0, dc, {("web", "app"): [[{"i": c}] for c in range(3)]})
    source = PLUGIN.format(name=name)
    with client_with_plugin(tmp_path, riak, "hostile.py", source, concurrency=4) as (client, _):
        yield client, name, keys


def test_a_plugin_sleeping_past_its_deadline_is_killed_and_the_read_returns_marked(
    setup: Setup, dc: str
) -> None:
    client, name, keys = setup
    before_children = children()
    before = runs("timeout")
    t0 = time.monotonic()
    got = list(client.substream(f"{name}_slow", dc, E0, E0 + 1))
    elapsed = time.monotonic() - t0
    assert [r.key for r in got] == keys
    for r in got:
        assert (r.served, r.reason, r.result, r.fallback_status) == (
            "gap",
            "missing",
            None,
            "timeout",
        )
        # killed by the parent at the deadline (the plugin swallowed the soft alarm)
        assert r.error is not None and r.error.startswith("fallback timeout: timeout: killed")
        assert "wall-clock limit 0.5s" in r.error
    # A bound, not a benchmark: without the sandbox each chunk takes the plugin's 8 s.
    assert elapsed < 4.0, elapsed
    assert runs("timeout") == before + len(keys)
    # the sandboxed children ran under the client's fork server, and none is left
    server = client.fallback_server.pid
    assert server is not None
    assert children() - {server} <= before_children
    assert children(server) == set()


def test_a_memory_bomb_or_a_dying_plugin_is_a_marked_gap_and_the_caller_lives_on(
    setup: Setup, dc: str
) -> None:
    client, name, keys = setup
    before = runs("killed")
    bombs = list(client.substream(f"{name}_bomb", dc, E0, E0 + 1))
    exits = list(client.substream(f"{name}_exit", dc, E0, E0 + 1))
    segvs = list(client.substream(f"{name}_segv", dc, E0, E0 + 1))
    good = list(client.substream(f"{name}_count", dc, E0, E0 + 1))
    assert {(r.served, r.fallback_status) for r in bombs + exits + segvs} == {("gap", "killed")}
    assert all(r.error and r.error.startswith("fallback killed: memory: ") for r in bombs)
    assert all(r.error and "exited with code 3" in r.error for r in exits)
    assert all(r.error and "SIGSEGV" in r.error for r in segvs)
    assert runs("killed") == before + 3 * len(keys)
    # the caller is intact: the next read of the same chunks works
    assert [(r.served, r.fallback_status, r.result) for r in good] == [
        ("fallback", "ok", {"n": 1, "chunk": c}) for c in range(len(keys))
    ]


def test_a_plugin_disabled_on_the_server_is_reported_disabled_not_run(
    setup: Setup, riak: RiakClient, dc: str
) -> None:
    client, name, keys = setup
    slow = client.plugins.get(f"{name}_slow")
    count = client.plugins.get(f"{name}_count")
    for sub in (slow, count):
        for key in keys[:2]:
            value = error_value("error", sub.name, sub.version, "disabled: on this node")
            riak.put("substreams", sub.name, key.format(), value)
    # keys[2] of count: disabled at another version: the local one is run (bounded)
    other = error_value("error", count.name, "0" * 16, "disabled: on this node")
    riak.put("substreams", count.name, keys[2].format(), other)
    before = (fallbacks("disabled"), runs("timeout"))
    t0 = time.monotonic()
    slow_got = list(client.substream(slow.name, dc, E0, E0 + 1))
    elapsed = time.monotonic() - t0
    count_got = list(client.substream(count.name, dc, E0, E0 + 1))
    assert [(r.served, r.reason, r.fallback_status) for r in slow_got[:2]] == [
        ("gap", "disabled", None)
    ] * 2
    assert all(r.error == "disabled: on this node" for r in slow_got[:2])
    assert (slow_got[2].reason, slow_got[2].fallback_status) == ("missing", "timeout")
    assert elapsed < 4.0, elapsed  # the two disabled chunks were not run: no 8 s sleeps
    assert [(r.served, r.reason, r.result) for r in count_got] == [
        ("gap", "disabled", None),
        ("gap", "disabled", None),
        ("fallback", "disabled", {"n": 1, "chunk": 2}),
    ]
    # only the other-version chunk and slow's missing one were run here
    assert (fallbacks("disabled"), runs("timeout")) == (before[0] + 1, before[1] + 1)
