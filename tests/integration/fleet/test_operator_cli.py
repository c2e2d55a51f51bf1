"""The operator's commands against one running stack (``riak-events dev up --detach``):
``status``, ``chunk get/ls``, ``metadata get``, ``sereal decode`` of a stored blob,
``substream status/enable/disable``, the context ``dev up`` writes; and ``dev status``,
``dev stop|start|restart``, ``dev down`` and the ports check of stacks of their own
(fleet/devstack/DESIGN.md, promises 3-4, 10-13)."""

from __future__ import annotations

import json
import os
import signal
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

from devnode.testing import DevnodeProcess, free_port
from eventstore.blob import pack_blob
from eventstore.riak import NotFound, RiakClient
from fleet.devstack.stack import Ports, ports_in_use
from fleet.devstack.state import read_state
from fleet.devstack.testing import context_file_for, group_alive, riak_events, run_dev
from fleet.harness import environment_without
from relocator.producer import TcpEmitter
from relocator.testing import ZooKeeperProcess

BOOM = """
from substreams import substream

@substream(name="boom", types=["boom*"])
def boom(events, ctx):
    raise RuntimeError("boom on purpose")
"""


#: Fails on one chunk in five (ids 0, 5, 10, 15 of 20), never five in a row: it stays
#: enabled, and only its failure rate shows it.
FLAKY = """
from substreams import substream

@substream(name="flaky", types=["flaky*"])
def flaky(events, ctx):
    if events[0]["id"] % 5 == 0:
        raise RuntimeError("flaky on purpose")
    return {"n": len(events)}
"""

#: A plugin file that does not load.
BROKEN = 'raise RuntimeError("broken on purpose")\n'

