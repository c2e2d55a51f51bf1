"""The processes of a local stack, started and stopped in order.

Order (each waits for the previous one's health check, through the existing harnesses):

1. ZooKeeper (:class:`relocator.testing.ZooKeeperProcess`, Debian's package), unless
   one is given or there is none;
2. the devnode and the companion (:func:`companion.testing.start_stack`: the devnode's
   hook posts to the companion; the companion runs the plugins directories and the
   installed example plugins, hot reloaded);
3. the relocator (:class:`relocator.testing.RelocatorProcess`), pushing to the devnode;
4. with ``loadgen_rate``, ``riak-events loadgen`` sending to the relocator over TCP.

Stopping runs the other way round (producer first, so the relocator flushes what it
acknowledged; ZooKeeper last, so the others leave it cleanly). Every process runs in a
session of its own (:mod:`fleet.harness`) and is stopped with SIGTERM,
then SIGKILL of its whole process group: no worker or sandbox child outlives the stack.

Failure semantics: a process that does not become healthy raises :class:`StartFailed`
naming it and its log; the caller stops what started (:meth:`DevStack.stop` stops
whatever was started, in any state). Ports are checked before anything starts
(:func:`ports_in_use`), so a port taken by another program is one line, not a log.
One process can be stopped and started again while the others run
(:meth:`DevStack.stop_process`, :meth:`DevStack.start_process`: ``dev stop|start``); a
process stopped so is not an exit that ends the stack (:meth:`DevStack.exited`).
"""

from __future__ import annotations

import importlib.util
import socket
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from companion.testing import Stack, start_stack
from devnode.testing import free_port
from fleet.devstack.errors import DevStackError, StartFailed
from fleet.harness import ServerProcess, environment_without
from relocator.testing import RelocatorProcess, ZooKeeperProcess, write_config

__all__ = [
    "DEFAULT_PORTS",
    "DevStack",
    "DevStackError",
    "LoadgenProcess",
    "Ports",
    "StackOptions",
    "StartFailed",
    "free_ports",
    "ports_in_use",
]


@dataclass(frozen=True)
class Ports:
    """The stack's TCP ports (``relocator_udp`` is UDP)."""

    devnode: int
    companion: int
    relocator_udp: int
    relocator_tcp: int
    relocator_ops: int
    zookeeper: int


#: The documented defaults of each daemon: the README's commands work unchanged.
DEFAULT_PORTS = Ports(
    devnode=8098,
    companion=5000,
    relocator_udp=5140,
    relocator_tcp=5141,
    relocator_ops=9141,
    zookeeper=2181,
)


def free_ports() -> Ports:
    """Ports that are free now, all different (the OS picks them)."""
    chosen: list[int] = []
    while len(chosen) < 6:
        port = free_port()
        if port not in chosen:
            chosen.append(port)
    return Ports(*chosen)


def _bindable(port: int, kind: int) -> bool:
    """Whether a daemon can bind ``port`` now, binding it the way the daemons do.

    Every TCP listener of the stack sets ``SO_REUSEADDR`` (uvicorn's and uvloop's
    ``create_server`` for the devnode, gunicorn for the companion, ``socketserver`` with
    ``allow_reuse_address`` for the relocator's intake and ops ports, ZooKeeper's
    ``NIOServerCnxnFactory``), so connections in TIME_WAIT from a stack that just
    stopped do not keep it from binding, while a socket that listens does. The
    relocator's UDP socket binds without it (UDP has no TIME_WAIT).
    """
    with socket.socket(socket.AF_INET, kind) as s:
        if kind == socket.SOCK_STREAM:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ports_in_use(ports: Ports, *, zookeeper: bool) -> list[tuple[str, int]]:
    """The (what, port) pairs that a daemon could not bind on 127.0.0.1 now
    (:func:`_bindable`)."""
    wanted = {k: v for k, v in asdict(ports).items() if zookeeper or k != "zookeeper"}
    return [
        (name.replace("_", " "), port)
        for name, port in wanted.items()
        if not _bindable(port, socket.SOCK_DGRAM if name == "relocator_udp" else socket.SOCK_STREAM)
    ]


def kazoo_installed() -> bool:
    """Whether the ``zookeeper`` extra (kazoo) is importable."""
    return importlib.util.find_spec("kazoo") is not None


