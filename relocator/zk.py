"""Optional coordination of several relocators through ZooKeeper (kazoo).

Znodes under ``root`` (default ``/riak-events/relocator``)::

    writers/<writer_id>        ephemeral, data = relocator id: writer ids are unique
    relocators/<id>            ephemeral: who is alive (for fair shares)
    owners/<unit>              ephemeral, data = owner's id: Hedwig's ownership
    progress/<unit>/<file>     persistent, JSON {"writer", "seq"}: Secor's commit of the
                               chunk numbering of a spool file, written BEFORE any push
    locks/<cluster>/<dc>       kazoo Lock recipe: one metadata read-merge-write at a time

**Ownership** (Hedwig): a relocator takes a work unit by creating its ephemeral owner
znode (create is ZooKeeper's test-and-set: at most one succeeds) and gives it up by
deleting it or by its session ending. ``rebalance`` aims at a fair share,
``ceil(units / live relocators)``: below it, try to create owner znodes of unowned
units; above it, delete extras. A relocator acts on a unit only while ``owns(unit)``:
its ZooKeeper connection is up AND the owner znode read at the last rebalance holds its
id. A restarted relocator (same id) reclaims the znodes its dead incarnation left.

**Progress** (Secor): before pushing a spool file, the owner commits the file's batch
numbering to ``progress/<unit>/<file>``; a new owner reuses it, so a takeover writes the
same keys and bytes (idempotent) instead of a second copy; the entry is deleted after
the file. A relocator that lost ownership mid-push may finish its push: it writes
exactly what the new owner writes.

Failure semantics: on SUSPENDED or LOST the relocator owns nothing until it is
connected again and has re-read the owner znodes. kazoo retries connection loss.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import socket
import threading
import time
from contextlib import AbstractContextManager

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

from relocator.errors import OwnershipLost
from relocator.settings import ZooKeeperSettings

log = logging.getLogger(__name__)


def relocator_id(writer_id: int) -> str:
    """This process's identity in ZooKeeper: host and writer id (stable across restarts)."""
    return f"{socket.gethostname()}:{writer_id}"


class ZkCoordinator:
    """Ownership of spool units, their progress, and metadata locks."""

    def __init__(self, settings: ZooKeeperSettings, *, writer_id: int, units: int) -> None:
        self._root = settings.root
        self._timeout_s = settings.session_timeout_s
        self.id = relocator_id(writer_id)
        self._writer_id = writer_id
        self._units = units
        self._zk = KazooClient(hosts=settings.hosts, timeout=settings.session_timeout_s)
        self._connected = threading.Event()
        self._owned: set[int] = set()
        self._lock = threading.Lock()

    def _listener(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:  # SUSPENDED or LOST: we cannot know what we own any more
            self._connected.clear()
            with self._lock:
                self._owned.clear()
            log.warning("zk: session %s; owning nothing until reconnected", state)

    def start(self) -> None:
        """Connect, register the writer id and this relocator.

        Raises:
            OwnershipLost: another live relocator uses our writer id.
        """
        self._zk.add_listener(self._listener)
        self._zk.start(timeout=self._timeout_s)
        self._connected.set()
        for sub in ("writers", "relocators", "owners", "progress", "locks"):
            self._zk.ensure_path(f"{self._root}/{sub}")
        self._claim(f"{self._root}/writers/{self._writer_id}", wait_s=self._timeout_s * 2)
        self._claim(f"{self._root}/relocators/{self.id}", wait_s=self._timeout_s * 2)
        log.info("zk: registered as %s (writer %d)", self.id, self._writer_id)

    def _claim(self, path: str, wait_s: float) -> bool:
        """Create an ephemeral znode holding our id; reclaim one our dead incarnation left.
        With ``wait_s`` > 0, wait that long for another holder's session to end."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self._zk.create(path, self.id.encode(), ephemeral=True)
                return True
            except NodeExistsError:
                try:
                    data, stat = self._zk.get(path)
                except NoNodeError:
                    continue
                if data.decode() == self.id and stat.ephemeralOwner != self._zk.client_id[0]:
                    # our previous incarnation's: its session is dead or dying
                    with contextlib.suppress(NoNodeError):
                        self._zk.delete(path, version=stat.version)
                    continue
                if data.decode() == self.id:
                    return True
                if time.monotonic() >= deadline:
                    if wait_s > 0:
                        raise OwnershipLost(f"{path} is held by {data.decode()}") from None
                    return False
                time.sleep(0.2)

    def rebalance(self) -> set[int]:
        """Take or give up units towards a fair share; return the units owned now."""
        if not self._connected.is_set():
            return set()
        live = max(1, len(self._zk.get_children(f"{self._root}/relocators")))
        fair = math.ceil(self._units / live)
        mine: set[int] = set()
        free: list[int] = []
        for unit in range(self._units):
            try:
                data, _ = self._zk.get(f"{self._root}/owners/{unit}")
            except NoNodeError:
                free.append(unit)
                continue
            if data.decode() == self.id:
                mine.add(unit)
        for unit in sorted(mine, reverse=True)[: max(0, len(mine) - fair)]:
            self._zk.delete(f"{self._root}/owners/{unit}")
            mine.discard(unit)
            log.info("zk: %s released spool unit %d (fair share %d)", self.id, unit, fair)
        for unit in free:
            if len(mine) >= fair:
                break
            if self._claim(f"{self._root}/owners/{unit}", wait_s=0):
                mine.add(unit)
                log.info("zk: %s owns spool unit %d", self.id, unit)
        with self._lock:
            self._owned = mine if self._connected.is_set() else set()
            return set(self._owned)

    def owns(self, unit: int) -> bool:
        """Whether this relocator may act on ``unit`` now."""
        with self._lock:
            return self._connected.is_set() and unit in self._owned

    def owned(self) -> set[int]:
        """Units owned now."""
        with self._lock:
            return set(self._owned) if self._connected.is_set() else set()

    def progress_get(self, unit: int, name: str) -> dict[str, int] | None:
        """The committed numbering of a spool file, if any."""
        try:
            data, _ = self._zk.get(f"{self._root}/progress/{unit}/{name}")
        except NoNodeError:
            return None
        value: dict[str, int] = json.loads(data)
        return value

    def progress_set(self, unit: int, name: str, writer: int, seq: int) -> None:
        """Commit a spool file's numbering (before pushing it)."""
        path = f"{self._root}/progress/{unit}/{name}"
        data = json.dumps({"writer": writer, "seq": seq}).encode()
        try:
            self._zk.create(path, data, makepath=True)
        except NodeExistsError:
            self._zk.set(path, data)

    def progress_delete(self, unit: int, name: str) -> None:
        """Forget a spool file's numbering (after the file is gone)."""
        with contextlib.suppress(NoNodeError):
            self._zk.delete(f"{self._root}/progress/{unit}/{name}")

    def lock(self, cluster: str, dc: str, key: str) -> AbstractContextManager[object]:
        """A ZooKeeper lock serialising metadata writes of ``dc`` on ``cluster``."""
        lock: AbstractContextManager[object] = self._zk.Lock(
            f"{self._root}/locks/{cluster}/{dc}", self.id
        )
        return lock

    def stop(self) -> None:
        """Release everything (ephemeral znodes go with the session) and disconnect."""
        self._zk.stop()
        self._zk.close()
