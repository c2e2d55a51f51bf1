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

Connection (never blocks the master, never gives up)::

    start():   client.start_async()  (connection retry: unlimited tries, backoff up to
               ZK_RETRY_MAX_DELAY_S); start the refresh thread; return at once
    listener:  every state change (CONNECTED, SUSPENDED, LOST) is written to
               <state_dir>/zookeeper.json (companion.zkstate) and wakes the thread
    thread:    while connected: start the registry mirror (once: kazoo re-arms its
               watches on every new session), then create or update the live znode;
               again every interval_s, or at once after a state change

Failure semantics:

- ZooKeeper unreachable at start: the companion serves at once; kazoo keeps trying;
  the znode and the mirror appear when a session is made.
- Connection lost (SUSPENDED): the session may still live (the znode stays); nothing
  to do but wait; the mirror keeps its files.
- Session expired (LOST): the server deleted the znode; kazoo makes a new session and
  the thread creates the znode again under it (``registered`` names the session).
- A znode of our node name held by another session (our previous process, killed
  within its session timeout, or a second companion with the same node name): it is
  never deleted; it is updated, and created again under our session once it is gone,
  at the next refresh.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from companion import defaults
from companion.settings import CompanionSettings
from companion.stats import write_cluster_view
from companion.zkstate import write_zookeeper_state
from eventstore import zkpaths

log = logging.getLogger(__name__)

__all__ = ["ZooKeeperPresence"]


class ZooKeeperPresence:
    """Live-node registration plus registry mirror, over one kazoo session that is
    made in the background and made again whenever it is lost.

    Args:
        settings: the companion's settings (hosts, root, session timeout, state_dir).
        health: the node's health for the live znode (called on the refresh thread).
        interval_s: seconds between refreshes of the znode and of the cluster view.
    """

    def __init__(
        self,
        settings: CompanionSettings,
        *,
        health: Callable[[], dict[str, Any]],
        interval_s: float = defaults.ZK_HEALTH_INTERVAL_S,
    ) -> None:
        from kazoo.client import KazooClient  # noqa: PLC0415 (optional dependency)
        from kazoo.retry import KazooRetry  # noqa: PLC0415

        self.settings = settings
        self._health = health
        self._interval_s = interval_s
        self.client = KazooClient(
            hosts=settings.zk_hosts,
            timeout=settings.zk_session_timeout_s,
            connection_retry=KazooRetry(
                max_tries=-1,
                delay=defaults.ZK_RETRY_DELAY_S,
                max_delay=defaults.ZK_RETRY_MAX_DELAY_S,
            ),
            # digest credentials, when the operator gave some (the registry itself is
            # world-readable; only publishers write it)
            auth_data=[("digest", settings.zk_auth)] if settings.zk_auth else None,
        )
        self.node = settings.node or settings.listen
        self.znode = zkpaths.companion(settings.zk_root, self.node)
        self._started_at = time.time()
        self._state = "CONNECTING"
        self._since = time.time()
        self._registered: int | None = None  # the session id the znode was created by
        self._mirror: Any = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- state ---------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether the session is connected now."""
        return bool(self.client.connected)

    def state(self) -> dict[str, Any]:
        """What ``<state_dir>/zookeeper.json`` holds (see :mod:`companion.zkstate`)."""
        with self._lock:
            session = self._session_id()
            return {
                "hosts": self.settings.zk_hosts,
                "connected": self.connected,
                "state": self._state,
                "since": self._since,
                "session_id": f"{session:#x}" if session else None,
                "registered": self._registered is not None and self._registered == session,
                "znode": self.znode,
            }

    def _session_id(self) -> int | None:
        client_id = self.client.client_id
        return int(client_id[0]) if client_id and self.connected else None

    def _publish_state(self) -> None:
        try:
            write_zookeeper_state(self.settings.state_dir, self.state())
        except OSError as e:
            log.warning("zookeeper: writing the state file failed: %s", e)

    def _on_state(self, state: str) -> None:
        # On kazoo's connection thread: no ZooKeeper calls here (they would deadlock);
        # note the change and let the refresh thread act on it.
        with self._lock:
            self._state, self._since = str(state), time.time()
            if state == "LOST":
                self._registered = None  # the session and its ephemeral znode are gone
        log.warning("zookeeper: session %s (hosts %s)", state, self.settings.zk_hosts)
        self._publish_state()
        self._wake.set()

    # -- the live znode ---------------------------------------------------------------

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
        """Create the ephemeral znode, or update its health; then the cluster view."""
        from kazoo.exceptions import NodeExistsError, NoNodeError  # noqa: PLC0415

        data = self._data()
        session = self._session_id()
        try:
            stat = self.client.set(self.znode, data)
        except NoNodeError:
            self.client.ensure_path(zkpaths.companions(self.settings.zk_root))
            try:
                self.client.create(self.znode, data, ephemeral=True)
                stat = self.client.exists(self.znode)
            except NodeExistsError:
                stat = self.client.set(self.znode, data)
        owner = stat.ephemeralOwner if stat is not None else None
        with self._lock:
            was = self._registered
            self._registered = owner if owner == session else None
        if self._registered is not None and was != self._registered:
            log.info("zookeeper: node %s registered at %s (session %#x)", self.node,
                     self.znode, self._registered)  # fmt: skip
        elif self._registered is None and owner is not None:
            log.warning("zookeeper: %s is held by another session (%#x); created again "
                        "under ours once it is gone", self.znode, owner)  # fmt: skip
        self._write_cluster_view()

    def _write_cluster_view(self) -> None:
        """Write what every live node reports to ``<state_dir>/cluster.json``."""
        from kazoo.exceptions import NoNodeError  # noqa: PLC0415

        root = zkpaths.companions(self.settings.zk_root)
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

    def _start_mirror(self) -> None:
        """Mirror the plugin registry into ``registry_dir`` (once; kazoo's watches
        re-arm themselves on every new session)."""
        if self._mirror is not None:
            return
        from substreams.mirror import RegistryMirror  # noqa: PLC0415
        from substreams.signing import TrustedKeys  # noqa: PLC0415

        self._mirror = RegistryMirror(
            self.client,
            self.settings.registry_dir,
            trust=TrustedKeys.load(self.settings.trusted_keys),
            root=self.settings.zk_root,
        ).start()

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> ZooKeeperPresence:
        """Start connecting in the background and the refresh thread; returns at once."""
        self.client.add_listener(self._on_state)
        self.client.start_async()
        self._publish_state()
        self._thread = threading.Thread(target=self._loop, name="companion-zk", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            wait_s = self._interval_s
            if self.connected:
                # kazoo raises many kinds; never stop the loop; try again soon
                try:
                    self.refresh()
                except Exception as e:
                    log.warning("zookeeper: refreshing %s failed: %s", self.znode, e)
                    wait_s = min(wait_s, 1.0)
                try:
                    self._start_mirror()
                except Exception as e:
                    log.warning("zookeeper: starting the registry mirror failed: %s", e)
                    wait_s = min(wait_s, 1.0)
            self._publish_state()
            self._wake.wait(wait_s)

    def stop(self) -> None:
        """Deregister (the ephemeral znode goes with the session) and disconnect."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(2.0)
        try:
            self.client.stop()
            self.client.close()
        except Exception as e:
            log.warning("zookeeper: closing the session failed: %s", e)