@dataclass(frozen=True)
class StackOptions:
    """What ``dev up`` was asked for.

    Attributes:
        data_dir: every process's data, configs and logs live under it.
        plugin_dirs: the companion's plugin directories (empty: ``data_dir/plugins``).
        ports: where each daemon listens.
        start_zookeeper: start Debian's ZooKeeper on ``ports.zookeeper``.
        zookeeper: hosts of a ZooKeeper to use instead (``""``: none).
        zk_root: the root znode of every daemon.
        loadgen_rate: events per second of a load generator (0: none).
        context_file: the context file to write the stack's addresses to once it runs
            (removed when it ends; ``eventstore.context``), None: none.
    """

    data_dir: Path
    plugin_dirs: tuple[Path, ...] = ()
    ports: Ports = DEFAULT_PORTS
    start_zookeeper: bool = True
    zookeeper: str = ""
    zk_root: str = "/riak-events"
    loadgen_rate: float = 0.0
    loadgen_dcs: str = "ams1,ams4"
    relocator_grace_s: float = 1.0
    context_file: Path | None = None


class LoadgenProcess(ServerProcess):
    """``riak-events loadgen`` sending to ``target`` until stopped."""

    def __init__(self, target: str, rate: float, dcs: str, log_path: Path) -> None:
        super().__init__("loadgen", log_path)
        self.target = target
        self.rate = rate
        self.dcs = dcs

    def start(self) -> LoadgenProcess:
        """Start it (no health check: a producer serves nothing).

        Raises:
            RuntimeError: it exited at once (with its log).
        """
        argv = [sys.executable, "-c", "from relocator.cli import loadgen; loadgen()"]
        argv += ["--target", self.target, "--rate", f"{self.rate:g}", "--dcs", self.dcs]
        argv += ["--duration-s", str(10**9)]
        self._launch(argv, healthy=lambda: True, timeout_s=5.0, env=environment_without())
        return self


