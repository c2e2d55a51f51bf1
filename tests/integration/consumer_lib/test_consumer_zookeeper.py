"""Discovery and the plugin registry through a real ZooKeeper: the client picks among
the live nodes companions register, and the fallback loads a plugin published to the
registry (the source the companions mirror), only when signed by a key the client
trusts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from consumer_helpers import write_epoch

from consumer_lib import DiscoveryFailed, EventsClient, PluginNotFound
from devnode.testing import DevnodeProcess, free_port
from eventstore.riak import RiakClient
from relocator.testing import ZooKeeperProcess
from substreams.registry import publish
from substreams.signing import generate, load_private_key

E0 = 1_700_000_500

PLUGIN = """
from substreams import substream

@substream(name="zk_count")
def zk_count(events, ctx):
    return len(events)
"""


def test_live_nodes_and_registry_plugins_come_from_zookeeper(  # noqa: PLR0917 (fixtures)
    zookeeper_server: ZooKeeperProcess,
    zookeeper: str,
    session_devnode: DevnodeProcess,
    riak: RiakClient,
    dc: str,
    tmp_path: Path,
) -> None:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zookeeper_server.hosts)
    zk.start(timeout=10)
    try:
        with pytest.raises(DiscoveryFailed, match="no live node"):
            EventsClient(zookeeper=zookeeper_server.hosts, zk_root=zookeeper)
        # two live nodes as companions register them; one of them is down
        dead = f"http://127.0.0.1:{free_port()}"
        for name, url in (("dev1@127.0.0.1", session_devnode.url), ("dev2@127.0.0.1", dead)):
            data = {"node": name, "endpoints": {"companion": "x", "riak": [url]}}
            zk.create(f"{zookeeper}/companions/{name}", json.dumps(data).encode(), makepath=True)
        plugin = tmp_path / "zk_count.py"
        plugin.write_text(PLUGIN)
        public_key, _ = generate(tmp_path / "publisher.key")
        publish(zk, plugin, root=zookeeper, key=load_private_key(tmp_path / "publisher.key"))
        write_epoch([riak], E0, dc, {("web", "app"): [[{"i": 1}, {"i": 2}]]})
        starts = set()
        for _ in range(12):
            with EventsClient(zookeeper=zookeeper_server.hosts, zk_root=zookeeper) as client:
                assert sorted(client.nodes) == sorted([session_devnode.url, dead])
                starts.add(client.nodes[0])
        assert len(starts) == 2  # a random live node first (2**-11: a false failure)
        with EventsClient(
            zookeeper=zookeeper_server.hosts,
            zk_root=zookeeper,
            use_entry_points=False,
            retry_deadline_s=5.0,
        ) as client:
            for _ in range(2):  # whichever node it starts on, a retry skips the dead one
                (epoch,) = client.epochs(dc, E0, E0 + 1)
                assert epoch.events == [{"i": 1}, {"i": 2}]
            # Without trusted keys the registry's plugins are never imported: nothing is
            # computed here, and the name is known (the registry's), so not "no substream".
            assert "zk_count" in client.known_substreams()
            results = client.substream("zk_count", dc, E0, E0 + 1)
            assert list(results) == []  # no result on the server, no plugin run here
            assert dict(results.summary.not_read) == {"web:app": 1}
            with pytest.raises(PluginNotFound):  # "always" needs the code
                client.substream("zk_count", dc, E0, E0 + 1, fallback="always")
        with EventsClient(
            zookeeper=zookeeper_server.hosts,
            zk_root=zookeeper,
            use_entry_points=False,
            retry_deadline_s=5.0,
            trusted_keys=[str(public_key)],
        ) as client:
            (res,) = client.substream("zk_count", dc, E0, E0 + 1)
            assert (res.served, res.reason, res.result) == ("fallback", "missing", 2)
    finally:
        zk.stop()
        zk.close()
