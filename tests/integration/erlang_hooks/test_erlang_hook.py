"""The Erlang post-commit hook, compiled with erlc and run in a real ``erl`` node.

``make -C erlang_hooks test`` builds the modules and runs the EUnit suite (parsing,
bodies, queue, breaker, the shared ring vectors, hook + notifier). Then the compiled
modules run in an ``erl -noshell`` node driven over stdin (``test/riak_events_it_driver``):
the ring comes from ``tests/vectors/ring_preflists.json`` through the hook's ring
adapter, metadata objects go through ``riak_events_hook:postcommit/1`` exactly as Riak
would call it, and real HTTP servers (``http.server`` in threads) stand in for the
companions. Expected bodies are computed independently with ``eventstore.ring``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from eventstore.keygroup import KeyGroup
from eventstore.ring import Ring
from tests.integration.hook_receivers import Companion, HangingCompanion

ROOT = Path(__file__).resolve().parents[3]
HOOKS = ROOT / "erlang_hooks"
VECTORS = ROOT / "tests" / "vectors" / "ring_preflists.json"
NODES = ["dev1@127.0.0.1", "dev2@127.0.0.1", "dev3@127.0.0.1", "dev4@127.0.0.1"]
RING_SIZE = 64
N_VAL = 3
TIMEOUT_MS = 300
COOLDOWN_MS = 1500  # longer than a write with a timing-out POST
#: A put must hand off in far less than this, whatever the companions do.
PUT_BUDGET_US = 50_000


# -- Erlang terms -------------------------------------------------------------------------


def erl_binary(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return "<<" + ",".join(str(b) for b in raw) + ">>"


def erl_atom(name: str) -> str:
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def erl_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- companions -----------------------------------------------------------------------------


def dead_port() -> int:
    """A loopback port nothing listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- the erl node -------------------------------------------------------------------------


