"""A harness that runs a real companion (gunicorn master + workers), for tests and benches.

It writes nothing itself: give it a settings file. It starts
``python -m companion --config FILE --listen 127.0.0.1:<free port>`` with its log in a
file, waits until ``/healthz`` answers 200 (every worker has loaded its plugins when
``wait_workers`` status snapshots exist), and stops it with SIGTERM (then SIGKILL of its
process group, so no worker or sandboxed child outlives it).

Fault injection without code flags: :func:`forks_refused` puts running processes under
a real kernel limit on new processes and threads (a pids cgroup as root, where
``RLIMIT_NPROC`` does not apply; ``RLIMIT_NPROC`` otherwise), so ``fork`` fails with
``EAGAIN`` as on a machine out of processes; :func:`children_of` finds a companion's
workers and :func:`fork_servers_of` their fork servers.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import resource
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devnode.testing import DevnodeProcess, free_port
from eventstore.blob import pack_blob
from eventstore.names import ChunkKey, format_metadata
from eventstore.riak import NotFound, Retry, RiakClient
from fleet.harness import ServerProcess, children_of, environment_without
from substreams.results import ResultRecord, read_result

__all__ = [
    "HOSTILE_PLUGINS",
    "CompanionProcess",
    "Stack",
    "children_of",
    "fork_servers_of",
    "forks_refused",
    "hostile_plugins",
    "process_alive",
    "start_stack",
    "wait_for",
]


def wait_for(
    condition: Callable[[], Any],
    timeout_s: float = 30.0,
    what: str = "condition",
    *,
    interval_s: float = 0.05,
) -> Any:
    """Poll ``condition`` every ``interval_s`` until it returns something true, and return
    that.

    Raises:
        AssertionError: still false after ``timeout_s`` seconds (naming ``what``).
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"{what} not met within {timeout_s}s")


class CompanionProcess(ServerProcess):
    """One companion on a free loopback port."""

    def __init__(
        self,
        config: Path,
        *,
        port: int | None = None,
        start_timeout_s: float = 30.0,
        extra_args: tuple[str, ...] = (),
        python: str = sys.executable,
        host: str = "127.0.0.1",
    ) -> None:
        self.config = config
        self.port = port or free_port()
        # host: the address it listens on and is asked at (the chaos campaign's devnode
        # posts from a network namespace of its own, so not loopback there).
        self.host = host
        self.url = f"http://{host}:{self.port}"
        super().__init__("companion", config.parent / f"companion-{self.port}.log")
        self._start_timeout_s = start_timeout_s
        self._extra_args = extra_args
        self._python = python

    def start(self) -> CompanionProcess:
        """Start and wait for ``/healthz``.

        Raises:
            RuntimeError: it exited or did not become healthy in time; with its log.
        """
        argv = [self._python, "-m", "companion", "--config", str(self.config)]
        argv += ["--listen", f"{self.host}:{self.port}", *self._extra_args]
        self._launch(
            argv,
            healthy=lambda: self.request("GET", "/healthz")[0] == 200,
            timeout_s=self._start_timeout_s,
            env=environment_without(("RIAK_EVENTS_", "PROMETHEUS_MULTIPROC_DIR")),
        )
        return self

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        timeout_s: float = 5.0,
    ) -> tuple[int, bytes]:
        """One HTTP request with ``body`` as JSON, or ``raw`` bytes as they are;
        ``(0, b"")`` when the connection fails."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)
        try:
            payload = (
                raw if raw is not None else None if body is None else json.dumps(body).encode()
            )
            headers = {"Content-Type": "application/json"} if payload is not None else {}
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        except OSError:
            return 0, b""
        finally:
            connection.close()

    def json(self, path: str) -> Any:
        """GET ``path`` and decode its JSON body."""
        status, body = self.request("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path}: HTTP {status}")
        return json.loads(body)

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM to the master, wait, then SIGKILL the whole session's group."""
        return super().stop(timeout_s)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return False


def fork_servers_of(workers: Sequence[int], timeout_s: float = 30.0) -> list[int]:
    """Each worker's fork server (substreams/forkserver.py), once every one runs with its
    first connection's thread: the worker children whose command line runs
    ``substreams.forkserver_process``. A worker's other children (a short-lived helper
    process of a library, a server being replaced) are not counted, nor waited for.

    Raises:
        AssertionError: some worker has no such server within ``timeout_s``.
    """
    marker = b"forkserver_process"

    def servers() -> list[int] | None:
        found = []
        for worker in workers:
            mine = []
            for pid in children_of(worker):
                with contextlib.suppress(OSError):  # gone meanwhile
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                    if marker in cmdline and len(os.listdir(f"/proc/{pid}/task")) > 2:
                        mine.append(pid)
            if len(mine) != 1:
                return None
            found += mine
        return found

    found: list[int] = wait_for(
        servers, timeout_s, f"a fork server for each of the workers {list(workers)}"
    )
    return found


