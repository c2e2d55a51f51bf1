"""The companion in ZooKeeper: the node's live znode ("Zooanimal") and the registry mirror.

Runs in gunicorn's master process (``when_ready``), not in the workers: one session per
node. ``<root>/companions/<node>`` is an ephemeral znode holding JSON
``{"node", "endpoints": {"companion", "riak"}, "health", "registry", "pid", "started_at",
"updated_at"}``; clients list the children to pick a random live node. Health
(including the versions of the substreams the node's workers have loaded) is refreshed
every ``interval_s`` from a callable (the master reads the workers' status snapshots).
At each refresh the master also reads every live node's znode and writes what they
report into ``<state_dir>/cluster.json`` (by rename), so the status page can show where
nodes disagree on a substream's version.

Failure semantics: kazoo reconnects by itself; an ephemeral znode lost with an expired
session is created again at the next refresh. ZooKeeper being down never stops the
companion from serving: registration and the registry mirror are best effort, logged.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from companion.settings import CompanionSettings
from companion.stats import write_cluster_view
from substreams.mirror import RegistryMirror
from substreams.signing import TrustedKeys

log = logging.getLogger(__name__)

__all__ = ["ZooKeeperPresence"]


class ZooKeeperPresence:
    """Live-node registration plus registry mirror, over one kazoo session."""

    def __init__(
        self,
        settings: CompanionSettings,
        *,
        health: Callable[[], dict[str, Any]],
        interval_s: float = 10.0,
    ) -> None:
        from kazoo.client import KazooClient  # noqa: PLC0415 (optional dependency)

        self.settings = settings
        self._health = health
        self._interval_s = interval_s
        self.client = KazooClient(
            hosts=settings.zk_hosts,
            timeout=5.0,
            # digest credentials, when the operator gave some (the registry itself is
            # world-readable; only publishers write it)
            auth_data=[("digest", settings.zk_auth)] if settings.zk_auth else None,
        )
        self._mirror: RegistryMirror | None = None
        self.node = settings.node or settings.listen
        self.znode = f"{settings.zk_root}/companions/{self.node}"
        self._started_at = time.time()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _data(self) -> bytes:
        return json.dumps(
            {
                "node": self.node,
                "endpoints": {
                    "companion": f"http://{self.settings.listen}",
                    "riak": list(self.settings.riak.nodes),
                },
                "health": self._health(),
                # what the registry mirror installed and rejected (substream list)
                "registry": self._mirror.summary() if self._mirror is not None else {},
                "pid": os.getpid(),
                "started_at": self._started_at,
                "updated_at": time.time(),
            }
        ).encode()

    def refresh(self) -> None:
        """Create the ephemeral znode, or update its health."""
        from kazoo.exceptions import NodeExistsError, NoNodeError  # noqa: PLC0415

        data = self._data()
        try:
            self.client.set(self.znode, data)
        except NoNodeError:
            self.client.ensure_path(f"{self.settings.zk_root}/companions")
            try:
                self.client.create(self.znode, data, ephemeral=True)
            except NodeExistsError:
                self.client.set(self.znode, data)
        self._write_cluster_view()

    def _write_cluster_view(self) -> None:
        """Write what every live node reports to ``<state_dir>/cluster.json``."""
        from kazoo.exceptions import NoNodeError  # noqa: PLC0415

        root = f"{self.settings.zk_root}/companions"
        nodes: dict[str, Any] = {}
        for child in self.client.get_children(root):
            try:
                raw, _ = self.client.get(f"{root}/{child}")
                info = json.loads(raw)
            except (NoNodeError, ValueError):
                continue  # gone meanwhile, or not ours
            health = info.get("health") or {}
            nodes[str(info.get("node", child))] = {
                "substreams": health.get("substreams", {}),
                "updated_at": info.get("updated_at"),
            }
        write_cluster_view(self.settings.state_dir, nodes)

    def start(self, *, timeout_s: float = 10.0) -> ZooKeeperPresence:
        """Connect, register, start mirroring the registry and the refresh thread."""
        self.client.start(timeout=timeout_s)
        self.refresh()
        self._mirror = RegistryMirror(
            self.client,
            self.settings.registry_dir,
            trust=TrustedKeys.load(self.settings.trusted_keys),
            root=self.settings.zk_root,
        ).start()
        self._thread = threading.Thread(target=self._loop, name="companion-zk", daemon=True)
        self._thread.start()
        log.info("zookeeper: node %s registered at %s", self.node, self.znode)
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.refresh()
            except Exception as e:  # kazoo raises many kinds; never stop the loop
                log.warning("zookeeper: refreshing %s failed: %s", self.znode, e)

    def stop(self) -> None:
        """Deregister (the ephemeral znode goes with the session) and disconnect."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        try:
            self.client.stop()
            self.client.close()
        except Exception as e:
            log.warning("zookeeper: closing the session failed: %s", e)
