"""The operator's commands against one running stack (``riak-events dev up --detach``):
``status``, ``chunk get/ls``, ``metadata get``, ``sereal decode`` of a stored blob,
``substream status/enable/disable``; and ``dev status``/``dev down`` of a stack of their
own (devstack/DESIGN.md, promises 3-4)."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.state import read_state
from devstack.testing import group_alive, riak_events, run_dev
from eventstore.blob import pack_blob
from eventstore.process_harness import environment_without
from eventstore.riak import NotFound, RiakClient
from relocator.producer import TcpEmitter
from relocator.testing import ZooKeeperProcess

pytestmark = pytest.mark.integration

BOOM = """
from substreams import substream

@substream(name="boom", types=["boom*"])
def boom(events, ctx):
    raise RuntimeError("boom on purpose")
"""


@dataclass
class Running:
    data_dir: Path
    endpoints: dict[str, Any]
    dc: str
    epoch: int
    events: list[dict[str, Any]]
    zookeeper: str
    zk_root: str


def cli(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``riak-events ARGS`` to its end, output captured."""
    return subprocess.run(
        [riak_events(), *args],
        env=environment_without(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def _wait(what: str, ready: Any, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = ready()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperProcess
) -> Iterator[Running]:
    """One detached dev stack for the module (the session's ZooKeeper), with events of
    type ``probe`` stored and substream ``boom`` disabled by its node after failing."""
    root = tmp_path_factory.mktemp("operator")
    plugins = root / "plugins"
    plugins.mkdir()
    (plugins / "boom.py").write_text(BOOM)
    data_dir = root / "dev"
    zk_root = f"/t-{uuid.uuid4().hex[:12]}"
    up = run_dev("up", "--detach", "--free-ports", "--data-dir", str(data_dir),
                 "--plugin-dir", str(plugins), "--zookeeper", zookeeper_server.hosts,
                 "--zk-root", zk_root)  # fmt: skip
    assert up.returncode == 0, up.stderr + up.stdout
    try:
        state = read_state(data_dir)
        assert state is not None and state["phase"] == "running"
        endpoints = state["endpoints"]
        assert "status page" in up.stdout and endpoints["status_page"] in up.stdout
        dc = f"d{uuid.uuid4().hex[:8]}"
        epoch = int(time.time())
        events = [{"id": i, "url": f"/p/{i}", "tags": ["a", "b"]} for i in range(5)]
        host, port = endpoints["relocator_tcp"].rsplit(":", 1)
        emitter = TcpEmitter(host, int(port), dc=dc)
        for event in events:
            emitter.emit(event, "probe", "", epoch=epoch)
        for i in range(6):  # six chunks that boom fails on: disabled after five
            emitter.emit({"id": i}, f"boom{i}", "", epoch=epoch)
        assert emitter.flush(20.0)
        emitter.close()
        with RiakClient([endpoints["riak"]]) as riak:

            def stored() -> bool:
                try:
                    riak.get("epochs", "epochs", f"{epoch}-{dc}")
                except NotFound:
                    return False
                return True

            _wait("the epoch's metadata", stored)

        def disabled() -> bool:
            view = httpx.get(endpoints["companion"] + "/v1/status", timeout=5).json()
            return "boom" in view.get("disabled", {})

        _wait("boom disabled by its node", disabled)
        yield Running(data_dir, endpoints, dc, epoch, events, zookeeper_server.hosts, zk_root)
    finally:
        down = run_dev("down", "--data-dir", str(data_dir))
        if down.returncode != 0:
            print(down.stdout, down.stderr)


def test_status_reports_every_daemon_and_the_disabled_substream(stack: Running) -> None:
    e = stack.endpoints
    out = cli("status", "--zookeeper", stack.zookeeper, "--zk-root", stack.zk_root,
              "--relocator", e["relocator_ops"], "--json")  # fmt: skip
    report = json.loads(out.stdout)
    (node,) = report["nodes"]  # found through the companion's live znode
    assert node["url"] == e["riak"] and node["up"] and node["kind"] == "devnode"
    assert node["hook"]["sent_total"] >= 1
    (companion,) = report["companions"]
    assert companion["url"] == e["companion"] and companion["source"].startswith("zookeeper")
    boom = companion["substreams"]["boom"]
    assert boom["state"] == "disabled" and boom["disabled"]["reason"]
    assert set(companion["substreams"]) >= {"boom", "web_5xx", "event_counts"}
    reloc = next(r for r in report["relocators"] if r["url"] == e["relocator_ops"])
    assert reloc["up"] and reloc["backlog"] == {"devnode": 0}
    assert reloc["lag"]["mean_s"] is not None
    assert report["zookeeper"]["ok"] and report["zookeeper"]["relocators"]
    # Something is wrong (boom disabled): exit 1, one line per problem on stderr.
    assert out.returncode == 1
    assert f"problem: companion {e['companion']}: substream boom disabled" in out.stderr
    text = cli("status", "--node", e["riak"], "--companion", e["companion"])
    assert "boom" in text.stdout and "disabled" in text.stdout and "hook: " in text.stdout
    assert "Traceback" not in text.stderr


def test_status_names_what_is_down(stack: Running) -> None:
    out = cli("status", "--node", stack.endpoints["companion"], "--timeout-s", "2")
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"problem: node {stack.endpoints['companion']}: does not answer as Riak "
        "(GET /ping: HTTP 404)"
    ]


def test_chunk_and_metadata_commands_print_what_is_stored(stack: Running, tmp_path: Path) -> None:
    node = ["--node", stack.endpoints["riak"]]
    meta = cli("metadata", "get", str(stack.epoch), stack.dc, *node, "--json")
    assert meta.returncode == 0, meta.stderr
    report = json.loads(meta.stdout)
    probe_keys = [k for k in report["chunks"] if ":probe:" in k]
    assert report["key"] == f"{stack.epoch}-{stack.dc}" and len(report["chunks"]) == 7
    listing = cli("chunk", "ls", str(stack.epoch), stack.dc, *node)
    assert listing.stdout.split() == report["chunks"]
    events = [
        json.loads(line)
        for key in probe_keys
        for line in cli("chunk", "get", key, *node).stdout.splitlines()
    ]
    assert sorted(events, key=lambda ev: ev["id"]) == stack.events
    # The stored blob, checksum postfix and all, decodes with `sereal decode`.
    blob = tmp_path / "chunk.blob"
    raw = subprocess.run([riak_events(), "chunk", "get", probe_keys[0], *node, "--raw"],
                         capture_output=True, check=True, env=environment_without())  # fmt: skip
    blob.write_bytes(raw.stdout)
    decoded = cli("sereal", "decode", str(blob))
    assert decoded.returncode == 0, decoded.stderr
    assert json.loads(decoded.stdout) == json.loads(
        "[" + cli("chunk", "get", probe_keys[0], *node).stdout.strip().replace("\n", ",") + "]"
    )


def test_chunk_commands_fail_in_one_line(stack: Running, tmp_path: Path) -> None:
    node = ["--node", stack.endpoints["riak"]]
    missing = cli("chunk", "get", f"1:{stack.dc}:web::0", *node)
    assert missing.returncode == 3
    assert missing.stderr.strip() == f"no chunk 1:{stack.dc}:web::0 (bucket type events)"
    no_epoch = cli("metadata", "get", "2026-01-01T00:00:00Z", stack.dc, *node)
    assert no_epoch.returncode == 3 and no_epoch.stderr.count("\n") == 1
    wrong_port = cli("chunk", "ls", str(stack.epoch), stack.dc, "--node",
                     stack.endpoints["companion"])  # fmt: skip
    assert wrong_port.returncode == 1 and "does not answer as Riak" in wrong_port.stderr
    assert wrong_port.stderr.count("\n") == 1
    # A corrupted stored blob: the checksum says so, nothing is decoded.
    corrupt = bytearray(pack_blob([{"id": 1, "pad": "x" * 50}]))
    corrupt[8] ^= 0xFF
    (tmp_path / "bad.blob").write_bytes(bytes(corrupt))
    bad = cli("sereal", "decode", str(tmp_path / "bad.blob"))
    assert bad.returncode == 1 and "xxh3_64" in bad.stderr and bad.stdout == ""


def test_substream_status_and_enable(stack: Running) -> None:
    where = ["--zookeeper", stack.zookeeper, "--zk-root", stack.zk_root]
    before = cli("substream", "status", "boom", *where, "--json")
    assert before.returncode == 0, before.stderr
    (node,) = json.loads(before.stdout)["companions"]
    assert node["companion"] == stack.endpoints["companion"]
    assert node["state"] == "disabled" and sum(node["failures"].values()) >= 5
    assert "boom on purpose" in node["last_error"]
    enabled = cli("substream", "enable", "boom", *where)
    assert enabled.returncode == 0, enabled.stderr
    assert enabled.stdout.strip() == f"{stack.endpoints['companion']}: boom enabled"
    after = cli("substream", "status", "boom", "--companion", stack.endpoints["companion"])
    assert after.returncode == 0 and "disabled" not in after.stdout
    unknown = cli("substream", "status", "no_such", *where)
    assert unknown.returncode == 3


def test_substream_disable(stack: Running) -> None:
    where = ["--companion", stack.endpoints["companion"]]
    disabled = cli("substream", "disable", "web_5xx", *where)
    assert disabled.returncode == 0, disabled.stderr
    status = cli("substream", "status", "web_5xx", *where, "--json")
    assert json.loads(status.stdout)["companions"][0]["state"] == "disabled"
    cli("substream", "enable", "web_5xx", *where)


def test_dev_status_and_down(tmp_path: Path) -> None:
    data_dir = tmp_path / "dev"
    up = run_dev("up", "--detach", "--free-ports", "--no-zookeeper", "--data-dir", str(data_dir))
    assert up.returncode == 0, up.stderr
    status = run_dev("status", "--data-dir", str(data_dir), "--json")
    report = json.loads(status.stdout)
    assert status.returncode == 0, report
    assert report["healthy"] and report["phase"] == "running"
    assert {n: p["health"] for n, p in report["processes"].items()} == {
        "devnode": "ok", "companion": "ok", "relocator": "ok"
    }  # fmt: skip
    pids = [report["supervisor"]["pid"], *(p["pid"] for p in report["processes"].values())]
    down = run_dev("down", "--data-dir", str(data_dir))
    assert down.returncode == 0 and "stopped" in down.stdout and down.stderr == ""
    assert [pid for pid in pids if group_alive(pid)] == []
    gone = run_dev("status", "--data-dir", str(data_dir))
    assert gone.returncode == 3 and "no dev stack runs" in gone.stderr


def test_dev_up_refuses_ports_in_use(tmp_path: Path) -> None:
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("127.0.0.1", 8098))
        holder.listen()
    except OSError:
        pass  # something else already holds it: the same refusal is expected
    try:
        out = run_dev("up", "--no-zookeeper", "--data-dir", str(tmp_path / "dev"))
    finally:
        holder.close()
    assert out.returncode == 1
    assert "8098 (devnode)" in out.stderr and "--free-ports" in out.stderr
    assert out.stderr.count("\n") == 1 and out.stdout == ""
    assert read_state(tmp_path / "dev") is None