#: Published to the registry unsigned: every companion rejects it.
UNSIGNED = """
from substreams import substream

@substream(name="unsigned_probe", types=["probe"])
def unsigned_probe(events, ctx):
    return len(events)
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
    context: Path


def cli(
    *args: str, timeout_s: float = 60.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``riak-events ARGS`` to its end, output captured; no context file unless ``env``
    names one (``RIAK_EVENTS_CONTEXT``)."""
    return subprocess.run(
        [riak_events(), *args],
        env={**environment_without(), "RIAK_EVENTS_CONTEXT": "", **(env or {})},
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
    (plugins / "flaky.py").write_text(FLAKY)
    (plugins / "broken.py").write_text(BROKEN)
    (root / "unsigned_probe.py").write_text(UNSIGNED)
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
        flaky = TcpEmitter(host, int(port), dc=f"{dc}f")
        for i in range(20):  # twenty chunks, four of which flaky fails on
            flaky.emit({"id": i}, f"flaky{i}", "", epoch=epoch)
        assert flaky.flush(20.0)
        flaky.close()
        published = cli("substream", "publish", str(root / "unsigned_probe.py"),
                        "--zookeeper", zookeeper_server.hosts, "--zk-root", zk_root)  # fmt: skip
        assert published.returncode == 0, published.stderr
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

        def flaky_ran_and_unsigned_rejected() -> bool:
            view = httpx.get(endpoints["companion"] + "/v1/status", timeout=5).json()
            flaky = view.get("substreams", {}).get("flaky", {})
            done = flaky.get("runs", 0) + flaky.get("shed", 0)  # a new plugin's lane may shed
            return done >= 20 and bool(view.get("registry", {}).get("rejected"))

        _wait("flaky's 20 chunks and the unsigned plugin rejected", flaky_ran_and_unsigned_rejected)
        yield Running(data_dir, endpoints, dc, epoch, events, zookeeper_server.hosts, zk_root,
                      context_file_for(data_dir))  # fmt: skip
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
    assert node["hook"]["posted_total"] >= 1
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


def test_status_reports_failing_rates_load_failures_and_rejected_plugins(stack: Running) -> None:
    c = stack.endpoints["companion"]
    out = cli("status", "--companion", c, "--json")
    assert out.returncode == 1
    problems = out.stderr.splitlines()
    flaky = json.loads(out.stdout)["companions"][0]["substreams"]["flaky"]
    failed, runs = flaky["window"]["failures"], flaky["window"]["runs"]
    # Some, not all, of its runs failed (a shed result is not a failure of the plugin).
    assert flaky["state"] == "failing" and 0 < failed < runs, flaky
    assert failed == flaky["failures"]["exception"]
    (rate,) = [p for p in problems if "substream flaky" in p]
    assert rate.startswith(
        f"problem: companion {c}: substream flaky failing: {failed} of {runs} runs failed in "
        f"the last 10m ({failed / runs:.1%} > 1.0%); last error: exception: RuntimeError: "
        "flaky on purpose"
    ), rate
    (broken,) = [p for p in problems if "broken.py" in p]
    assert broken.startswith(f"problem: companion {c}: plugin ")
    assert "failed to load" in broken and "broken on purpose" in broken
    (rejected,) = [p for p in problems if "unsigned_probe" in p]
    assert rejected.startswith(f"problem: companion {c}: registry plugin unsigned_probe")
    assert "rejected" in rejected
    # The window and the rate are options: a rate of 50% tolerates flaky's 20%.
    tolerant = cli("status", "--companion", c, "--max-failure-rate", "0.5")
    assert "substream flaky" not in tolerant.stderr and "broken.py" in tolerant.stderr
    assert "flaky    " in tolerant.stdout and "ok" in tolerant.stdout


def test_commands_read_the_context_dev_up_wrote(stack: Running) -> None:
    e = stack.endpoints
    context = {"RIAK_EVENTS_CONTEXT": str(stack.context)}
    text = stack.context.read_text()
    assert e["riak"] in text and e["companion"] in text and e["relocator_ops"] in text
    # No address flag at all: the stack's, on its free ports, each labelled "context".
    out = cli("status", "--json", env=context)
    report = json.loads(out.stdout)
    assert (report["nodes"][0]["url"], report["nodes"][0]["source"]) == (e["riak"], "context")
    assert (report["companions"][0]["url"], report["companions"][0]["source"]) == (
        e["companion"], "context")  # fmt: skip
    assert report["relocators"][0]["source"] == "context"
    assert "(context)" in cli("status", env=context).stdout
    # Without a context: the documented defaults, labelled so (not "given").
    bare = cli("status", "--timeout-s", "0.5")
    assert "(default)" in bare.stdout and "(given)" not in bare.stdout
    # Every command: metadata get and read need no --node.
    meta = cli("metadata", "get", str(stack.epoch), stack.dc, "--json", env=context)
    assert meta.returncode == 0, meta.stderr
    read = cli("read", "--dc", stack.dc, "--start", str(stack.epoch),
               "--end", str(stack.epoch + 1), "--type", "probe", env=context)  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert len(read.stdout.splitlines()) == len(stack.events)
    # The global variable beats the file, a flag beats both.
    wrong = {**context, "RIAK_EVENTS_NODE": "http://127.0.0.1:1"}
    env_wins = cli("metadata", "get", str(stack.epoch), stack.dc, env=wrong)
    assert env_wins.returncode == 1 and "http://127.0.0.1:1" in env_wins.stderr
    flag_wins = cli("metadata", "get", str(stack.epoch), stack.dc, "--node", e["riak"], env=wrong)
    assert flag_wins.returncode == 0, flag_wins.stderr
    broken = cli("chunk", "ls", "1", "ams4", env={"RIAK_EVENTS_CONTEXT": str(stack.context) + "x"})
    assert broken.returncode == 1  # a missing file is no context: the default 8098
    (stack.context.parent / "bad.toml").write_text("nodes = 'not a list'\n")
    bad = cli("chunk", "ls", "1", "ams4",
              env={"RIAK_EVENTS_CONTEXT": str(stack.context.parent / "bad.toml")})  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
    assert "nodes must be a list of strings" in bad.stderr


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
    # --json: one JSON document, the same from both commands.
    as_json = cli("chunk", "get", probe_keys[0], *node, "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == json.loads(decoded.stdout)
    assert cli("sereal", "decode", str(blob), "--json").stdout == decoded.stdout


def test_a_reader_that_goes_away_ends_the_command_quietly(stack: Running) -> None:
    key = next(k for k in json.loads(cli("metadata", "get", str(stack.epoch), stack.dc, "--node",
               stack.endpoints["riak"], "--json").stdout)["chunks"] if ":probe:" in k)  # fmt: skip
    # `chunk get KEY | head -0`: the pipe is closed before the command writes.
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([riak_events(), "chunk", "get", key, "--node",
                               stack.endpoints["riak"]], stdout=writer, stderr=subprocess.PIPE,
                              env=environment_without(), timeout=60, check=False)  # fmt: skip
    finally:
        os.close(writer)
    assert done.stderr == b"" and done.returncode == 141


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
    assert wrong_port.stderr.count("\n") == 1 and "it is a companion" in wrong_port.stderr
    relocator = cli("chunk", "ls", str(stack.epoch), stack.dc, "--node",
                    stack.endpoints["relocator_ops"])  # fmt: skip
    assert "it is a relocator's ops port" in relocator.stderr, relocator.stderr
    assert "companion" not in relocator.stderr
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
    assert context_file_for(data_dir).exists()
    down = run_dev("down", "--data-dir", str(data_dir))
    assert down.returncode == 0 and "stopped" in down.stdout and down.stderr == ""
    assert [pid for pid in pids if group_alive(pid)] == []
    gone = run_dev("status", "--data-dir", str(data_dir))
    assert gone.returncode == 3 and "no dev stack runs" in gone.stderr
    assert gone.stderr.rstrip().endswith(": dev down")  # why the last stack ended
    assert not context_file_for(data_dir).exists()  # its addresses are no one's now


def test_dev_stop_start_restart_one_process_and_why_the_stack_ended(tmp_path: Path) -> None:
    data_dir = tmp_path / "dev"
    where = ("--data-dir", str(data_dir))
    up = run_dev("up", "--detach", "--free-ports", "--no-zookeeper", *where)
    assert up.returncode == 0, up.stderr
    try:
        stopped = run_dev("stop", "companion", *where)
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.startswith("companion stopped")
        time.sleep(1.5)  # a few rounds of the supervisor's watch: the stack runs on
        report = json.loads(run_dev("status", "--json", *where).stdout)
        assert report["running"] and report["phase"] == "running"
        assert {n: p["health"] for n, p in report["processes"].items()} == {
            "devnode": "ok", "companion": "stopped (dev stop)", "relocator": "ok"
        }  # fmt: skip
        assert httpx.get(report["endpoints"]["riak"] + "/ping", timeout=5).status_code == 200
        started = run_dev("start", "companion", *where)
        assert started.returncode == 0 and started.stdout.startswith("companion started (pid ")
        again = run_dev("start", "companion", *where)
        assert again.returncode == 1 and again.stderr.startswith("Error: companion already runs")
        old_pid = report["processes"]["relocator"]["pid"]
        restarted = run_dev("restart", "relocator", *where)
        assert restarted.returncode == 0, restarted.stderr
        status = run_dev("status", "--json", *where)
        report = json.loads(status.stdout)
        assert status.returncode == 0 and report["healthy"], report
        assert report["processes"]["relocator"]["pid"] != old_pid
        # A process that dies (not stopped with dev stop) still ends the stack; dev status
        # then says which and how.
        os.killpg(report["processes"]["companion"]["pid"], signal.SIGKILL)
        _wait("the stack to end", lambda: read_state(data_dir) is None, timeout_s=60)
        ended = run_dev("status", *where)
        assert ended.returncode == 3
        assert ended.stderr.rstrip().endswith(": companion exited with status -9"), ended.stderr
        assert "exit_status" in json.loads(run_dev("status", "--json", *where).stdout)["ended"]
        assert run_dev("stop", "relocator", *where).returncode == 3
    finally:
        run_dev("down", *where)


def test_ports_in_time_wait_are_free_as_the_daemons_bind_them(tmp_path: Path) -> None:
    """`dev down` then `dev up`: the ports still have connections in TIME_WAIT, which
    keep a bind without SO_REUSEADDR out but not the daemons."""
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen()
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server side closes first: its end goes to TIME_WAIT
    client.recv(1)
    client.close()
    server.close()
    ports = Ports(port, free_port(), free_port(), free_port(), free_port(), free_port())
    assert ports_in_use(ports, zookeeper=False) == []
    with DevnodeProcess(tmp_path / "data", port=port) as devnode:  # and a daemon binds it
        assert devnode.ping()
        assert ports_in_use(ports, zookeeper=False) == [("devnode", port)]


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
        detached = run_dev("up", "--detach", "--no-zookeeper", "--data-dir",
                           str(tmp_path / "dev"))  # fmt: skip
    finally:
        holder.close()
    assert out.returncode == 1
    assert "8098 (devnode)" in out.stderr and "--free-ports" in out.stderr
    assert out.stderr.count("\n") == 1 and out.stdout == ""
    assert read_state(tmp_path / "dev") is None
    # Detached: the same one line, "Error:" once.
    assert detached.returncode == 1 and detached.stderr == out.stderr