def _pids_cgroup_root() -> Path | None:
    """Where a pids cgroup can be made: cgroup v1's pids hierarchy, or v2's root."""
    v1 = Path("/sys/fs/cgroup/pids")
    if (v1 / "cgroup.procs").exists():
        return v1
    v2 = Path("/sys/fs/cgroup")
    with contextlib.suppress(OSError):
        if "pids" in (v2 / "cgroup.subtree_control").read_text().split():
            return v2
    return None


@contextlib.contextmanager
def forks_refused(pids: Sequence[int]) -> Iterator[None]:
    """While inside, ``pids`` cannot make a process or a thread: ``fork`` and thread
    starts fail with ``EAGAIN`` ("Resource temporarily unavailable"), as on a machine
    out of processes. Their children made later inherit the limit.

    Root is exempt from ``RLIMIT_NPROC``, so as root the processes are moved into a
    pids cgroup of their own whose ``pids.max`` is their current count, and moved back
    on exit; otherwise each gets ``RLIMIT_NPROC`` 1 (the user's processes and threads
    are always more) and its old limit back on exit. (Moved back to the root of the
    pids hierarchy, where a test process tree runs.)

    Raises:
        RuntimeError: neither mechanism is available (never a silent no-op).
    """
    if os.geteuid() != 0:
        saved = {pid: resource.prlimit(pid, resource.RLIMIT_NPROC) for pid in pids}
        for pid, (_, hard) in saved.items():
            resource.prlimit(pid, resource.RLIMIT_NPROC, (1, hard))
        try:
            yield
        finally:
            for pid, limits in saved.items():
                with contextlib.suppress(ProcessLookupError):
                    resource.prlimit(pid, resource.RLIMIT_NPROC, limits)
        return
    root = _pids_cgroup_root()
    if root is None:
        raise RuntimeError("forks_refused: no pids cgroup controller to limit processes with")
    group = root / f"riak-events-test-{uuid.uuid4().hex[:12]}"
    group.mkdir()
    try:
        for pid in pids:  # moves every thread of the process
            (group / "cgroup.procs").write_text(str(pid))
        (group / "pids.max").write_text((group / "pids.current").read_text().strip())
        yield
    finally:
        (group / "pids.max").write_text("max")
        for member in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # gone meanwhile
                (root / "cgroup.procs").write_text(member)
        group.rmdir()


@dataclass
class Stack:
    """A devnode + companion pair and helpers to write epochs and read results."""

    root: Path
    devnode: DevnodeProcess
    companion: CompanionProcess
    riak: RiakClient
    plugin_dir: Path
    keys: list[ChunkKey] = field(default_factory=list)

    def write_epoch(
        self, epoch: int, dc: str, chunks: dict[tuple[str, str, int], list[dict[str, Any]]]
    ) -> list[ChunkKey]:
        """Write the chunks, then the metadata (which fires the hook)."""
        keys = []
        for (type_, subtype, chunk), events in chunks.items():
            key = ChunkKey(epoch, dc, type_, subtype, chunk)
            self.riak.put("events", "events", key.format(), pack_blob(events))
            keys.append(key)
        self.riak.put(
            "epochs",
            "epochs",
            f"{epoch}-{dc}",
            format_metadata(keys).encode(),
            content_type="text/plain",
        )
        return keys

    def result(self, substream: str, key: ChunkKey) -> ResultRecord | None:
        try:
            obj = self.riak.get("substreams", substream, key.format())
        except NotFound:
            return None
        return read_result(obj.value, key=key.format())

    def wait_results(
        self, substream: str, keys: list[ChunkKey], timeout_s: float = 20.0
    ) -> dict[ChunkKey, ResultRecord]:
        """Wait until every key has a result of ``substream``; fails with the log if not."""
        deadline = time.monotonic() + timeout_s
        found: dict[ChunkKey, ResultRecord] = {}
        while time.monotonic() < deadline:
            for key in keys:
                if key not in found:
                    record = self.result(substream, key)
                    if record is not None:
                        found[key] = record
            if len(found) == len(keys):
                return found
            time.sleep(0.05)
        missing = [k.format() for k in keys if k not in found]
        raise AssertionError(
            f"{substream}: no result for {missing}\n{self.companion.log_text()[-6000:]}"
        )

    def write_plugin(self, name: str, source: str) -> Path:
        path = self.plugin_dir / name
        tmp = self.plugin_dir / f".{name}.tmp"
        tmp.write_text(source)
        tmp.replace(path)
        return path

    def stop(self) -> None:
        """Stop the companion, then the devnode."""
        self.companion.stop()
        self.devnode.stop()
        self.riak.close()


#: The one logical node of a test stack's ring.
NODE = "dev1@127.0.0.1"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return str(value)


