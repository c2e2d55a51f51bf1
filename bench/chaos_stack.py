"""The chaos campaign's stack: every daemon on one machine, supervised, and its load.

- **ZooKeeper** (:class:`relocator.testing.ZooKeeperProcess`);
- **the devnode** (:class:`devnode.testing.DevnodeProcess`), inside a network
  namespace of its own when the machine allows it (the link can be cut), whose hook
  posts to
- **a companion** (:class:`companion.testing.CompanionProcess`: real gunicorn) with the
  shipped example plugins plus a slow one, registered in ZooKeeper, auditor on its dcs;
- **two relocators** (:class:`relocator.testing.RelocatorProcess`) sharing a spool
  directory and ZooKeeper, the first with its data directory on a small tmpfs (the disk
  a fault fills);
- **two TCP producers with ids**, one per relocator, a small **legacy producer**
  (without an id: at-least-once by design, its duplicates counted apart) to the second,
  each through an ack-cutting proxy, and a **spool writer** (``chaos_load.py``), every
  event with a unique ``chaos_id``; each records exactly which ids were acknowledged.

Each daemon is a :class:`Daemon`: a watcher thread restarts it when it exits on its own
(as systemd's ``Restart=always`` would) and records the exit with the end of its log;
a fault takes the daemon over (:meth:`Daemon.held`) while it kills or stops it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_load import AckedProducer, SpoolWriter
from chaos_system import NetNamespace, TmpfsMount, remove_stale_namespaces, system_support

from companion.testing import CompanionProcess
from devnode.testing import DevnodeProcess, free_port
from fleet.harness import ServerProcess
from relocator.ack_proxy import AckCutProxy
from relocator.testing import RelocatorProcess, ZooKeeperProcess, four_letter, relocator_process

log = logging.getLogger("chaos.stack")

__all__ = ["Daemon", "Stack", "StackOptions"]

#: The companion's logical node (the devnode's ring has only it).
NODE = "chaos1@127.0.0.1"
#: ZooKeeper roots of the companion and of the relocators.
ZK_ROOT = "/chaos"
ZK_RELOCATOR_ROOT = "/chaos/relocator"
#: The slow plugin: a little slow on every web and lb chunk, never near its deadline.
SLOW_PLUGIN = '''"""A plugin that takes its time (the chaos campaign's slow one)."""
import time
from substreams import substream

@substream(name="slow_scan", types=["web", "lb"], timeout_s=2.0)
def slow_scan(events, ctx):
    time.sleep(0.05)
    return {"events": len(events), "first": events[0].get("chaos_id") if events else None}
'''
#: The spool writer's first chaos_id (the producers' start at 10**12, 2 * 10**12...).
SPOOL_FIRST_ID = 9 * 10**12
EXAMPLES = Path(__file__).resolve().parents[1] / "substreams" / "examples"


@dataclass(frozen=True)
class StackOptions:
    """What the stack runs.

    Attributes:
        rate: events per second of each TCP producer with an id.
        legacy_rate: events per second of the producer without an id (0: none).
        spool_interval_s: seconds between two spool files (0: no spool writer).
        spool_events: events per spool file.
        dcs: the dcs events are spread over.
        netns: run the devnode in a network namespace (needs root and iproute2).
        tmpfs_mb: size of the first relocator's data directory (0: a plain directory).
        seed: the producers' event seeds derive from it.
    """

    rate: float = 300.0
    legacy_rate: float = 30.0
    spool_interval_s: float = 1.0
    spool_events: int = 100
    dcs: tuple[str, ...] = ("ams1", "lhr2")
    netns: bool = True
    tmpfs_mb: int = 48
    seed: int = 1


@dataclass
class Exit:
    """An exit nobody asked for: a daemon that ended by itself."""

    daemon: str
    at_s: float
    code: int | None
    log_tail: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "daemon": self.daemon,
            "at_s": round(self.at_s, 1),
            "code": self.code,
            "log_tail": self.log_tail,
        }


class Daemon:
    """A supervised server process.

    Args:
        name: how reports name it (``relocator-1``).
        process: its harness; ``start()`` blocks until healthy.
        t0: the run's start (monotonic), for times in reports.
    """

    def __init__(self, name: str, process: ServerProcess, t0: float) -> None:
        self.name = name
        self.process = process
        self.exits: list[Exit] = []
        self.start_failures = 0
        self._t0 = t0
        self._lock = threading.RLock()
        self._wanted = False
        self._held = 0
        self._log_offset = 0
        self._closing = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name=f"watch-{name}", daemon=True)

    def start(self) -> None:
        """Start (blocking until healthy) and keep it running from now on.

        Raises:
            RuntimeError: it did not become healthy (the watcher will try again).
        """
        with self._lock:
            self._wanted = True
            with contextlib.suppress(OSError):
                self._log_offset = self.process.log_path.stat().st_size
            self.process.start()
        if not self._watcher.is_alive() and not self._closing.is_set():
            self._watcher.start()

    @contextlib.contextmanager
    def held(self) -> Iterator[Daemon]:
        """A fault's hold: the watcher leaves the daemon alone until the block ends (then
        restarts it if the fault left it down)."""
        with self._lock:
            self._held += 1
        try:
            yield self
        finally:
            with self._lock:
                self._held -= 1

    def close(self) -> None:
        """Stop watching and stop the process."""
        self._closing.set()
        with self._lock:
            self._wanted = False
            self.process.stop()

    def _watch(self) -> None:
        delay = 0.5
        while not self._closing.wait(0.3):
            with self._lock:
                if self._held or not self._wanted or self.process.running:
                    continue
                if self.process.pid is not None:  # it ended by itself
                    code = self.process.stop()
                    self.exits.append(
                        Exit(self.name, time.monotonic() - self._t0, code, self._log_since_start())
                    )
                    log.warning("%s exited by itself (code %s); restarting", self.name, code)
                try:
                    self.start()
                    delay = 0.5
                except RuntimeError as e:
                    self.start_failures += 1
                    log.warning("%s: restart failed: %s", self.name, str(e).splitlines()[0])
            if not self.process.running:
                self._closing.wait(delay)
                delay = min(delay * 2, 5.0)

    def _log_since_start(self, limit: int = 3000) -> str:
        with contextlib.suppress(OSError), self.process.log_path.open("rb") as f:
            f.seek(self._log_offset)
            return f.read().decode(errors="replace")[-limit:]
        return ""


@dataclass
class Stack:
    """Every daemon and load source of one campaign run (see the module docstring)."""

    root: Path
    options: StackOptions
    t0: float
    netns: NetNamespace | None = None
    tmpfs: TmpfsMount | None = None
    zookeeper: Daemon | None = None
    devnode: Daemon | None = None
    companion: Daemon | None = None
    relocators: list[Daemon] = field(default_factory=list)
    producers: list[AckedProducer] = field(default_factory=list)
    spool: SpoolWriter | None = None
    plugin_dir: Path | None = None
    writer_ids: dict[str, int] = field(default_factory=dict)
    tcp_ports: dict[str, int] = field(default_factory=dict)

    # -- handy views -----------------------------------------------------------------------

    @property
    def daemons(self) -> list[Daemon]:
        return [d for d in (self.zookeeper, self.devnode, self.companion, *self.relocators) if d]

    @property
    def zk(self) -> ZooKeeperProcess:
        assert self.zookeeper is not None
        proc = self.zookeeper.process
        assert isinstance(proc, ZooKeeperProcess)
        return proc

    @property
    def devnode_url(self) -> str:
        assert self.devnode is not None
        proc = self.devnode.process
        assert isinstance(proc, DevnodeProcess)
        return proc.url

    def relocator_process(self, daemon: Daemon) -> RelocatorProcess:
        proc = daemon.process
        assert isinstance(proc, RelocatorProcess)
        return proc

    def companion_process(self) -> CompanionProcess:
        assert self.companion is not None
        proc = self.companion.process
        assert isinstance(proc, CompanionProcess)
        return proc

    def producer_of(self, relocator: Daemon) -> AckedProducer:
        """The producer with an id that sends to ``relocator``."""
        return self.producers[self.relocators.index(relocator)]

    def producer(self, name: str) -> AckedProducer:
        for p in self.producers:
            if p.name == name:
                return p
        raise ValueError(f"no producer {name}")

    def id_sources(self) -> list[tuple[int, str]]:
        """(first chaos_id, source name), ascending: an id belongs to the last source
        whose first id is not above it."""
        sources = [(p.first_id, p.name) for p in self.producers]
        sources.append((SPOOL_FIRST_ID, "spool"))
        return sorted(sources)

    @property
    def companion_state_dir(self) -> Path:
        """The companion's state directory (``state_dir = "state"`` beside its config)."""
        return self.root / "companion" / "state"

    def data_dir(self, relocator: Daemon) -> Path:
        return self.root / relocator.name / "data"

    def ephemeral_of(self, daemon: Daemon) -> str:
        """The ephemeral znode that names ``daemon``'s ZooKeeper session."""
        if daemon is self.companion:
            return f"{ZK_ROOT}/companions/{NODE}"
        return f"{ZK_RELOCATOR_ROOT}/writers/{self.writer_ids[daemon.name]}"

    def acked_ids(self) -> list[int]:
        ids = [i for p in self.producers for i in p.acked_ids()]
        return ids + (list(self.spool.written) if self.spool else [])

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Create the namespace and the mount, start every daemon, then the load.

        Raises:
            RuntimeError: a daemon did not start (its log in the message).
        """
        opts, root = self.options, self.root
        if opts.netns:
            why = system_support()
            if why:
                raise RuntimeError(f"--netns needs root with iproute2: {why}")
            for name in remove_stale_namespaces():
                log.warning("removed network namespace %s of a run that is gone", name)
            pid = os.getpid()  # one /30 per run: 10.X.Y.0/30 from the pid
            self.netns = NetNamespace(f"chaos{pid}", f"10.{200 + pid // 256 % 50}.{pid % 256}")
            self.netns.create()
        host = self.netns.host_addr if self.netns else "127.0.0.1"
        self.zookeeper = Daemon("zookeeper", ZooKeeperProcess(root / "zookeeper"), self.t0)
        self.zookeeper.start()
        self._start_devnode(host)
        self._start_companion(host)
        spool = root / "spool"
        spool.mkdir(parents=True)
        for i in (1, 2):
            self._start_relocator(i, spool, tmpfs=opts.tmpfs_mb if i == 1 else 0)
        producers = [(f"p{i + 1}", r, opts.rate, True) for i, r in enumerate(self.relocators)]
        if opts.legacy_rate > 0:
            producers.append(("legacy", self.relocators[1], opts.legacy_rate, False))
        for i, (name, relocator, rate, idempotent) in enumerate(producers):
            proxy = AckCutProxy(self.tcp_ports[relocator.name], refused_close_s=0.5)
            self.producers.append(
                AckedProducer(
                    name,
                    proxy.port,
                    opts.dcs,
                    first_id=(i + 1) * 10**12,
                    rate=rate,
                    seed=opts.seed * 10 + i,
                    idempotent=idempotent,
                    proxy=proxy,
                ).start()
            )
        if opts.spool_interval_s > 0:
            self.spool = SpoolWriter(
                spool,
                opts.dcs,
                first_id=SPOOL_FIRST_ID,
                events=opts.spool_events,
                interval_s=opts.spool_interval_s,
            ).start()

    def _start_devnode(self, companion_host: str) -> None:
        root = self.root / "devnode"
        root.mkdir(parents=True)
        self._companion_port = free_port()
        config = root / "devnode.toml"
        config.write_text(
            "\n".join(
                [
                    "[ring]",
                    "ring_size = 64",
                    f'nodes = ["{NODE}"]',
                    "[companions]",
                    f'"{NODE}" = "http://{companion_host}:{self._companion_port}"',
                    "[hook]",
                    "timeout_s = 2.0",
                ]
            )
            + "\n"
        )
        process = DevnodeProcess(
            root / "data",
            config=config,
            host=self.netns.ns_addr if self.netns else "127.0.0.1",
            wrapper=self.netns.wrapper if self.netns else (),
        )
        self.devnode = Daemon("devnode", process, self.t0)
        self.devnode.start()

    def _start_companion(self, host: str) -> None:
        root = self.root / "companion"
        self.plugin_dir = root / "plugins"
        self.plugin_dir.mkdir(parents=True)
        for name in ("web_5xx.py", "url_latency.py", "event_counts.py"):
            shutil.copy(EXAMPLES / name, self.plugin_dir / name)
        (self.plugin_dir / "slow_scan.py").write_text(SLOW_PLUGIN)
        peers = sorted({"127.0.0.1", host, self.netns.ns_addr if self.netns else "127.0.0.1"})
        lines = [
            "[companion]",
            f'node = "{NODE}"',
            "workers = 2",
            'state_dir = "state"',
            'plugin_dirs = ["plugins"]',
            "entry_points = false",
            f"peers = {json.dumps(peers)}",
            f"audit_dcs = {json.dumps(list(self.options.dcs))}",
            "status_interval_s = 0.5",
            "reload_interval_s = 1.0",
            "[riak]",
            f'nodes = ["{self.devnode_url}"]',
            "[zookeeper]",
            f'hosts = "{self.zk.hosts}"',
            f'root = "{ZK_ROOT}"',
            "health_interval_s = 1.0",
        ]
        config = root / "companion.toml"
        config.write_text("\n".join(lines) + "\n")
        process = CompanionProcess(config, port=self._companion_port, host=host)
        self.companion = Daemon("companion", process, self.t0)
        self.companion.start()

    def _start_relocator(self, i: int, spool: Path, *, tmpfs: int) -> None:
        name = f"relocator-{i}"
        root = self.root / name
        data = root / "data"
        root.mkdir(parents=True)
        if tmpfs:
            self.tmpfs = TmpfsMount(data, tmpfs).mount()
        process, self.tcp_ports[name] = relocator_process(
            root,
            {"devnode": self.devnode_url},
            name="relocator",
            data_dir=data,
            spool_dir=spool,
            writer_id=i,
            zookeeper=(self.zk.hosts, ZK_RELOCATOR_ROOT),
            grace_s=0.5,
        )
        self.writer_ids[name] = i
        daemon = Daemon(name, process, self.t0)
        self.relocators.append(daemon)
        daemon.start()

    def stop_load(self, flush_s: float) -> dict[str, bool]:
        """Stop the producers and the spool writer; whether each producer's events were
        all acknowledged within ``flush_s``."""
        if self.spool:
            self.spool.stop()
        return {p.name: p.stop(flush_s) for p in self.producers}

    def close(self) -> None:
        """Stop everything that is still running (load, daemons); the namespace and the
        mount are removed by ``chaos_system.CLEANUP``."""
        for p in self.producers:
            p.halt()
        for p in self.producers:
            with contextlib.suppress(Exception):
                p.stop(0.1)
        if self.spool:
            self.spool.stop()
        for d in reversed(self.daemons):
            d.close()

    # -- probes ---------------------------------------------------------------------------

    def zk_ok(self) -> bool:
        try:
            return four_letter(self.zk.port, "ruok") == "imok"
        except OSError:
            return False

    def relocator_status(self, daemon: Daemon) -> dict[str, Any] | None:
        try:
            return self.relocator_process(daemon).status()
        except (OSError, ValueError):
            return None

    def events_pushed(self) -> dict[str, int]:
        """Events each answering relocator pushed since it started (its counter)."""
        pushed = {}
        for d in self.relocators:
            status = self.relocator_status(d)
            if status is not None:
                pushed[d.name] = sum(status["events_pushed"].values())
        return pushed
