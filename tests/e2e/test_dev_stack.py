"""``riak-events dev up``: the whole local stack from one command, used as a plugin author
would (the example queries dropped in give their Python twins' results), then stopped
with Ctrl-C leaving no process behind (fleet/devstack/DESIGN.md, promises 1-3).

One stack serves the module: the Ctrl-C test ends it, so it comes last.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from companion.testing import wait_for
from consumer_lib import EventsClient
from fleet.devstack.state import read_ended, read_state
from fleet.devstack.testing import DevUpProcess, group_alive
from relocator.producer import TcpEmitter
from tests.e2e import twins

PLUGIN = """
from substreams import substream

@substream(name="dev_probe", types=["probe"])
def dev_probe(events, ctx):
    return {"ids": sorted(e["id"] for e in events)}
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevUpProcess]:
    """``dev up`` with a plugins directory of our own (``dev_probe.py`` in it), running."""
    root = tmp_path_factory.mktemp("devstack")
    plugins = root / "my-plugins"
    plugins.mkdir()
    (plugins / "dev_probe.py").write_text(PLUGIN)
    running = DevUpProcess(root / "dev", "--plugin-dir", str(plugins))
    try:
        running.start()
        yield running
    finally:
        running.stop()


def plugin_dir(stack: DevUpProcess) -> Path:
    (directory,) = stack.state["endpoints"]["plugin_dirs"]
    return Path(directory)


def test_the_example_queries_dropped_in_give_their_python_twins_results(
    stack: DevUpProcess,
) -> None:
    """Issue 23's "Done when", on the dev stack: the ``*_q.py`` twins dropped into the
    plugins directory (hot reloaded), the load generator's events sent, and each twin's
    results over the range, all written by the companion, equal chunk by chunk (the
    query's adapted to its function's shape; ``url_latency_q`` also merged over the
    range)."""
    endpoints = stack.state["endpoints"]
    twins.drop_queries(plugin_dir(stack))
    wait_for(
        lambda: twins.loaded_by_every_worker(endpoints["companion"]),
        60,
        "the twins loaded by every companion worker",
        interval_s=0.5,
    )
    dc = f"q{uuid.uuid4().hex[:8]}"
    host, port = endpoints["relocator_tcp"].rsplit(":", 1)
    epochs = twins.send(host, int(port), dc, events=3000)
    with EventsClient([endpoints["riak"]], plugin_dirs=[plugin_dir(stack)]) as client:
        try:
            results = twins.wait_served(client, dc, epochs, 3000)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{stack.log_text()[-6000:]}") from None
    assert twins.disagreements(results) == []
    assert twins.merged_latency_disagreements(results) == []
    compared = twins.summary(results)
    print(f"twins compared, (chunks, rows) per query: {compared}")
    assert all(chunks >= 3 and rows > 0 for chunks, rows in compared.values()), compared


# Last: it ends the module's stack.
def test_dev_up_runs_the_pipeline_and_ctrl_c_stops_every_process(stack: DevUpProcess) -> None:
    try:
        state = stack.state
        endpoints = state["endpoints"]
        # ZooKeeper from Debian's package, started by the stack itself.
        assert set(state["processes"]) == {"zookeeper", "devnode", "companion", "relocator"}
        dc = f"d{uuid.uuid4().hex[:8]}"
        host, port = endpoints["relocator_tcp"].rsplit(":", 1)
        start = int(time.time()) - 1
        emitter = TcpEmitter(host, int(port), dc=dc)
        for i in range(3):
            assert emitter.emit({"id": i, "url": "/x"}, "probe", "")
        assert emitter.flush(20.0), "the relocator did not acknowledge the events"
        emitter.close()
        result = None
        with EventsClient([endpoints["riak"]], use_entry_points=False) as client:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and result is None:
                found = list(client.substream("dev_probe", dc, start, int(time.time()) + 1,
                                              fallback="off"))  # fmt: skip
                result = next((r for r in found if r.served == "server"), None)
                time.sleep(0.3)
        assert result is not None, stack.log_text()[-8000:]
        assert result.result == {"ids": [0, 1, 2]}
        banner = stack.log_text()
        assert f"status page {endpoints['status_page']}" in banner
        assert "companion | " in banner and "devnode   | " in banner  # one merged log
        groups = [info["pid"] for info in state["processes"].values()]
        leader = stack.pid
        assert leader is not None
        assert stack.interrupt() == 0, stack.log_text()[-5000:]
    finally:
        stack.stop()
    # Nothing is left: not the supervisor's group, nor any daemon's (gunicorn workers,
    # sandbox children and the JVM are in those groups).
    survivors = [pgid for pgid in [leader, *groups] if group_alive(pgid)]
    assert survivors == []
    assert read_state(stack.data_dir) is None
    assert "dev       | stopped" in stack.log_text()
    # Why it ended stays for `dev status`.
    ended = read_ended(stack.data_dir)
    assert ended is not None and ended["ended"]["reason"] == "SIGINT (Ctrl-C)"
    assert ended["ended"]["exit_status"] == 0
