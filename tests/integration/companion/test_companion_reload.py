"""Hot reload from the plugins directory and publishing through the ZooKeeper registry,
with a running companion (gunicorn, two workers) and a real ZooKeeper."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from companion.testing import Stack, wait_for
from substreams.api import version_of
from substreams.testing import plugin_source as plugin

EPOCH = 1_700_000_500


def test_hot_reload_adds_replaces_and_reports_broken_plugins(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(plugins={"first.py": plugin("first")})
    assert stack.companion.json("/healthz")["substreams"] == ["first"]

    # Drop a new file: picked up without restart, by every worker.
    source = plugin("second", "return {'n': len(events), 'v': 1}")
    stack.write_plugin("second.py", source)
    keys = wait_for(
        lambda: (
            _loaded_everywhere(stack, "second")
            and stack.write_epoch(EPOCH, "dc1", {("t", "", 0): [{}]})
        )
    )
    record = stack.wait_results("second", keys)[keys[0]]
    assert record.result == {"n": 1, "v": 1}
    assert record.version == version_of(source.encode())

    # Edit it: the new version is what runs next, and is recorded.
    new_source = plugin("second", "return {'n': len(events), 'v': 2}")
    stack.write_plugin("second.py", new_source)
    wait_for(lambda: _loaded_everywhere(stack, "second", version_of(new_source.encode())))
    keys = stack.write_epoch(EPOCH + 1, "dc1", {("t", "", 0): [{}]})
    record = stack.wait_results("second", keys)[keys[0]]
    assert (record.result, record.version) == ({"n": 1, "v": 2}, version_of(new_source.encode()))

    # A broken file and one that hangs at import are reported; the others keep running.
    stack.write_plugin("broken.py", "from substreams import substream\n@substream(name=\n")
    stack.write_plugin("bad_decl.py", plugin("bad name!"))
    stack.write_plugin("hangs.py", "while True:\n    pass\n")

    # Every worker reloads on its own: wait until each answer shows the failures.
    def reported_everywhere() -> bool:
        status = stack.companion.json("/v1/status")
        return bool(status["workers"] == 2 and min(status["load_failures"]) >= 3)

    wait_for(reported_everywhere, timeout_s=40)
    assert stack.companion.json("/healthz")["substreams"] == ["first", "second"]
    code, page = stack.companion.request("GET", "/")
    assert code == 200
    assert b"broken.py" in page and b"SyntaxError" in page and b"load failed" in page
    keys = stack.write_epoch(EPOCH + 2, "dc1", {("t", "", 0): [{}, {}]})
    assert stack.wait_results("first", keys)[keys[0]].result == 2


def _loaded_everywhere(stack: Stack, name: str, version: str | None = None) -> bool:
    """Whether every worker has loaded ``name`` (at ``version``), per /v1/status."""
    status = stack.companion.json("/v1/status")
    versions = status["loaded"].get(name, {})
    workers = status["workers"]
    if version is not None:
        return bool(workers == 2 and versions.get(version) == workers)
    return bool(workers == 2 and sum(versions.values()) == workers)


def _gone_everywhere(stack: Stack, name: str) -> bool:
    status = stack.companion.json("/v1/status")
    return bool(status["workers"] == 2 and name not in status["loaded"])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    riak_events = str(Path(sys.executable).parent / "riak-events")
    return subprocess.run(
        [riak_events, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_publish_to_the_registry_reaches_the_companion_and_withdraw_removes_it(
    stack_factory: Callable[..., Stack],
    zookeeper_server: Any,
    zookeeper: str,
    tmp_path: Path,
) -> None:
    zk_hosts, root = zookeeper_server.hosts, zookeeper
    key = tmp_path / "publisher.key"
    assert _cli("substream", "keygen", str(key)).returncode == 0
    stack = stack_factory(
        zk_hosts=zk_hosts, zk_root=root, zookeeper={"trusted_keys": [f"{key}.pub"]}
    )
    zk_args = ("--zk-hosts", zk_hosts, "--zk-root", root)
    # The node registered itself as live, with its endpoints.
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zk_hosts)
    zk.start(timeout=10)
    try:
        live = wait_for(
            lambda: (
                zk.exists(f"{root}/companions/dev1@127.0.0.1")
                and zk.get(f"{root}/companions/dev1@127.0.0.1")
            )
        )
        info = json.loads(live[0])
        assert info["endpoints"]["companion"] == stack.companion.url
        assert live[1].ephemeralOwner != 0
    finally:
        zk.stop()
        zk.close()

    source = plugin("published", "return {'from': 'registry', 'n': len(events)}")
    path = tmp_path / "published.py"
    path.write_text(source)
    result = _cli("substream", "publish", str(path), "--key", str(key), *zk_args)
    assert result.returncode == 0, result.stderr
    assert "published published.py" in result.stdout
    listed = _cli("substream", "list", *zk_args)
    assert "published.py" in listed.stdout and version_of(source.encode()) in listed.stdout

    wait_for(lambda: _loaded_everywhere(stack, "published"))
    keys = stack.write_epoch(EPOCH + 10, "dc1", {("t", "", 0): [{}, {}, {}]})
    record = stack.wait_results("published", keys)[keys[0]]
    assert record.result == {"from": "registry", "n": 3}
    assert record.version == version_of(source.encode())

    # A file that does not load is refused before it reaches any node.
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit('no')\n")
    refused = _cli("substream", "publish", str(bad), *zk_args)
    assert refused.returncode != 0 and "bad.py" in refused.stderr

    withdrawn = _cli("substream", "withdraw", "published", *zk_args)
    assert withdrawn.returncode == 0, withdrawn.stderr
    wait_for(lambda: _gone_everywhere(stack, "published"))