@dataclass
class DevStack:
    """The stack's processes; :meth:`start` them, :meth:`stop` them.

    Args:
        options: what to run and where.
        on_started: called with each process's name once it is healthy (the supervisor
            records its pid in the state file).
    """

    options: StackOptions
    on_started: Callable[[str], None] = lambda name: None
    zookeeper: ZooKeeperProcess | None = None
    pair: Stack | None = None
    relocator: RelocatorProcess | None = None
    loadgen: LoadgenProcess | None = None
    #: The processes stopped by :meth:`stop_process` (``dev stop``), not yet started.
    stopped: set[str] = field(default_factory=set)
    _starting: list[ServerProcess] = field(default_factory=list)

    @property
    def root(self) -> Path:
        return self.options.data_dir

    @property
    def plugin_dirs(self) -> tuple[Path, ...]:
        return self.options.plugin_dirs or (self.root / "plugins",)

    @property
    def zk_hosts(self) -> str:
        """The ZooKeeper the daemons use (``""``: none)."""
        if self.options.zookeeper:
            return self.options.zookeeper
        if self.options.start_zookeeper:
            return f"127.0.0.1:{self.options.ports.zookeeper}"
        return ""

    def log_files(self) -> dict[str, Path]:
        """Each process's log file, known before it starts (the harnesses name them)."""
        ports = self.options.ports
        logs = {
            "devnode": self.root / f"devnode-{ports.devnode}.log",
            "companion": self.root / f"companion-{ports.companion}.log",
            "relocator": self.root / "relocator.log",
        }
        if self.options.start_zookeeper:
            logs = {"zookeeper": self.root / "zookeeper" / "zookeeper.log", **logs}
        if self.options.loadgen_rate > 0:
            logs["loadgen"] = self.root / "loadgen.log"
        return logs

    def endpoints(self) -> dict[str, Any]:
        """Where each service answers (for the banner, the state file and ``dev status``)."""
        p = self.options.ports
        companion = f"http://127.0.0.1:{p.companion}"
        return {
            "riak": f"http://127.0.0.1:{p.devnode}",
            "companion": companion,
            "status_page": companion + "/",
            "relocator_udp": f"127.0.0.1:{p.relocator_udp}",
            "relocator_tcp": f"127.0.0.1:{p.relocator_tcp}",
            "relocator_ops": f"http://127.0.0.1:{p.relocator_ops}",
            "zookeeper": self.zk_hosts,
            "zk_root": self.options.zk_root,
            "plugin_dirs": [str(d) for d in self.plugin_dirs],
            "data_dir": str(self.root),
        }

    def processes(self) -> dict[str, ServerProcess]:
        """The processes started so far, by name."""
        found: dict[str, ServerProcess | None] = {
            "zookeeper": self.zookeeper,
            "devnode": self.pair.devnode if self.pair else None,
            "companion": self.pair.companion if self.pair else None,
            "relocator": self.relocator,
            "loadgen": self.loadgen,
        }
        return {name: p for name, p in found.items() if p is not None}

    def start(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Start every process in order; returns early when ``should_stop()`` is true.

        Raises:
            StartFailed: one did not start (those before it still run: call stop()).
        """
        o = self.options
        self.root.mkdir(parents=True, exist_ok=True)
        logs = self.log_files()
        steps: list[tuple[str, Callable[[], None]]] = []
        if o.start_zookeeper:
            steps.append(("zookeeper", self._start_zookeeper))
        steps += [("companion", self._start_pair), ("relocator", self._start_relocator)]
        if o.loadgen_rate > 0:
            steps.append(("loadgen", self._start_loadgen))
        for name, step in steps:
            if should_stop():
                return
            try:
                step()
            except RuntimeError as e:
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                what = first.split(" ", 1)[0] if first.split(" ", 1)[0] in logs else name
                raise StartFailed(what, first.removeprefix(what).strip(), logs.get(what)) from e
            if name == "companion":
                self.on_started("devnode")
            self.on_started(name)

    def _start_zookeeper(self) -> None:
        zk = ZooKeeperProcess(self.root / "zookeeper", port=self.options.ports.zookeeper)
        self._starting.append(zk)
        self.zookeeper = zk.start()

    def _start_pair(self) -> None:
        for directory in self.plugin_dirs:
            directory.mkdir(parents=True, exist_ok=True)
        self.pair = start_stack(
            self.root,
            companion={
                "plugin_dirs": [str(d.resolve()) for d in self.plugin_dirs],
                "entry_points": True,
            },
            zk_hosts=self.zk_hosts,
            zk_root=self.options.zk_root,
            devnode_port=self.options.ports.devnode,
            companion_port=self.options.ports.companion,
        )

    def _start_relocator(self) -> None:
        p = self.options.ports
        config = write_config(
            self.root / "relocator.toml",
            data_dir=self.root / "relocator",
            clusters={"devnode": f"http://127.0.0.1:{p.devnode}"},
            tcp_port=p.relocator_tcp,
            udp_port=p.relocator_udp,
            metrics_port=p.relocator_ops,
            zookeeper=(self.zk_hosts, self.options.zk_root)
            if self.zk_hosts and kazoo_installed()
            else None,
            grace_s=self.options.relocator_grace_s,
            tick_s=0.1,
            segment_max_s=1.0,
        )
        relocator = RelocatorProcess(
            config, metrics_port=p.relocator_ops, log_path=self.root / "relocator.log"
        )
        self._starting.append(relocator)
        self.relocator = relocator.start()

    def _start_loadgen(self) -> None:
        o = self.options
        loadgen = LoadgenProcess(
            f"127.0.0.1:{o.ports.relocator_tcp}",
            o.loadgen_rate,
            o.loadgen_dcs,
            self.root / "loadgen.log",
        )
        self._starting.append(loadgen)
        self.loadgen = loadgen.start()

    def exited(self) -> dict[str, int | None]:
        """The processes that were started and are no longer running (reaped, stopped
        for good), with their exit codes; those stopped by :meth:`stop_process` are not
        among them."""
        gone: dict[str, int | None] = {}
        for name, process in self.processes().items():
            if name not in self.stopped and not process.running:
                gone[name] = process.stop()
        return gone

    def _process(self, name: str) -> ServerProcess:
        process = self.processes().get(name)
        if process is None:
            known = ", ".join(self.processes())
            raise DevStackError(f"no {name} in this stack (it runs: {known})")
        return process

    def stop_process(self, name: str) -> int | None:
        """Stop one process (SIGTERM, then SIGKILL of its group); the others run on.

        Returns:
            Its exit code (None: it was not running).

        Raises:
            DevStackError: the stack has no such process.
        """
        process = self._process(name)
        self.stopped.add(name)
        return process.stop()

    def start_process(self, name: str) -> None:
        """Start again a process stopped by :meth:`stop_process`, as it was started
        (same command, ports, data and log), and wait for its health check.

        Raises:
            DevStackError: no such process, or it runs.
            StartFailed: it did not start (it stays stopped).
        """
        process = self._process(name)
        if process.running:
            raise DevStackError(f"{name} already runs (pid {process.pid})")
        try:
            process.start()
        except RuntimeError as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise StartFailed(name, first.removeprefix(name).strip(), process.log_path) from e
        self.stopped.discard(name)

    def stop(self) -> None:
        """Stop whatever was started, producer first, ZooKeeper last (never raises for
        a process already gone)."""
        for process in (self.loadgen, self.relocator):
            if process is not None:
                process.stop()
        if self.pair is not None:
            self.pair.stop()
        if self.zookeeper is not None:
            self.zookeeper.stop()
        for started in self._starting:  # one interrupted half-way through its start
            started.stop()
