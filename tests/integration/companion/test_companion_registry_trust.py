"""Only authorised code runs, through a real ZooKeeper, a real companion (gunicorn, two
workers) and the real ``riak-events substream`` command: the registry refuses writes
without the publisher's credentials; a companion runs a registry plugin only when a key
it trusts signed it and shows the rejected ones with why (``/v1/status``, the status
page, ``substream list``); publishing over another running version needs ``--replace``;
the read-only pages are served to allowed peers only, without internal addresses."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from companion.testing import Stack, wait_for
from substreams.api import version_of
from substreams.testing import plugin_source as plugin

EPOCH = 1_700_000_900
PUBLISHER = "publisher:s3cret"
#: The companion serves its status only to this address (the tests ask from it, and
#: from 127.0.0.1 to see the refusal): Linux routes all of 127/8 to lo.
STATUS_PEER = "127.0.0.2"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    riak_events = str(Path(sys.executable).parent / "riak-events")
    return subprocess.run(
        [riak_events, *args], capture_output=True, text=True, timeout=60, check=False
    )


def get(stack: Stack, path: str, source: str = STATUS_PEER) -> tuple[int, bytes]:
    """GET ``path`` from the companion, the connection made from ``source``."""
    connection = http.client.HTTPConnection(
        "127.0.0.1", stack.companion.port, timeout=5, source_address=(source, 0)
    )
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def status(stack: Stack) -> Any:
    code, body = get(stack, "/v1/status")
    assert code == 200, body
    return json.loads(body)


@pytest.fixture
def zk_args(zookeeper_server: Any, zookeeper: str) -> tuple[str, ...]:
    return ("--zk-hosts", zookeeper_server.hosts, "--zk-root", zookeeper)


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    """A trusted publisher key and an untrusted one (both made by the real keygen)."""
    made = {}
    for name in ("trusted", "stranger"):
        path = tmp_path / f"{name}.key"
        result = cli("substream", "keygen", str(path))
        assert result.returncode == 0, result.stderr
        assert "trusted_keys" in result.stdout
        made[name] = path
    return made


def test_the_registry_refuses_writes_without_the_publishers_credentials(
    zookeeper_server: Any, zookeeper: str, zk_args: tuple[str, ...], keys: dict[str, Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError
    from kazoo.security import OPEN_ACL_UNSAFE

    path = tmp_path / "counted.py"
    path.write_text(plugin("counted"))
    published = cli("substream", "publish", str(path), "--key", str(keys["trusted"]),
                    "--zk-auth", PUBLISHER, *zk_args)  # fmt: skip
    assert published.returncode == 0, published.stderr
    assert "signed by key" in published.stdout

    znode = f"{zookeeper}/substreams/counted"
    for auth in (None, [("digest", "publisher:wrong")], [("digest", "someone:else")]):
        zk = KazooClient(hosts=zookeeper_server.hosts, auth_data=auth)
        zk.start(timeout=10)
        try:
            data, _ = zk.get(znode)  # everyone may read: integrity comes from signatures
            assert json.loads(data)["file"] == "counted.py"
            with pytest.raises(NoAuthError):
                zk.set(znode, b'{"file": "counted.py"}')
            with pytest.raises(NoAuthError):
                zk.create(f"{zookeeper}/substreams/evil", b"{}")
            with pytest.raises(NoAuthError):
                zk.delete(znode)
            with pytest.raises(NoAuthError):  # nor can anyone open the ACL again
                zk.set_acls(f"{zookeeper}/substreams", OPEN_ACL_UNSAFE)
        finally:
            zk.stop()
            zk.close()

    # The command without credentials (or with wrong ones) is refused, and says why.
    other = tmp_path / "other.py"
    other.write_text(plugin("other"))
    for extra in ((), ("--zk-auth", "publisher:wrong")):
        refused = cli("substream", "publish", str(other), "--key", str(keys["trusted"]),
                      *extra, *zk_args)  # fmt: skip
        assert refused.returncode != 0
        assert "NoAuth" in refused.stderr and "--zk-auth" in refused.stderr, refused.stderr
    withdrawn = cli("substream", "withdraw", "counted", *zk_args)
    assert withdrawn.returncode != 0 and "NoAuth" in withdrawn.stderr


def test_only_plugins_signed_by_a_trusted_key_run_and_rejections_are_shown(  # noqa: PLR0917
    stack_factory: Callable[..., Stack],
    zookeeper_server: Any,
    zookeeper: str,
    zk_args: tuple[str, ...],
    keys: dict[str, Path],
    tmp_path: Path,
) -> None:
    stack = stack_factory(
        zk_hosts=zookeeper_server.hosts,
        zk_root=zookeeper,
        zk_health_interval_s=0.5,
        zookeeper={"trusted_keys": [f"{keys['trusted']}.pub"]},
        companion={"status_peers": [STATUS_PEER], "hide_addresses": True},
    )

    def publish(name: str, source: str, *extra: str) -> subprocess.CompletedProcess[str]:
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        return cli("substream", "publish", str(path), "--zk-auth", PUBLISHER, *extra, *zk_args)

    good = plugin("good", "return {'n': len(events), 'v': 1}")
    assert publish("good", good, "--key", str(keys["trusted"])).returncode == 0
    unsigned = publish("unsigned", plugin("unsigned"))
    assert unsigned.returncode == 0 and "unsigned" in unsigned.stderr
    assert publish("stranger", plugin("stranger"), "--key", str(keys["stranger"])).returncode == 0
    assert publish("forged", plugin("forged"), "--key", str(keys["trusted"])).returncode == 0
    # The publisher's identity can still write: change the source under a signature
    # made for another one (what a stolen ZooKeeper password could do).
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zookeeper_server.hosts, auth_data=[("digest", PUBLISHER)])
    zk.start(timeout=10)
    try:
        znode = f"{zookeeper}/substreams/forged"
        entry = json.loads(zk.get(znode)[0])
        entry["source"] = plugin("forged", "return 'tampered'")
        zk.set(znode, json.dumps(entry).encode())
    finally:
        zk.stop()
        zk.close()

    def settled() -> Any:
        view = status(stack)
        loaded = view["loaded"].get("good", {})
        rejected = view["registry"]["rejected"]
        # forged.py ran while its signature was good: the tampered version unloads it
        if sum(loaded.values()) == 2 and len(rejected) == 3 and set(view["loaded"]) == {"good"}:
            return view
        return None

    view = wait_for(settled)
    rejected = view["registry"]["rejected"]
    assert "not signed" in rejected["unsigned.py"]["reason"]
    assert "not a trusted key" in rejected["stranger.py"]["reason"]
    assert "bad signature" in rejected["forged.py"]["reason"]
    assert not (stack.root / "state" / "registry" / "forged.py").exists()
    keys_written = stack.write_epoch(EPOCH, "dc1", {("t", "", 0): [{}, {}]})
    record = stack.wait_results("good", keys_written)[keys_written[0]]
    assert (record.result, record.version) == ({"n": 2, "v": 1}, version_of(good.encode()))

    # The status page shows them too, without the node's internal addresses.
    code, page = get(stack, "/")
    assert code == 200
    text = page.decode()
    assert "registry unsigned.py" in text and "not signed" in text
    assert "registry forged.py" in text and "bad signature" in text
    assert stack.devnode.url not in text and zookeeper_server.hosts not in text
    assert zookeeper_server.hosts not in json.dumps(view)

    # substream list: what is published and what each live node rejected, with why.
    def listing() -> subprocess.CompletedProcess[str] | None:
        listed = cli("substream", "list", "--trusted-key", f"{keys['trusted']}.pub", *zk_args)
        return listed if "REJECTED forged.py" in listed.stdout else None

    listed = wait_for(listing)
    assert listed.returncode == 0, listed.stderr
    out = listed.stdout
    assert "unsigned.py" in out and "UNSIGNED" in out
    assert "dev1@127.0.0.1:" in out and f"runs good {version_of(good.encode())}" in out
    assert "REJECTED unsigned.py" in out and "REJECTED stranger.py" in out

    # Replacing the running version needs --replace; the refusal says what runs where.
    good_v2 = plugin("good", "return {'n': len(events), 'v': 2}")
    refused = publish("good", good_v2, "--key", str(keys["trusted"]))
    assert refused.returncode != 0
    v1 = version_of(good.encode())
    assert f"good.py is published as version {v1}" in refused.stderr, refused.stderr
    assert f"good: {v1} on dev1@127.0.0.1" in refused.stderr
    assert "--replace" in refused.stderr
    replaced = publish("good", good_v2, "--key", str(keys["trusted"]), "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert f"replaced version {v1}" in replaced.stdout
    v2 = version_of(good_v2.encode())
    wait_for(lambda: status(stack)["loaded"].get("good", {}).get(v2) == 2)

    # A substream name another published file declares is refused even with --replace.
    clash = publish("good_copy", plugin("good"), "--key", str(keys["trusted"]), "--replace")
    assert clash.returncode != 0 and "already published by good.py" in clash.stderr


def test_the_read_only_pages_are_served_to_allowed_peers_only(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(companion={"status_peers": [STATUS_PEER]})
    for path in ("/", "/v1/status", "/metrics"):  # /metrics follows status_peers by default
        code, body = get(stack, path, source="127.0.0.1")
        assert code == 403, (path, body)
        assert b"127.0.0.1 is not a configured peer" in body
        assert get(stack, path)[0] == 200
    # Probes stay open: an orchestrator checks liveness from wherever it runs.
    assert get(stack, "/healthz", source="127.0.0.1")[0] == 200
    # The POST allowlist is unchanged (loopback by default).
    assert (
        stack.companion.request("POST", "/v1/keys", {"epoch": 1, "dc": "d", "keys": []})[0] == 202
    )
