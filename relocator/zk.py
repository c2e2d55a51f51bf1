"""Optional coordination of several relocators through ZooKeeper (kazoo).

Imported only when ``[zookeeper]`` is configured (kazoo is the optional
``riak-events[zookeeper]`` extra; ``daemon.make_coordinator`` says so when it is missing).

Znodes under ``root`` (default ``/riak-events/relocator``)::

    writers/<writer_id>        ephemeral, data = relocator id: writer ids are unique
    relocators/<id>            ephemeral: who is alive (for fair shares)
    owners/<unit>              ephemeral, data = owner's id: Hedwig's ownership
    progress/<unit>/<file>     persistent, JSON {"writer", "seq"}: Secor's commit of the
                               chunk numbering of a spool file, written BEFORE any push
    locks/<cluster>/<dc>       kazoo Lock recipe: one metadata read-merge-write at a time

**Identity.** A relocator *holds its writer id* while ``writers/<writer_id>`` is an
ephemeral znode of its current session; it is **registered** then. A znode held by
another session is never deleted, whatever its data says: unique writer ids are what
keep chunk keys from colliding, and a client cannot tell a dead holder from a live one
that is slow or partitioned. ZooKeeper deletes a dead holder's znodes when its session
expires (``session_timeout_s`` after it last heard from it), so a restarted relocator
waits for that (:meth:`start`, bounded) and a second live one is refused
(:class:`~relocator.errors.WriterIdTaken`).

**Ownership** (Hedwig): a relocator takes a work unit by creating its ephemeral owner
znode (create is ZooKeeper's test-and-set: at most one succeeds) and gives it up by
deleting it or by its session ending. ``rebalance`` aims at a fair share,
``ceil(units / live relocators)``: below it, create owner znodes of free units; above it,
delete extras. A relocator acts on a unit only while ``owns(unit)``: it is connected and
registered, AND the owner znode read at the last rebalance belongs to its session.

**Progress** (Secor): before sealing a spool file, the owner commits the file's batch
numbering to ``progress/<unit>/<file>`` (create: the first commit wins, a later one
reuses it); a new owner reuses it, so a takeover writes the same keys and bytes
(idempotent) instead of a second copy; the entry is deleted after the file.

Failure semantics (relocator/DESIGN.md, failure scenarios 17-19):

- **SUSPENDED** (connection lost, the session may still live): owning nothing, not
  registered for pushing (:meth:`active` is false) until CONNECTED again; then the owner
  znodes are read again at the next rebalance. No znode is touched meanwhile.
- **LOST** (session expired or closed): every ephemeral znode is gone with the session.
  kazoo connects again with a new session; :meth:`rebalance` then registers the writer
  id again (if another live session took it meanwhile, pushing stays paused and
  :attr:`blocked` says why) and claims units afresh.
- Every ZooKeeper error of a call is raised as
  :class:`~relocator.errors.CoordinationUnavailable` (retriable); kazoo itself keeps
  reconnecting for ever (``connection_retry``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from eventstore import zkpaths
from relocator.errors import CoordinationUnavailable, WriterIdTaken
from relocator.settings import ZooKeeperSettings

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: kazoo reconnects with this back-off for ever (its default grows to an hour): a short
#: outage must end in the same session when ZooKeeper returns before it expired.
_RECONNECT_MAX_DELAY_S = 1.0
#: Seconds between two looks at a znode held by another session.
_POLL_S = 0.2


def relocator_id(writer_id: int) -> str:
    """This process's identity in ZooKeeper: host and writer id (stable across restarts)."""
    return f"{socket.gethostname()}:{writer_id}"


