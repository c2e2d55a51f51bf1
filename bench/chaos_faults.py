"""The chaos campaign's faults: a plan drawn from a seed, and one injector per kind.

Kinds (``KINDS``), each injected while events flow, one fault at a time:

``kill``            kill -9 of one daemon (relocator, companion with its workers and
                    sandboxed children, devnode, ZooKeeper), restarted after ``hold_s``
``kill_recovering`` the same, then killed again ``delay_s`` after its restart (inside its
                    recovery: journal replay, backlog, plugin loading), then restarted
``zk_restart``      ZooKeeper stopped (SIGTERM) or killed, down ``hold_s``, restarted
``zk_expire``       one daemon's ZooKeeper session expired: its ephemeral znode names the
                    session (``ephemeralOwner``), the password ZooKeeper derives from the
                    id (``java.util.Random(id ^ 0xB3415C00)``, ``ZooKeeperServer.
                    generatePasswd``) lets a second client attach to it and close it,
                    which is kazoo's own ``expire_session``; no daemon is changed for it
``journal_corrupt`` a relocator killed, one byte flipped in one record of its newest
                    journal segment (a record with others after it), restarted; the
                    events of that record are "lost by injected journal corruption"
``chunk_corrupt``   a stored chunk listed in metadata read, one byte flipped, PUT back
                    under the same key through the devnode's HTTP API; its events are
                    "lost by injected store corruption" and must read as a checksum error
``store_stop``      the devnode stopped (SIGTERM), down ``hold_s``, restarted
``store_link``      the veth link to the devnode's network namespace down ``hold_s``
``disk_full``       the first relocator's tmpfs data directory filled, ``hold_s``, freed
``worker_kill``     kill -9 of one gunicorn worker of the companion, the master and the
                    other worker alive (the master starts a new one)
``relocator_state_corrupt``  a relocator killed, its journal's tail torn or its state
                    store's lock file or data directory lock garbled (``chaos_corrupt.py``
                    says exactly how), restarted
``companion_state_corrupt``  the companion killed, the files of its state directory
                    cut, garbled or zeroed (``chaos_corrupt.py``), restarted
``big_spool``       three spool files with an event of exactly ``max_event_bytes``, of one
                    byte more, and of more than a chunk holds (that file must be refused
                    whole, into ``.rejected/``)
``ack_cut``         the proxy before one producer (with an id, or the legacy one)
                    swallows an acknowledgement the relocator sent after its fdatasync
                    and cuts the connection, 1-4 times within ``hold_s``
``overlap``         two or three of the above at once on different parts of the system
                    (the store, ZooKeeper, a relocator, the companion, a producer),
                    started a moment apart, longest first, so the later ones happen
                    inside the earlier ones (a relocator killed while the store is down
                    while ZooKeeper restarts)

``EXTRA_KINDS`` are drawn only when asked for (``--kinds``; ``chaos_corrupt.py``):
``state_store_emptied`` (a relocator's ``data.mdb`` cut to 0 bytes: the relocator now
refuses to start, by design, so the fault is not recovered), ``cursor_not_utf8`` (the
companion's cursor file always overwritten with bytes that are not UTF-8).

Each injection returns a :class:`Fault`: what was done, when, and ``recovered_s``, the
seconds from the heal (restart issued, link up, disk freed) until the system works
again by the kind's probe (``probe``): acknowledgements resume on the affected
relocator's producer; pushes to the store resume; the companion answers ``/healthz``;
ZooKeeper answers and every daemon's session znode exists again. None: not recovered
within ``RECOVERY_TIMEOUT_S`` (a finding).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos_corrupt import (
    corrupt_companion_state,
    corrupt_relocator_state,
    empty_state_store,
    flip_journal_record,
    journal_records,
)
from chaos_load import ID_KEY
from chaos_plan import EXTRA_KINDS, KINDS, PlannedFault, plan
from chaos_stack import Daemon, Stack
from kazoo.client import KazooClient

from companion.testing import children_of
from eventstore.blob import unpack_blob
from eventstore.names import parse_metadata
from eventstore.riak import NotFound, RiakClient, RiakError

log = logging.getLogger("chaos.faults")

__all__ = [
    "EXTRA_KINDS",
    "KINDS",
    "RECOVERY_TIMEOUT_S",
    "Fault",
    "Injector",
    "PlannedFault",
    "flatten",
    "journal_records",
    "plan",
]

#: Longest wait for a probe after a heal, seconds.
RECOVERY_TIMEOUT_S = 60.0


@dataclass
class Fault:
    """One injected fault and how the system came back from it."""

    index: int
    kind: str
    target: str
    started_s: float
    hold_s: float
    probe: str
    recovered_s: float | None = None
    note: str = ""
    skipped: bool = False
    exempt_ids: list[int] = field(default_factory=list)
    corrupted_key: str | None = None
    ended_s: float = 0.0
    parts: list[Fault] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "kind": self.kind,
            "target": self.target,
            "at_s": round(self.started_s, 2),
            "hold_s": round(self.hold_s, 2),
            "probe": self.probe,
            "recovered_s": None if self.recovered_s is None else round(self.recovered_s, 2),
        }
        if self.note:
            out["note"] = self.note
        if self.skipped:
            out["skipped"] = True
        if self.corrupted_key:
            out["corrupted_key"] = self.corrupted_key
        if self.exempt_ids:
            out["events_in_corrupted_record_or_chunk"] = len(self.exempt_ids)
        if self.parts:
            out["parts"] = [p.as_dict() for p in self.parts]
        return out


def flatten(faults: list[Fault]) -> list[Fault]:
    """Every fault and every part of an overlap."""
    return [g for f in faults for g in (f, *flatten(f.parts))]


def java_random_bytes(seed: int, n: int) -> bytes:
    """``new java.util.Random(seed).nextBytes(byte[n])`` (the documented LCG)."""
    mask = (1 << 48) - 1
    state = (seed ^ 0x5DEECE66D) & mask
    out = bytearray()
    while len(out) < n:
        state = (state * 0x5DEECE66D + 0xB) & mask
        value = state >> 16
        for _ in range(min(4, n - len(out))):
            out.append(value & 0xFF)
            value >>= 8
    return bytes(out)


def session_password(session_id: int) -> bytes:
    """The password ZooKeeper gave session ``session_id`` (ZooKeeperServer.generatePasswd)."""
    return java_random_bytes(session_id ^ 0xB3415C00, 16)


class Injector:
    """Injects planned faults into a running :class:`Stack`.

    Args:
        stack: the running stack.
        seed: the run's seed (each fault's own choices use ``Random(seed, index)``).
        recovery_timeout_s: the longest wait for a probe after a heal, seconds.
    """

    def __init__(
        self, stack: Stack, seed: int, *, recovery_timeout_s: float = RECOVERY_TIMEOUT_S
    ) -> None:
        self.stack = stack
        self.seed = seed
        self.recovery_timeout_s = recovery_timeout_s
        self.kz = KazooClient(hosts=stack.zk.hosts, timeout=5.0)
        self.kz.start(timeout=15)
        self.riak = RiakClient([stack.devnode_url], timeout_s=5.0)
        self._registered: list[str] = []

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.kz.stop()
            self.kz.close()
        self.riak.close()

    def inject(self, planned: PlannedFault) -> Fault:
        """Inject one fault, heal it, and wait for recovery (at most RECOVERY_TIMEOUT_S)."""
        fault = Fault(
            planned.index,
            planned.kind,
            planned.target,
            time.monotonic() - self.stack.t0,
            planned.hold_s,
            probe="",
        )
        # The sessions a ZooKeeper fault must see come back: those that existed before.
        self._registered = [path for path, ok in self.sessions().items() if ok]
        log.info(
            "fault %d: %s %s (hold %.1fs)",
            planned.index,
            planned.kind,
            planned.target,
            planned.hold_s,
        )
        self._run(planned, fault)
        return fault

    def _run(self, planned: PlannedFault, fault: Fault) -> None:
        rng = random.Random(f"{self.seed}-{planned.index}")
        method: Callable[[PlannedFault, random.Random, Fault], None] = getattr(
            self, f"_{planned.kind}"
        )
        try:
            method(planned, rng, fault)
        except Exception as e:  # a fault that could not be injected is reported, not fatal
            log.exception("fault %d (%s) failed", planned.index, planned.kind)
            fault.note = f"{fault.note}; injection failed: {e!r}".lstrip("; ")
        fault.ended_s = time.monotonic() - self.stack.t0

    # -- the kinds -------------------------------------------------------------------------

    def _daemon(self, name: str) -> Daemon:
        for d in self.stack.daemons:
            if d.name == name:
                return d
        raise ValueError(f"no daemon {name}")

    def _kill(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        daemon = self._daemon(p.target)
        with daemon.held():
            daemon.process.kill()
            time.sleep(p.hold_s)
            heal = self._restart(daemon, fault)
        self._recover(daemon, heal, fault)

    def _kill_recovering(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        daemon = self._daemon(p.target)
        with daemon.held():
            daemon.process.kill()
            time.sleep(min(p.hold_s, 0.5))
            done = threading.Event()

            def start() -> None:
                with contextlib.suppress(RuntimeError):  # killed before it was healthy
                    daemon.process.start()
                done.set()

            starter = threading.Thread(target=start, daemon=True)
            starter.start()
            time.sleep(p.delay_s)
            recovering = not done.is_set()
            daemon.process.kill()
            starter.join(60)
            daemon.process.kill()  # in case the start had not spawned it yet at the kill
            fault.note = f"killed {p.delay_s:.2f}s after restart, " + (
                "before it was healthy" if recovering else "after it was healthy"
            )
            heal = self._restart(daemon, fault)
        self._recover(daemon, heal, fault)

    def _zk_restart(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        zk = self.stack.zookeeper
        assert zk is not None
        with zk.held():
            if p.graceful:
                zk.process.stop()
            else:
                zk.process.kill()
            fault.note = "stopped (SIGTERM)" if p.graceful else "killed (SIGKILL)"
            time.sleep(p.hold_s)
            heal = self._restart(zk, fault)
        self._recover(zk, heal, fault)

    def _zk_expire(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        daemon = self._daemon(p.target)
        path = self.stack.ephemeral_of(daemon)
        fault.probe = "session znode back under a new session"
        # a previous fault may have left the daemon between sessions: give it 15 s
        deadline = time.monotonic() + 15.0
        while (stat := self._stat(path)) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if stat is None or not stat.ephemeralOwner:
            fault.note = f"{path} does not exist: {p.target} has no session to expire"
            fault.skipped = True
            return
        sid = stat.ephemeralOwner
        other = KazooClient(
            hosts=self.stack.zk.hosts, client_id=(sid, session_password(sid)), timeout=5.0
        )
        try:
            other.start(timeout=10)
        finally:
            other.stop()
            other.close()
        fault.note = f"session 0x{sid:x} of {path} expired"
        heal = time.monotonic()
        fault.recovered_s = self._wait(heal, lambda: self._owner(path) not in (None, sid))

    def _journal_corrupt(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        daemon = self._daemon(p.target)
        with daemon.held():
            daemon.process.kill()
            flipped = flip_journal_record(self.stack.data_dir(daemon), rng)
            if flipped is None:
                fault.note = "no journal segment had two records; nothing flipped"
                fault.skipped = True
            else:
                fault.note, fault.exempt_ids = flipped
            heal = self._restart(daemon, fault)
        self._recover(daemon, heal, fault)

    def _relocator_state_corrupt(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        daemon = self._daemon(p.target)
        with daemon.held():
            daemon.process.kill()
            fault.note = corrupt_relocator_state(self.stack.data_dir(daemon), rng)
            heal = self._restart(daemon, fault)
        self._recover(daemon, heal, fault)

    def _state_store_emptied(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        daemon = self._daemon(p.target)
        with daemon.held():
            daemon.process.kill()
            fault.note = empty_state_store(self.stack.data_dir(daemon))
            heal = self._restart(daemon, fault)
        self._recover(daemon, heal, fault)

    def _companion_state_corrupt(
        self, p: PlannedFault, rng: random.Random, fault: Fault, *, cursor_not_utf8: bool = False
    ) -> None:
        daemon = self.stack.companion
        assert daemon is not None
        with daemon.held():
            daemon.process.kill()
            fault.note = corrupt_companion_state(
                self.stack.companion_state_dir, rng, cursor_not_utf8=cursor_not_utf8
            )
            heal = self._restart(daemon, fault)
        self._recover(daemon, heal, fault)

    def _cursor_not_utf8(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        self._companion_state_corrupt(p, rng, fault, cursor_not_utf8=True)

    def _worker_kill(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        master = self.stack.companion_process().pid
        assert master is not None
        workers = children_of(master)
        if not workers:
            fault.note, fault.skipped = "the companion has no worker to kill", True
            return
        victim = rng.choice(workers)
        os.kill(victim, signal.SIGKILL)
        fault.note = f"worker {victim} of {len(workers)} killed -9 (master {master})"
        heal = time.monotonic()
        fault.probe = "a new worker replaces it, companion /healthz 200"
        proc = self.stack.companion_process()

        def replaced() -> bool:
            now = children_of(master)
            return (
                victim not in now
                and len(now) >= len(workers)
                and proc.request("GET", "/healthz")[0] == 200
            )

        fault.recovered_s = self._wait(heal, replaced)

    def _big_spool(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        spool = self.stack.spool
        if spool is None:
            fault.note, fault.skipped = "no spool writer", True
            return
        names = spool.write_big(rng)
        fault.note = f"stored whole: {names['stored']}; refused whole: {names['refused']}"
        fault.probe = "the files leave the spool directory (the refused one into .rejected/)"
        directory = spool.directory
        heal = time.monotonic()
        fault.recovered_s = self._wait(
            heal,
            lambda: (
                not any((directory / n).exists() for n in names["stored"] + names["refused"])
                and all((directory / ".rejected" / n).exists() for n in names["refused"])
            ),
        )

    def _ack_cut(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        producer = self.stack.producer(p.target)
        proxy = producer.proxy
        assert proxy is not None
        cuts = rng.randint(1, 4)
        made = 0
        for _ in range(cuts):
            proxy.cut_next()
            deadline = time.monotonic() + 10.0  # the next acknowledgement
            while proxy.armed and time.monotonic() < deadline:
                time.sleep(0.01)
            made += proxy.armed == 0
            proxy.disarm()
            time.sleep(p.hold_s / cuts)
        fault.note = f"{made} of {cuts} acknowledgements swallowed, each connection cut"
        fault.probe = f"acks resume on {producer.name}"
        heal = time.monotonic()
        base = producer.acked_count()
        fault.recovered_s = self._wait(heal, lambda: producer.acked_count() > base)

    def _overlap(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        t = time.monotonic()
        parts = [
            Fault(q.index, q.kind, q.target, time.monotonic() - self.stack.t0, q.hold_s, probe="")
            for q in p.parts
        ]

        def run(q: PlannedFault, part: Fault) -> None:
            time.sleep(max(0.0, t + q.at_s - time.monotonic()))
            part.started_s = time.monotonic() - self.stack.t0
            log.info("fault %d, part: %s %s (hold %.1fs)", p.index, q.kind, q.target, q.hold_s)
            self._run(q, part)
            log.info(
                "fault %d, part %s %s done: recovered in %s",
                p.index,
                q.kind,
                q.target,
                part.recovered_s,
            )

        threads = [
            threading.Thread(target=run, args=(q, part), daemon=True)
            for q, part in zip(p.parts, parts, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
        fault.parts = parts
        fault.probe = "every part's probe"
        fault.note = "; ".join(f"{q.kind} {q.target}: {q.note}".replace(" :", ":") for q in parts)
        live = [q for q in parts if not q.skipped]
        done = [q.recovered_s for q in live]
        if live and all(r is not None for r in done):
            # the slowest part's recovery from its own heal (as for a single fault)
            fault.recovered_s = max(r for r in done if r is not None)
        fault.note += f"; all parts over {time.monotonic() - t:.1f}s after the first began"
        fault.skipped = not live

    def _chunk_corrupt(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        fault.probe = "none (the corruption stays)"
        now = int(time.time())
        for _ in range(20):  # a recent epoch whose metadata is committed
            epoch, dc = now - rng.randint(3, 20), rng.choice(self.stack.options.dcs)
            try:
                refs = parse_metadata(self.riak.get("epochs", "epochs", f"{epoch}-{dc}").value)
            except NotFound:
                continue
            key = f"{epoch}:{dc}:{rng.choice(refs).format()}"
            obj = self.riak.get("events", "events", key)
            ids = [int(e[ID_KEY]) for e in unpack_blob(obj.value, key=key)]
            value = bytearray(obj.value)
            at = rng.randrange(len(value))
            value[at] ^= 1 << rng.randrange(8)
            self.riak.put(
                "events",
                "events",
                key,
                bytes(value),
                content_type=obj.content_type or "application/octet-stream",
            )
            fault.corrupted_key, fault.exempt_ids = key, ids
            fault.note = f"byte {at} of {len(value)} flipped ({len(ids)} events)"
            fault.recovered_s = 0.0
            return
        fault.note = "no committed epoch found in the last 20 s"
        fault.skipped = True

    def _store_stop(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        devnode = self.stack.devnode
        assert devnode is not None
        with devnode.held():
            devnode.process.stop()
            time.sleep(p.hold_s)
            heal = self._restart(devnode, fault)
        self._recover(devnode, heal, fault)

    def _store_link(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        netns = self.stack.netns
        if netns is None:
            fault.note, fault.skipped = "no network namespace (--no-netns)", True
            return
        netns.link(False)
        try:
            time.sleep(p.hold_s)
        finally:
            netns.link(True)
        heal = time.monotonic()
        assert self.stack.devnode is not None
        self._recover(self.stack.devnode, heal, fault)

    def _disk_full(self, p: PlannedFault, rng: random.Random, fault: Fault) -> None:
        tmpfs = self.stack.tmpfs
        if tmpfs is None:
            fault.note, fault.skipped = "no tmpfs data directory (--tmpfs-mb 0)", True
            return
        try:
            filled = tmpfs.fill()
            fault.note = f"{filled // 1024} KiB written to fill {tmpfs.path}"
            time.sleep(p.hold_s)
        finally:
            tmpfs.free()
        heal = time.monotonic()
        self._recover(self._daemon("relocator-1"), heal, fault)

    # -- heal and probes -----------------------------------------------------------------

    def _restart(self, daemon: Daemon, fault: Fault) -> float:
        """Start ``daemon`` again (blocking until healthy); the heal time. A failed start is
        noted; the watcher retries once the fault's hold ends."""
        heal = time.monotonic()
        try:
            daemon.start()
        except RuntimeError as e:
            fault.note = f"{fault.note}; restart failed: {str(e).splitlines()[0]}".lstrip("; ")
        return heal

    def _recover(self, daemon: Daemon, heal: float, fault: Fault) -> None:
        """Wait for the probe of ``daemon``'s kind; sets ``fault.probe`` and ``recovered_s``."""
        stack = self.stack
        if daemon in stack.relocators:
            producer = stack.producer_of(daemon)
            base = producer.acked_count()
            fault.probe = f"acks resume on {daemon.name}"
            fault.recovered_s = self._wait(heal, lambda: producer.acked_count() > base)
        elif daemon is stack.companion:
            fault.probe = "companion /healthz 200"
            proc = stack.companion_process()
            fault.recovered_s = self._wait(heal, lambda: proc.request("GET", "/healthz")[0] == 200)
        elif daemon is stack.devnode:
            fault.probe = "pushes to the store resume"
            base = stack.events_pushed()
            fault.recovered_s = self._wait(
                heal,
                lambda: any(n > base.get(name, n) for name, n in stack.events_pushed().items()),
            )
        else:
            fault.probe = "ZooKeeper answers, the session znodes that existed exist again"
            paths = self._registered
            fault.recovered_s = self._wait(
                heal, lambda: stack.zk_ok() and all(self._owner(path) is not None for path in paths)
            )

    def sessions(self) -> dict[str, bool]:
        """Whether each daemon's session znode exists now (relocators, companion)."""
        stack = self.stack
        daemons = [d for d in (*stack.relocators, stack.companion) if d]
        return {
            stack.ephemeral_of(d): self._owner(stack.ephemeral_of(d)) is not None for d in daemons
        }

    def _stat(self, path: str) -> Any:
        """The znode's stat, None when missing or ZooKeeper does not answer."""
        try:
            return self.kz.exists(path)
        except Exception:  # ZooKeeper down or our session reconnecting
            return None

    def _owner(self, path: str) -> int | None:
        try:
            stat = self.kz.exists(path)
        except Exception:  # ZooKeeper down or our session reconnecting
            return None
        return stat.ephemeralOwner if stat else None

    def _wait(self, since: float, probe: Callable[[], bool]) -> float | None:
        while time.monotonic() - since < self.recovery_timeout_s:
            with contextlib.suppress(OSError, RiakError):
                if probe():
                    return time.monotonic() - since
            time.sleep(0.05)
        return None
