"""Each companion worker's fork server (``companion/forkserver.py``), with real gunicorn
workers: killed -9 with the worker, nothing the worker started survives; the server
killed -9 mid-run, the chunk's results name the cause and the next chunk gets a new
server."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path

from companion.testing import Stack, children_of, process_alive, wait_for
from eventstore.names import ChunkKey

EPOCH = 1_700_016_000

# Runs in the shared child (quarantine off: no lane, no fork in the worker); its run
# outlives every wait here (the cap raised to let it), so only a kill ends it in time.
SLEEPY = """
import time
from substreams import substream

@substream(name="sleepy", timeout_s=30)
def sleepy(events, ctx):
    if events and events[0].get("sleep"):
        time.sleep(25)
    return len(events)
"""


COMPANION = {"workers": 1, "threads": 1, "quarantine": False, "timeout_cap_s": 60.0}


def sleeping_child(stack: Stack, epoch: int) -> tuple[int, int, int, ChunkKey]:
    """Write a chunk whose run sleeps; returns (worker, its fork server, the child
    running the plugin, the chunk) once the child runs."""
    master = stack.companion.pid
    assert master is not None
    (worker,) = wait_for(lambda: children_of(master))
    (server,) = wait_for(lambda: children_of(worker))
    (key,) = stack.write_epoch(epoch, "dc1", {("web", "main", 0): [{"sleep": True}]})
    (child,) = wait_for(lambda: forks_of(server))
    return worker, server, child, key


def forks_of(server: int) -> list[int]:
    """The server's children that are forks of it (the sandboxed runs; not, say, the
    ``ldconfig`` its start runs to find libseccomp)."""
    try:
        own = Path(f"/proc/{server}/cmdline").read_bytes()
    except OSError:
        return []
    forks = []
    for pid in children_of(server):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes() == own:
                forks.append(pid)
    return forks


def test_a_worker_killed_9_leaves_neither_its_fork_server_nor_a_child_running(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(plugins={"sleepy.py": SLEEPY}, companion=COMPANION)
    worker, server, child, _ = sleeping_child(stack, EPOCH)
    os.kill(worker, signal.SIGKILL)
    # PR_SET_PDEATHSIG: the server dies with the worker's thread that started it, the
    # child with the server's thread that forked it; nobody waits for the 25 s sleep.
    wait_for(lambda: not process_alive(server) and not process_alive(child), timeout_s=10)


def test_a_fork_server_killed_9_mid_run_marks_the_chunk_and_the_next_gets_a_new_one(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(plugins={"sleepy.py": SLEEPY}, companion=COMPANION)
    worker, server, child, key = sleeping_child(stack, EPOCH + 1)
    os.kill(server, signal.SIGKILL)
    (record,) = stack.wait_results("sleepy", [key], timeout_s=10).values()
    assert record.status == "error", record
    assert record.error is not None
    assert record.error.startswith("sandbox: fork server died"), record.error
    wait_for(lambda: not process_alive(child), timeout_s=10)  # it died with the server
    # Not the plugin's failure: the next chunk runs it, in a new server of the worker.
    after = stack.write_epoch(EPOCH + 2, "dc1", {("web", "main", 0): [{}, {}]})
    (record,) = stack.wait_results("sleepy", after).values()
    assert record.status == "ok", record
    (new_server,) = children_of(worker)
    assert new_server != server