class ZkCoordinator:
    """The writer id's registration, ownership of spool units, their progress, and
    metadata locks.

    Args:
        settings: hosts, root, session timeout.
        writer_id: this relocator's writer id.
        units: spool work units.
    """

    def __init__(self, settings: ZooKeeperSettings, *, writer_id: int, units: int) -> None:
        self._root = settings.root
        self._timeout_s = settings.session_timeout_s
        self.id = relocator_id(writer_id)
        self._writer_id = writer_id
        self._units = units
        self._zk = KazooClient(
            hosts=settings.hosts,
            timeout=settings.session_timeout_s,
            connection_retry=KazooRetry(max_tries=-1, max_delay=_RECONNECT_MAX_DELAY_S),
        )
        self._lock = threading.Lock()
        self._state: str = KazooState.LOST  # kazoo's: CONNECTED, SUSPENDED or LOST
        self._registered: int | None = None  # session id holding writers/<id>
        self._owned: set[int] = set()
        self._stale_locks: list[str] = []  # lock znodes a failed release left behind
        #: Why registration failed (another session holds the writer id), or "".
        self.blocked = ""

    # -- session ------------------------------------------------------------------------

    def _listener(self, state: str) -> None:
        # kazoo's event thread: record only, never call ZooKeeper from here.
        with self._lock:
            self._state = state
            if state != KazooState.CONNECTED:
                self._owned.clear()  # we cannot know what we own any more
            if state == KazooState.LOST:
                self._registered = None  # the session and its znodes are gone
        if state == KazooState.CONNECTED:
            log.info("zk: %s connected (session 0x%x)", self.id, self._session() or 0)
        elif state == KazooState.SUSPENDED:
            log.warning("zk: %s connection lost; owning nothing, pushing paused", self.id)
        else:
            log.warning("zk: %s session lost; writer id and units to be claimed again", self.id)

    def _session(self) -> int | None:
        client_id = self._zk.client_id
        return int(client_id[0]) if client_id else None

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """The session's (id, password) while connected (for tests that expire it)."""
        client_id = self._zk.client_id
        return (int(client_id[0]), bytes(client_id[1])) if client_id else None

    @property
    def state(self) -> str:
        """kazoo's connection state: ``CONNECTED``, ``SUSPENDED`` or ``LOST``."""
        with self._lock:
            return self._state

    def connected(self) -> bool:
        """Whether the client is connected now."""
        with self._lock:
            return bool(self._state == KazooState.CONNECTED)

    def active(self) -> bool:
        """Whether this relocator may push: connected, and its writer id is held by the
        current session."""
        with self._lock:
            return (
                self._state == KazooState.CONNECTED
                and self._registered is not None
                and self._registered == self._session()
            )

    def start(self) -> None:
        """Connect and register the writer id and this relocator.

        When ZooKeeper does not answer within ``session_timeout_s``, return anyway:
        kazoo keeps connecting, and :meth:`rebalance` registers when it answers
        (pushing stays paused until then).

        Raises:
            WriterIdTaken: another session still holds our writer id after waiting
                twice the session timeout for it to expire.
        """
        self._zk.add_listener(self._listener)
        if not self._zk.start_async().wait(self._timeout_s):
            log.warning(
                "zk: %s cannot reach ZooKeeper yet; running with pushing paused until it answers",
                self.id,
            )
            return
        with self._lock:
            self._state = KazooState.CONNECTED
        try:
            self._register(wait_s=self._timeout_s * 2)
        except CoordinationUnavailable as e:
            log.warning("zk: %s registration interrupted (%s); retried every tick", self.id, e)

    def _register(self, wait_s: float) -> None:
        """Claim ``writers/<id>`` and ``relocators/<id>`` in the current session.

        Raises:
            WriterIdTaken: another session holds one of them after ``wait_s`` seconds.
            CoordinationUnavailable: ZooKeeper failed.
        """
        session = self._session()
        if session is None:
            raise CoordinationUnavailable("not connected")
        for sub in zkpaths.RELOCATOR_FOLDERS:
            self._call(self._zk.ensure_path, f"{self._root.rstrip('/')}/{sub}")
        self._claim(zkpaths.writer(self._root, self._writer_id), wait_s)
        self._claim(zkpaths.relocator(self._root, self.id), wait_s)
        with self._lock:
            self._registered = session
        self.blocked = ""
        log.info(
            "zk: registered as %s (writer %d, session 0x%x)", self.id, self._writer_id, session
        )

    def _claim(self, path: str, wait_s: float) -> None:
        """Create an ephemeral znode holding our id, or find it ours already; wait up to
        ``wait_s`` seconds for a znode of another session to go (never delete it).

        Raises:
            WriterIdTaken: still held by another session after ``wait_s``.
        """
        deadline = time.monotonic() + wait_s
        warned = False
        while True:
            holder = self._create_ephemeral(path)
            if holder is None:
                return
            data, owner = holder
            if time.monotonic() >= deadline:
                raise WriterIdTaken(self._writer_id, path, data, owner)
            if not warned:
                log.warning(
                    "zk: %s is held by %s (session 0x%x); waiting up to %.0f s for that "
                    "session to end",
                    path,
                    data,
                    owner,
                    wait_s,
                )
                warned = True
            time.sleep(_POLL_S)

    def _create_ephemeral(self, path: str) -> tuple[str, int] | None:
        """Create ``path`` (ephemeral, our id); None if it is ours now, else the other
        holder's (data, session id)."""
        while True:
            try:
                self._call(self._zk.create, path, self.id.encode(), ephemeral=True)
                return None
            except NodeExistsError:
                try:
                    data, stat = self._call(self._zk.get, path)
                except NoNodeError:
                    continue  # it just went: try again
                if stat.ephemeralOwner == self._session():
                    return None
                return data.decode(errors="replace"), int(stat.ephemeralOwner)

    def _call(self, fn: Callable[..., _T], *args: object, **kwargs: object) -> _T:
        """``fn(*args, **kwargs)`` with kazoo's connection errors as ours."""
        try:
            return fn(*args, **kwargs)
        except (NoNodeError, NodeExistsError):
            raise
        except (KazooException, KazooTimeoutError) as e:
            raise CoordinationUnavailable(f"{type(e).__name__}: {e}") from e

    # -- ownership ----------------------------------------------------------------------

    def rebalance(self) -> set[int]:
        """Register again after a lost session, then take or give up units towards a
        fair share; return the units owned now (none while not :meth:`active`).

        Raises:
            CoordinationUnavailable: ZooKeeper failed (ownership is as before the call,
                or none if the connection went).
        """
        if not self.connected():
            return set()
        if not self.active():
            try:
                self._register(wait_s=0)
            except WriterIdTaken as e:
                if self.blocked != str(e):
                    log.error("zk: %s; pushing stays paused", e)
                self.blocked = str(e)
                return set()
        self._drop_stale_locks()
        session = self._session()
        live = max(1, len(self._call(self._zk.get_children, zkpaths.relocators(self._root))))
        fair = math.ceil(self._units / live)
        mine: dict[int, int] = {}  # unit -> owner znode version
        free: list[int] = []
        for unit in range(self._units):
            try:
                _, stat = self._call(self._zk.get, zkpaths.owner(self._root, unit))
            except NoNodeError:
                free.append(unit)
                continue
            if stat.ephemeralOwner == session:
                mine[unit] = stat.version
        for unit in sorted(mine, reverse=True)[: max(0, len(mine) - fair)]:
            with contextlib.suppress(NoNodeError):
                self._call(self._zk.delete, zkpaths.owner(self._root, unit), version=mine[unit])
            del mine[unit]
            log.info("zk: %s released spool unit %d (fair share %d)", self.id, unit, fair)
        for unit in free:
            if len(mine) >= fair:
                break
            if self._create_ephemeral(zkpaths.owner(self._root, unit)) is None:
                mine[unit] = 0
                log.info("zk: %s owns spool unit %d", self.id, unit)
        with self._lock:
            self._owned = set(mine) if self._state == KazooState.CONNECTED else set()
            return set(self._owned)

    def owns(self, unit: int) -> bool:
        """Whether this relocator may act on ``unit`` now."""
        return unit in self.owned()

    def owned(self) -> set[int]:
        """Units owned now (none while not :meth:`active`)."""
        active = self.active()
        with self._lock:
            return set(self._owned) if active else set()

    # -- progress -----------------------------------------------------------------------

    def progress_get(self, unit: int, name: str) -> tuple[int, int] | None:
        """The committed (writer, seq) numbering of a spool file, if any.

        Raises:
            CoordinationUnavailable: ZooKeeper failed.
        """
        try:
            data, _ = self._call(self._zk.get, zkpaths.progress(self._root, unit, name))
        except NoNodeError:
            return None
        value = json.loads(data)
        return int(value["writer"]), int(value["seq"])

    def progress_commit(self, unit: int, name: str, writer: int, seq: int) -> tuple[int, int]:
        """Commit a spool file's numbering (before sealing it); if another commit got
        there first, return that one instead (the first commit wins).

        Raises:
            CoordinationUnavailable: ZooKeeper failed (nothing or ours was committed).
        """
        path = zkpaths.progress(self._root, unit, name)
        data = json.dumps({"writer": writer, "seq": seq}).encode()
        try:
            self._call(self._zk.create, path, data, makepath=True)
        except NodeExistsError:
            committed = self.progress_get(unit, name)
            if committed is not None:
                return committed
            return self.progress_commit(unit, name, writer, seq)
        return writer, seq

    def progress_delete(self, unit: int, name: str) -> None:
        """Forget a spool file's numbering (after the file is gone).

        Raises:
            CoordinationUnavailable: ZooKeeper failed (the entry may still be there).
        """
        with contextlib.suppress(NoNodeError):
            self._call(self._zk.delete, zkpaths.progress(self._root, unit, name))

    # -- metadata locks -----------------------------------------------------------------

    def lock(self, cluster: str, dc: str, key: str) -> AbstractContextManager[object]:
        """A ZooKeeper lock serialising metadata writes of ``dc`` on ``cluster``,
        waited for at most ``session_timeout_s``.

        Raises (on entry):
            CoordinationUnavailable: not acquired in time or ZooKeeper failed.
        """
        return self._held(zkpaths.lock(self._root, cluster, dc), key)

    @contextlib.contextmanager
    def _held(self, path: str, key: str) -> Iterator[None]:
        lock = self._zk.Lock(path, self.id)
        try:
            acquired = lock.acquire(timeout=self._timeout_s)
        except LockTimeout:
            acquired = False
        except (KazooException, KazooTimeoutError) as e:
            raise CoordinationUnavailable(f"metadata lock {path} for {key}: {e}") from e
        if not acquired:
            raise CoordinationUnavailable(f"metadata lock {path} for {key} not acquired in time")
        try:
            yield
        finally:
            try:
                lock.release()
            except (KazooException, KazooTimeoutError) as e:
                # Our session may live on after a reconnect, and with it the lock znode:
                # it would block every other writer of this dc. Delete it later.
                node = getattr(lock, "node", None)
                log.warning("zk: releasing %s failed (%s); deleted when connected", path, e)
                if node:
                    with self._lock:
                        self._stale_locks.append(f"{path}/{node}")

    def _drop_stale_locks(self) -> None:
        with self._lock:
            stale, self._stale_locks = self._stale_locks, []
        for i, path in enumerate(stale):
            try:
                with contextlib.suppress(NoNodeError):
                    self._call(self._zk.delete, path)
            except CoordinationUnavailable:
                with self._lock:
                    self._stale_locks.extend(stale[i:])
                raise

    def stop(self) -> None:
        """Release everything (ephemeral znodes go with the session) and disconnect."""
        self._zk.stop()
        self._zk.close()

    def describe(self) -> dict[str, object]:
        """What ``/status`` and ``/readyz`` show of the coordination."""
        session = self._session()
        return {
            "id": self.id,
            "state": self.state,
            "session": f"0x{session:x}" if session is not None else None,
            "registered": self.active(),
            "blocked": self.blocked or None,
        }
