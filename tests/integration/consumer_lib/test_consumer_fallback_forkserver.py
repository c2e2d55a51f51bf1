"""The fallback's fork server (``consumer_lib/forkserver.py``), through a real devnode:
killed -9 mid-run, the read in flight returns marked results and the next read starts
another; it ends with ``EventsClient.close()`` and with its caller; threads share it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from consumer_helpers import client_with_plugin, write_epoch
from prometheus_client import REGISTRY

from consumer_lib import EventsClient, SubstreamResult
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient
from fleet.harness import children_of

E0 = 1_700_000_800
CHUNKS = 6

PLUGIN = """
import time

from substreams import substream

@substream(name="{name}_wait", types=["web"], timeout_s=20)
def wait(events, ctx):
    time.sleep(15)
    return len(events)

@substream(name="{name}_count", types=["web"])
def count(events, ctx):
    return {{"n": len(events), "chunk": ctx.chunk, "first": events[0]["i"]}}
"""


def children(of: int) -> set[int]:
    """The live (not zombie) child processes of ``of``, from /proc."""
    return set(children_of(of))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(what: str, condition: object, timeout_s: float = 30.0) -> None:
    """Poll ``condition()`` until true; fails naming ``what`` after ``timeout_s``."""
    assert callable(condition)
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def starts() -> float:
    return REGISTRY.get_sample_value("consumer_fallback_server_starts_total") or 0.0


Setup = tuple[EventsClient, str, list[ChunkKey], Path]


@pytest.fixture
def setup(tmp_path: Path, riak: RiakClient, dc: str) -> Iterator[Setup]:
    name = f"fs_{dc}"
    spec = {("web", "app"): [[{"i": 10 * c + i} for i in range(c + 1)] for c in range(CHUNKS)]}
    keys = write_epoch([riak], E0, dc, spec)
    source = PLUGIN.format(name=name)
    with client_with_plugin(tmp_path, riak, "fs.py", source, concurrency=CHUNKS) as (client, path):
        yield client, name, keys, path.parent


def expected(keys: list[ChunkKey]) -> list[tuple[str, str | None, object]]:
    return [("fallback", "ok", {"n": c + 1, "chunk": c, "first": 10 * c}) for c in range(len(keys))]


def test_the_fork_server_killed_mid_run_gives_marked_results_and_the_next_read_works(
    setup: Setup, dc: str
) -> None:
    client, name, keys, _ = setup
    got: list[SubstreamResult] = []
    reading = threading.Thread(
        target=lambda: got.extend(client.substream(f"{name}_wait", dc, E0, E0 + 1))
    )
    reading.start()
    try:
        wait_for("the fork server", lambda: client.fallback_server.pid is not None)
        server = client.fallback_server.pid
        assert server is not None
        # chunks' sandboxed children are running (one connection each; the plugin's
        # 15 s sleep is capped at the default 5 s: kill before that)
        wait_for("a chunk's child", lambda: len(children(server)) >= 1)
        with contextlib.suppress(AssertionError):
            wait_for("every chunk's child", lambda: len(children(server)) == CHUNKS, 1.0)
        runs = children(server)
        os.kill(server, signal.SIGKILL)
    finally:
        reading.join(timeout=60)
    assert not reading.is_alive()  # returned; no wait on the dead server hung
    assert [r.key for r in got] == keys
    died = [r for r in got if r.fallback_status == "error"]
    assert len(died) >= len(runs)  # at least every chunk whose child we saw
    for r in got:
        assert r.served == "gap", r
        if r.fallback_status == "error":
            assert r.error is not None and "fork server died" in r.error
        else:  # not sent before the kill: ran on the next server, up to the 5 s cap
            assert r.fallback_status == "timeout", r
    # its children died with it (PR_SET_PDEATHSIG), not left running their 15 s
    wait_for("the children of the killed server to die", lambda: not any(map(alive, runs)))
    again = list(client.substream(f"{name}_count", dc, E0, E0 + 1))
    assert [(r.served, r.fallback_status, r.result) for r in again] == expected(keys)
    assert client.fallback_server.pid not in (None, server)


def test_no_process_is_left_after_close(setup: Setup, dc: str) -> None:
    client, name, keys, _ = setup
    got = list(client.substream(f"{name}_count", dc, E0, E0 + 1))
    assert [(r.served, r.fallback_status, r.result) for r in got] == expected(keys)
    server = client.fallback_server.pid
    assert server is not None and alive(server)
    client.close()
    assert not alive(server)
    assert server not in children(os.getpid())
    assert client.fallback_server.pid is None


CALLER = """
import sys, time
from consumer_lib import EventsClient, SubstreamResult
client = EventsClient([sys.argv[1]], plugin_dirs=[sys.argv[2]], use_entry_points=False)
got = list(client.substream(sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[5]) + 1))
assert all(r.served == "fallback" for r in got), got
print(client.fallback_server.pid, flush=True)
time.sleep(600)
"""


def test_the_fork_server_dies_with_its_caller(setup: Setup, riak: RiakClient, dc: str) -> None:
    _, name, _, directory = setup
    args = [riak.nodes.nodes[0], str(directory), f"{name}_count", dc, str(E0)]
    with subprocess.Popen(
        [sys.executable, "-c", CALLER, *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    ) as caller:
        try:
            assert caller.stdout is not None
            server = int(caller.stdout.readline())
            assert alive(server)
            caller.kill()  # SIGKILL: no close(), no atexit
            caller.wait()
            wait_for("the orphaned fork server to die", lambda: not alive(server))
        finally:
            caller.kill()


def test_threads_read_through_one_fork_server_at_once(setup: Setup, dc: str) -> None:
    client, name, keys, _ = setup
    before = starts()

    def read(_: int) -> list[tuple[str, str | None, object]]:
        got = client.substream(f"{name}_count", dc, E0, E0 + 1, fallback="always")
        return [(r.served, r.fallback_status, r.result) for r in got]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(read, range(8)))
    assert results == [expected(keys)] * 8
    assert starts() == before + 1  # one server, all requests (CHUNKS connections)