def start_stack(
    root: Path,
    *,
    plugins: dict[str, str] | None = None,
    companion: dict[str, Any] | None = None,
    hook: dict[str, Any] | None = None,
    zk_hosts: str = "",
    zk_root: str = "/riak-events",
    zk_health_interval_s: float | None = None,
    zk_session_timeout_s: float | None = None,
    zookeeper: dict[str, Any] | None = None,
    devnode_port: int | None = None,
    companion_port: int | None = None,
) -> Stack:
    """Start a devnode whose hook drives a companion, with these plugin files.

    Args:
        root: a fresh directory for data, configs, plugins, state and logs.
        plugins: file name -> source, written into ``root/plugins``.
        companion: ``[companion]`` settings over the test defaults.
        hook: the devnode's ``[hook]`` settings.
        zk_hosts: ZooKeeper for the companion (empty: none).
        zk_root: the companion's ZooKeeper root.
        zk_health_interval_s: refresh of the live znode and of the cluster view.
        zk_session_timeout_s: the ZooKeeper session timeout the companion asks for.
        zookeeper: more ``[zookeeper]`` settings (``auth``, ``trusted_keys``...).
        devnode_port, companion_port: their ports (default: free ones).
    """
    plugin_dir = root / "plugins"
    plugin_dir.mkdir(parents=True, exist_ok=True)
    for name, source in (plugins or {}).items():
        (plugin_dir / name).write_text(source)
    port = companion_port or free_port()
    devnode_config = root / "devnode.toml"
    lines = ["[ring]", "ring_size = 64", f'nodes = ["{NODE}"]', "[companions]"]
    lines += [f'"{NODE}" = "http://127.0.0.1:{port}"', "[hook]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in (hook or {}).items()]
    devnode_config.write_text("\n".join(lines) + "\n")
    devnode = DevnodeProcess(root / "data", config=devnode_config, port=devnode_port).start()
    options: dict[str, Any] = {
        "node": NODE,
        "workers": 2,
        "state_dir": "state",
        "plugin_dirs": ["plugins"],
        "entry_points": False,
        "status_interval_s": 0.2,
        "reload_interval_s": 0.2,
        **(companion or {}),
    }
    lines = ["[companion]", *[f"{k} = {_toml_value(v)}" for k, v in options.items()]]
    lines += ["[riak]", f'nodes = ["{devnode.url}"]']
    if zk_hosts:
        lines += ["[zookeeper]", f'hosts = "{zk_hosts}"', f'root = "{zk_root}"']
        if zk_health_interval_s is not None:
            lines.append(f"health_interval_s = {zk_health_interval_s}")
        if zk_session_timeout_s is not None:
            lines.append(f"session_timeout_s = {zk_session_timeout_s}")
        lines += [f"{k} = {_toml_value(v)}" for k, v in (zookeeper or {}).items()]
    config = root / "companion.toml"
    config.write_text("\n".join(lines) + "\n")
    process = CompanionProcess(config, port=port)
    stack = Stack(
        root,
        devnode,
        process,
        RiakClient([devnode.url], retry=Retry(max_tries=3, deadline_s=10.0)),
        plugin_dir,
    )
    try:
        process.start()
    except BaseException:
        devnode.stop()
        raise
    return stack


#: The hostile plugin set of issue 13 (one plugin file), used by the fairness test and
#: bench/fairness_bench.py: an endless loop, a sleep that swallows the soft timeout's
#: SIGALRM, a 10 GB list, os._exit, a segfault, an exception, a 100 MB result, 50 forks,
#: a socket PUT into the store and a file write. ``{timeout}`` is the wall-clock limit
#: of the two plugins that only a deadline stops.
HOSTILE_PLUGINS = """
import ctypes, os, time, urllib.request
from substreams import substream

@substream(name="h_loop", types=["t"], timeout_s={timeout})
def h_loop(events, ctx):
    while True:
        pass

@substream(name="h_sleep", types=["t"], timeout_s={timeout})
def h_sleep(events, ctx):
    while True:  # swallows the SIGALRM of the soft timeout: only SIGKILL ends it
        try:
            time.sleep(30)
        except BaseException:
            continue

@substream(name="h_10gb", types=["t"])
def h_10gb(events, ctx):
    return [0] * (10 * 2**30 // 8)

@substream(name="h_exit", types=["t"])
def h_exit(events, ctx):
    os._exit(3)

@substream(name="h_segv", types=["t"])
def h_segv(events, ctx):
    return ctypes.string_at(0)

@substream(name="h_raise", types=["t"])
def h_raise(events, ctx):
    raise RuntimeError("hostile: raised on purpose")

@substream(name="h_100mb", types=["t"], memory_mb=1024)
def h_100mb(events, ctx):
    return os.urandom(100 * 2**20)  # incompressible: over the cap once packed

@substream(name="h_forks", types=["t"])
def h_forks(events, ctx):
    return [os.fork() for _ in range(50)]

@substream(name="h_put", types=["t"])
def h_put(events, ctx):
    request = urllib.request.Request(
        "http://127.0.0.1:8098/types/events/buckets/events/keys/pwned", b"x", method="PUT"
    )
    return urllib.request.urlopen(request, timeout=1).status

@substream(name="h_write", types=["t"])
def h_write(events, ctx):
    with open("/tmp/riak-events-fairness-escape", "w") as f:
        f.write("x")
    return 1
"""


def hostile_plugins(timeout_s: float) -> str:
    """:data:`HOSTILE_PLUGINS` with its two looping plugins limited to ``timeout_s``."""
    return HOSTILE_PLUGINS.replace("{timeout}", repr(timeout_s))
