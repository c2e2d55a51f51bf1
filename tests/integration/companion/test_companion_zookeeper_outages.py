"""ZooKeeper outages survived by a real companion (gunicorn master holding the session)
against a real ZooKeeper server.

- started while ZooKeeper is down: it serves at once (not ready), keeps trying, and
  registers its live znode when ZooKeeper comes up;
- session expired (the master frozen past its session timeout, so the server expires
  the session and deletes the ephemeral znode): it registers again under a new session.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from companion.testing import NODE, Stack, wait_for
from relocator.testing import ZooKeeperProcess


@pytest.fixture
def late_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper server with its port chosen but not started; stopped after the test."""
    server = ZooKeeperProcess(tmp_path / "late-zookeeper")
    yield server
    server.stop()


@pytest.fixture
def observer(request: pytest.FixtureRequest) -> Iterator[Callable[[str], KazooClient]]:
    clients: list[KazooClient] = []

    def connect(hosts: str) -> KazooClient:
        client = KazooClient(hosts=hosts, timeout=10.0)
        client.start(timeout=20)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.stop()
        client.close()


def zk_status(stack: Stack) -> dict[str, Any]:
    return dict(stack.companion.json("/v1/status")["zookeeper"])


def test_a_companion_started_while_zookeeper_is_down_joins_when_it_comes_up(
    stack_factory: Callable[..., Stack],
    late_zookeeper: ZooKeeperProcess,
    observer: Callable[[str], KazooClient],
) -> None:
    root = "/late"
    stack = stack_factory(zk_hosts=late_zookeeper.hosts, zk_root=root, zk_health_interval_s=0.5)
    # Serving although ZooKeeper is down: live, not ready, and it says why.
    assert stack.companion.json("/healthz")["status"] == "ok"
    status, body = stack.companion.request("GET", "/readyz")
    assert status == 503
    assert json.loads(body)["status"] == "zookeeper not connected"
    assert zk_status(stack)["connected"] is False
    late_zookeeper.start()
    zk = observer(late_zookeeper.hosts)
    znode = f"{root}/companions/{NODE}"
    wait_for(lambda: zk.exists(znode))
    info = json.loads(zk.get(znode)[0])
    assert info["node"] == NODE and info["pid"] == stack.companion.pid
    state = wait_for(lambda: (s := zk_status(stack))["registered"] and s)
    assert state["connected"] is True and state["state"] == "CONNECTED"
    assert wait_for(lambda: stack.companion.request("GET", "/readyz")[0] == 200)
    _, metrics = stack.companion.request("GET", "/metrics")
    assert b"companion_zookeeper_connected 1.0" in metrics


def test_an_expired_session_is_replaced_and_the_node_registers_again(
    stack_factory: Callable[..., Stack],
    zookeeper_server: Any,
    zookeeper: str,
    observer: Callable[[str], KazooClient],
) -> None:
    stack = stack_factory(
        zk_hosts=zookeeper_server.hosts,
        zk_root=zookeeper,
        zk_health_interval_s=0.5,
        zk_session_timeout_s=1.0,
    )
    zk = observer(zookeeper_server.hosts)
    znode = f"{zookeeper}/companions/{NODE}"
    first = wait_for(lambda: zk.exists(znode)).ephemeralOwner
    master = stack.companion.pid
    assert master is not None
    os.kill(master, signal.SIGSTOP)  # silent past its session timeout: the server
    try:  # expires the session and deletes the ephemeral znode
        wait_for(lambda: zk.exists(znode) is None)
    finally:
        os.kill(master, signal.SIGCONT)
    second = wait_for(lambda: zk.exists(znode)).ephemeralOwner
    assert second != first
    state = wait_for(lambda: (s := zk_status(stack))["registered"] and s)
    assert state["session_id"] == f"{second:#x}"
    assert stack.companion.json("/healthz")["status"] == "ok"