class HookNode:
    """An ``erl -noshell`` node running the compiled hook, driven line by line."""

    def __init__(self, log_path: Path) -> None:
        erl = shutil.which("erl")
        if erl is None:
            pytest.fail("erl is not installed (apt-get install erlang-nox)")
        self.log_path = log_path
        self._log = log_path.open("w")
        self.proc = subprocess.Popen(
            [
                erl,
                "-noshell",
                "-pa",
                "ebin",
                "-pa",
                "_build/test",
                "-s",
                "riak_events_it_driver",
                "main",
            ],
            cwd=HOOKS,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env={"PATH": "/usr/bin:/bin", "ERL_CRASH_DUMP_SECONDS": "0", "HOME": "/tmp"},
        )

    def call(self, term: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(term + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"erl exited; log:\n{self.log_path.read_text()[-5000:]}")
            if line.startswith("@@ "):
                reply: dict[str, Any] = json.loads(line[3:])
                return reply

    def env(self, **settings: str) -> None:
        pairs = ",".join(f"{{{key},{value}}}" for key, value in settings.items())
        self.call(f"{{env,[{pairs}]}}.")

    def put(self, key: str, siblings: list[str | tuple[str, str]]) -> int:
        """postcommit/1 of a metadata object in the epochs bucket type; the call's µs."""
        items = [
            f"{{{erl_binary(s[0])},deleted}}" if isinstance(s, tuple) else erl_binary(s)
            for s in siblings
        ]
        bucket = f"{{{erl_binary('epochs')},{erl_binary('epochs')}}}"
        reply = self.call(f"{{put,{bucket},{erl_binary(key)},[{','.join(items)}]}}.")
        assert reply["result"] == "ok"
        micros: int = reply["micros"]
        return micros

    def wait_idle(self) -> None:
        assert self.call("wait_idle.")["idle"] is True

    def status(self) -> dict[str, Any]:
        return self.call("status.")

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(RuntimeError, OSError):  # it may have died already
                self.call("halt.")
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        self._log.close()


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def eunit() -> subprocess.CompletedProcess[str]:
    """``make -C erlang_hooks test``: builds ebin/ and _build/test/, runs EUnit."""
    if shutil.which("erlc") is None:
        pytest.fail("erlc is not installed (apt-get install erlang-nox)")
    return subprocess.run(
        ["make", "-C", str(HOOKS), "test"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def owners() -> list[str]:
    vectors = json.loads(VECTORS.read_text())
    (ring,) = [r for r in vectors["rings"] if r["ring_size"] == RING_SIZE and r["nodes"] == NODES]
    return list(ring["owners"])


class Cluster:
    """One hook node, its companions and the settings it runs with."""

    settings: ClassVar[dict[str, str]] = {
        "timeout_ms": str(TIMEOUT_MS),
        "breaker_failures": "2",
        "breaker_cooldown_ms": str(COOLDOWN_MS),
        "log_interval_ms": "60000",
    }

    def __init__(self, node: HookNode, owners: list[str], down: list[str]) -> None:
        self.node = node
        self.ring = Ring(NODES, RING_SIZE, owners=owners)
        self.down = down
        spec = (
            f"#{{owners=>[{','.join(erl_atom(o) for o in owners)}],n_val=>{N_VAL},"
            f"down=>[{','.join(erl_atom(d) for d in down)}]}}"
        )
        node.env(ring=f"{{static,{spec}}}", **self.settings)
        # Load the modules and start the notifier now, so that put timings measure
        # the hand-off alone (a cold first put also loads code from disk).
        node.call("start.")

    def companions(self, urls: dict[str, str]) -> None:
        pairs = ",".join(f"{erl_atom(n)}=>{erl_string(u)}" for n, u in urls.items())
        self.node.env(companion_urls=f"#{{{pairs}}}")

    def expected(self, metadata_key: str, entries: set[str]) -> dict[str, bytes]:
        """Node -> the exact body the hook must POST to that node's companion."""
        epoch, dc = metadata_key.split("-")
        groups: dict[str, list[str]] = {}
        for entry in sorted(entries):
            chunk_key = f"{epoch}:{dc}:{entry}"
            preflist = self.ring.preflist(
                "events", chunk_key, bucket_type="events", n_val=N_VAL, down=self.down
            )
            groups.setdefault(preflist[0].node, []).append(chunk_key)
        # The Erlang hook's bytes are held to the one definition the twin and the
        # auditor use (eventstore/keygroup.py).
        return {node: KeyGroup.of(int(epoch), dc, keys).encode() for node, keys in groups.items()}


@pytest.fixture
def cluster(
    eunit: subprocess.CompletedProcess[str], owners: list[str], tmp_path: Path
) -> Iterator[Cluster]:
    if eunit.returncode != 0:
        pytest.fail("erlang_hooks did not build or its EUnit suite failed")
    node = HookNode(tmp_path / "erl.log")
    try:
        yield Cluster(node, owners, down=["dev4@127.0.0.1"])
    finally:
        node.close()
        print(f"--- erl log ---\n{node.log_path.read_text()[-10000:]}")


def entries(tag: str, n: int) -> list[str]:
    return [f"{tag}{i % 3}:{'sub' if i % 2 else ''}:{i}" for i in range(n)]


# -- tests --------------------------------------------------------------------------------


def test_eunit_suite_passes(eunit: subprocess.CompletedProcess[str]) -> None:
    assert eunit.returncode == 0, eunit.stdout[-5000:] + eunit.stderr[-5000:]
    assert "tests passed" in eunit.stdout


def test_groups_reach_each_nodes_companion_exactly(cluster: Cluster) -> None:
    live = {n: Companion() for n in NODES}
    try:
        cluster.companions({n: c.url for n, c in live.items()})
        writes: dict[str, set[str]] = {}
        # One plain write, one with siblings (one a tombstone) that the hook must merge.
        a = entries("type", 40)
        writes["1413813813-dc1"] = set(a)
        assert cluster.node.put("1413813813-dc1", ["|".join(a)]) < PUT_BUDGET_US
        b, c = entries("t.x", 25), entries("u", 10)
        writes["1413813814-dc_2"] = set(b) | set(c)
        siblings: list[str | tuple[str, str]] = [
            "|".join(reversed(b)),
            ("", "deleted"),
            "|".join(c + b[:5]),
        ]
        assert cluster.node.put("1413813814-dc_2", siblings) < PUT_BUDGET_US
        cluster.node.wait_idle()

        want: dict[str, list[bytes]] = {n: [] for n in NODES}
        for key, keys in writes.items():
            for node, body in cluster.expected(key, keys).items():
                want[node].append(body)
        assert want["dev4@127.0.0.1"] == []  # down: its keys go to their fallbacks
        for node, companion in live.items():
            assert sorted(companion.bodies()) == sorted(want[node]), node
            for path, content_type, _ in companion.received:
                assert (path, content_type) == ("/v1/keys", "application/json")
        status = cluster.node.status()
        groups = sum(len(v) for v in want.values())
        assert status["posted"] == groups
        assert status["received"] == 2
        assert status["keys"] == 75
        assert status["failed"] == status["dropped"] == status["parse_errors"] == 0
    finally:
        for companion in live.values():
            companion.close()


def test_dead_companions_never_block_and_breaker_recovers(cluster: Cluster) -> None:
    dead = dead_port()
    dead_url = f"http://127.0.0.1:{dead}"
    hanging = HangingCompanion()
    live = Companion()
    revived: Companion | None = None
    try:
        cluster.companions(
            {NODES[0]: dead_url, NODES[1]: hanging.url, NODES[2]: live.url, NODES[3]: live.url}
        )
        keys = entries("t", 30)
        # Epochs whose keys route to each of dev1, dev2 and dev3 (dev4 is down).
        epochs = [
            e
            for e in range(100, 200)
            if cluster.expected(f"{e}-dc", set(keys)).keys() == set(NODES[:3])
        ][:4]
        assert len(epochs) == 4

        # Two writes: every group to dev1 is refused, every group to dev2 times out;
        # the put returns at once each time. The second failure opens each breaker.
        for epoch in epochs[:2]:
            assert cluster.node.put(f"{epoch}-dc", ["|".join(keys)]) < PUT_BUDGET_US
            cluster.node.wait_idle()
        status = cluster.node.status()
        assert status["failed"] == 4
        assert status["timeouts"] == 2
        assert status["breaker_open"] == 2
        assert status["posted"] == 2
        assert status["breakers"][dead_url]["state"] == "open"
        assert status["breakers"][hanging.url]["state"] == "open"

        # While open, groups for those companions are not even tried.
        t0 = time.monotonic()
        assert cluster.node.put(f"{epochs[2]}-dc", ["|".join(keys)]) < PUT_BUDGET_US
        cluster.node.wait_idle()
        assert time.monotonic() - t0 < TIMEOUT_MS / 1000
        status = cluster.node.status()
        assert status["breaker_rejected"] == 2
        assert status["posted"] == 3

        # dev1's companion comes back; after the cool-down one probe goes and closes it.
        revived = Companion(port=dead)
        time.sleep(COOLDOWN_MS / 1000 + 0.2)
        assert cluster.node.put(f"{epochs[3]}-dc", ["|".join(keys)]) < PUT_BUDGET_US
        cluster.node.wait_idle()
        assert revived.bodies() == [cluster.expected(f"{epochs[3]}-dc", set(keys))[NODES[0]]]
        status = cluster.node.status()
        assert status["breakers"][dead_url] == {"state": "closed", "failures": 0}
        assert status["breakers"][hanging.url]["state"] == "open"  # its probe timed out
        assert status["timeouts"] == 3
        assert len(live.bodies()) == 4
    finally:
        live.close()
        hanging.close()
        if revived is not None:
            revived.close()


def test_notifier_is_restarted_after_it_dies(cluster: Cluster) -> None:
    live = Companion()
    try:
        cluster.companions({n: live.url for n in NODES})
        cluster.node.put("200-dc", ["t::0"])
        cluster.node.wait_idle()
        assert cluster.node.call("kill_notifier.")["killed"] is True
        assert cluster.node.status()["running"] is False
        cluster.node.put("201-dc", ["t::1"])
        cluster.node.wait_idle()
        status = cluster.node.status()
        assert status["running"] is True
        assert status["notifier_starts"] == 2
        assert status["posted"] == 2
        assert sorted(live.bodies()) == [
            b'{"epoch":200,"dc":"dc","keys":["200:dc:t::0"]}',
            b'{"epoch":201,"dc":"dc","keys":["201:dc:t::1"]}',
        ]
    finally:
        live.close()
