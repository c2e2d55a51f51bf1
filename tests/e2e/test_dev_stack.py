"""``riak-events dev up``: the whole local stack from one command, used as a plugin author
would, then stopped with Ctrl-C leaving no process behind (fleet/devstack/DESIGN.md, promises
1-3)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from consumer_lib import EventsClient
from fleet.devstack.state import read_ended, read_state
from fleet.devstack.testing import DevUpProcess, group_alive
from relocator.producer import TcpEmitter

PLUGIN = """
from substreams import substream

@substream(name="dev_probe", types=["probe"])
def dev_probe(events, ctx):
    return {"ids": sorted(e["id"] for e in events)}
"""


def test_dev_up_runs_the_pipeline_and_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    plugins = tmp_path / "my-plugins"
    plugins.mkdir()
    (plugins / "dev_probe.py").write_text(PLUGIN)
    stack = DevUpProcess(tmp_path / "dev", "--plugin-dir", str(plugins))
    try:
        stack.start()
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
    assert read_state(tmp_path / "dev") is None
    assert "dev       | stopped" in stack.log_text()
    # Why it ended stays for `dev status`.
    ended = read_ended(tmp_path / "dev")
    assert ended is not None and ended["ended"]["reason"] == "SIGINT (Ctrl-C)"
    assert ended["ended"]["exit_status"] == 0
