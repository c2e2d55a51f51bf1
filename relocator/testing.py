"""Harnesses for tests and benchmarks: a real ZooKeeper server and relocator processes.

:class:`ZooKeeperProcess` runs Debian's ``zookeeper`` package (``/usr/share/java/
zookeeper.jar``, Java) as a standalone server on a free loopback port with its own data
directory and config, waits until it answers ``ruok`` with ``imok``, and keeps its log
for failing tests (kazoo's harness does the same). :class:`RelocatorProcess` runs
``python -m relocator`` with a given config and can SIGKILL it for crash tests;
:func:`run_relocator_to_exit` runs one that is expected to refuse to start, and
:func:`hiding_modules` makes optional packages unimportable in such a child.
:func:`numbered_sealer` is a sealer for unit tests, without a process.
"""

from __future__ import annotations

import itertools
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import sereal_codec as sereal
from devnode.testing import free_port
from eventstore import zkpaths
from eventstore.blob import unpack_blob
from eventstore.names import parse_metadata
from eventstore.riak import NotFound, RiakClient
from fleet.harness import Background, ServerProcess, environment_without
from relocator import defaults
from relocator.metrics import Metrics
from relocator.sealer import Sealer
from relocator.wire import ACK, LENGTH, encode_frame

ZOOKEEPER_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")


def zookeeper_available() -> bool:
    """Whether Java and Debian's ZooKeeper jar are installed."""
    return shutil.which("java") is not None and Path(ZOOKEEPER_JARS[0]).exists()


def four_letter(port: int, word: str, timeout_s: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``) and return the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperProcess(ServerProcess):
    """A standalone ZooKeeper server in ``directory`` on a loopback port (``port``, or a
    free one)."""

    def __init__(
        self,
        directory: Path,
        *,
        tick_ms: int = 200,
        start_timeout_s: float = 30.0,
        port: int | None = None,
    ) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.hosts = f"127.0.0.1:{self.port}"
        super().__init__("zookeeper", directory / "zookeeper.log")
        self._tick_ms = tick_ms
        self._start_timeout_s = start_timeout_s

    def start(self) -> ZooKeeperProcess:
        """Write the config, start the JVM, wait for ``imok``.

        Raises:
            RuntimeError: it exited or did not answer in time; the message holds its log.
        """
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.directory / "zoo.cfg"
        cfg.write_text(
            f"tickTime={self._tick_ms}\ndataDir={data}\nclientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat\nmaxClientCnxns=0\n"
            f"minSessionTimeout={2 * self._tick_ms}\nmaxSessionTimeout=60000\n"
        )
        classpath = ":".join(j for j in ZOOKEEPER_JARS if Path(j).exists())
        argv = [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            classpath,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(cfg),
        ]
        self._launch(
            argv,
            healthy=self._answers_imok,
            timeout_s=self._start_timeout_s,
            poll_interval_s=0.1,
            what="answering ruok",
        )
        return self

    def _answers_imok(self) -> bool:
        try:
            return four_letter(self.port, "ruok") == "imok"
        except OSError:
            return False


class RelocatorProcess(ServerProcess):
    """``python -m relocator --config CONFIG`` as a subprocess, for crash tests."""

    def __init__(
        self, config: Path, *, metrics_port: int, log_path: Path, env: dict[str, str] | None = None
    ) -> None:
        self.config = config
        self.metrics_port = metrics_port
        super().__init__("relocator", log_path)
        self._env = env

    def start(self, wait_s: float = 20.0) -> RelocatorProcess:
        """Start and wait until ``/status`` answers.

        Raises:
            RuntimeError: it exited or did not answer in time (with its log).
        """
        env = environment_without()
        env.update(self._env or {})
        self._launch(
            [sys.executable, "-m", "relocator", "--config", str(self.config)],
            healthy=self._answers_status,
            timeout_s=wait_s,
            env=env,
            what="answering /status",
        )
        return self

    def _answers_status(self) -> bool:
        try:
            self.status()
        except (OSError, ValueError):
            return False
        return True

    def status(self) -> dict[str, Any]:
        """The process's ``/status``."""
        url = f"http://127.0.0.1:{self.metrics_port}/status"
        with urllib.request.urlopen(url, timeout=2) as r:
            value: dict[str, Any] = json.load(r)
        return value

    def http(self, path: str) -> tuple[int, bytes]:
        """GET ``path`` (``/healthz``, ``/readyz``...) of the ops endpoint.

        Returns:
            (HTTP status, body), error statuses included.
        """
        url = f"http://127.0.0.1:{self.metrics_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return int(r.status), bytes(r.read())
        except urllib.error.HTTPError as e:
            return int(e.code), bytes(e.read())

    def metrics(self) -> str:
        """The process's ``/metrics`` text."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=2) as r:
            text: str = r.read().decode()
        return text

    def wait_drained(self, timeout_s: float = 30.0) -> dict[str, Any]:
        """Wait until the process's ``/status`` is :func:`drained`, and return it.

        Raises:
            RuntimeError: not drained within ``timeout_s`` (with the last status and the
                log's tail).
        """
        deadline = time.monotonic() + timeout_s
        while not drained(status := self.status()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"relocator did not drain: {status}\n{self.log_text()[-5000:]}")
            time.sleep(0.1)
        return status

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM (clean shutdown that flushes), SIGKILL after ``timeout_s``."""
        return super().stop(timeout_s)


def run_relocator_to_exit(
    config: Path, *, timeout_s: float = 60.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m relocator --config CONFIG`` that should exit by itself (a refusal
    to start) and return how it ended (text stdout and stderr).

    Raises:
        RuntimeError: it was still running after ``timeout_s`` (it is killed first).
    """
    full = environment_without()
    full.update(env or {})
    try:
        return subprocess.run(
            [sys.executable, "-m", "relocator", "--config", str(config)],
            env=full,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"relocator still running after {timeout_s}s: {e.stderr!r}") from e


def with_sitecustomize(directory: Path, code: str) -> dict[str, str]:
    """Environment variables that run ``code`` first in a child Python: it is written as
    ``directory/sitecustomize.py`` (``directory`` created if needed), put on
    ``PYTHONPATH``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(code)
    return {"PYTHONPATH": str(directory)}


def hiding_modules(directory: Path, *names: str) -> dict[str, str]:
    """Environment variables that make ``names`` unimportable in a child Python (an
    optional extra not installed): a ``sitecustomize`` in ``directory`` sets
    ``sys.modules[name] = None``, so ``import name`` raises ``ModuleNotFoundError``."""
    lines = ["import sys"] + [f"sys.modules[{n!r}] = None" for n in names]
    return with_sitecustomize(directory, "\n".join(lines) + "\n")


def write_config(
    path: Path,
    *,
    data_dir: Path,
    clusters: dict[str, str],
    tcp_port: int,
    metrics_port: int,
    spool_dir: Path | None = None,
    writer_id: int = 0,
    zookeeper: tuple[str, str] | None = None,
    udp_port: int | None = None,
    grace_s: float = 0.3,
    tick_s: float = 0.05,
    segment_max_s: float = 0.3,
    extra: str = "",
) -> Path:
    """A relocator TOML config for a test (UDP intake only when ``udp_port`` is given)."""
    lines = [
        "[relocator]",
        f'data_dir = "{data_dir}"',
        f'tcp_listen = "127.0.0.1:{tcp_port}"',
        f'udp_listen = "127.0.0.1:{udp_port}"' if udp_port else 'udp_listen = ""',
        f'metrics_listen = "127.0.0.1:{metrics_port}"',
        f"writer_id = {writer_id}",
        f"grace_s = {grace_s}",
        f"tick_s = {tick_s}",
        f"segment_max_s = {segment_max_s}",
        "push_backoff_s = 0.1",
        "push_backoff_max_s = 0.5",
    ]
    if spool_dir is not None:
        lines.append(f'spool_dir = "{spool_dir}"')
    lines.append(extra)
    for name, url in clusters.items():
        lines += [
            f"[clusters.{name}]",
            f'nodes = ["{url}"]',
            "retry_max_tries = 2",
            "retry_deadline_s = 2.0",
            "connect_timeout_s = 0.5",
            "timeout_s = 5.0",
        ]
    if zookeeper is not None:
        lines += [
            "[zookeeper]",
            f'hosts = "{zookeeper[0]}"',
            f'root = "{zookeeper[1]}"',
            "session_timeout_s = 2.0",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def relocator_process(
    workdir: Path,
    clusters: dict[str, str],
    *,
    name: str = "r",
    data_dir: Path | None = None,
    env: dict[str, str] | None = None,
    **config: Any,
) -> tuple[RelocatorProcess, int]:
    """A relocator for a test or bench, configured but not started: free loopback TCP and
    metrics ports, the config in ``workdir/<name>.toml`` (:func:`write_config`; ``config``
    holds its other keywords), the data in ``data_dir`` (default ``workdir/data``), the
    log in ``workdir/<name>.log``.

    Returns:
        The process and its TCP intake port.
    """
    tcp_port, metrics_port = free_port(), free_port()
    path = write_config(
        workdir / f"{name}.toml",
        data_dir=data_dir or workdir / "data",
        clusters=clusters,
        tcp_port=tcp_port,
        metrics_port=metrics_port,
        **config,
    )
    process = RelocatorProcess(
        path, metrics_port=metrics_port, log_path=workdir / f"{name}.log", env=env
    )
    return process, tcp_port


def drained(status: Mapping[str, Any]) -> bool:
    """Whether a relocator's ``/status`` shows nothing left to push: no open event, no
    sealed batch, no cluster's backlog."""
    return (
        status["open_events"] == 0
        and status["batches"] == 0
        and not any(status["backlog"].values())
    )


def numbered_sealer(
    *,
    writer_id: int = 7,
    first_seq: int = 40,
    chunk_max_bytes: int = 20_000,
    max_event_bytes: int = defaults.MAX_EVENT_BYTES,
) -> tuple[Sealer, Metrics]:
    """A :class:`~relocator.sealer.Sealer` compressing with zstd whose sequence numbers
    count up from ``first_seq``, and the fresh :class:`~relocator.metrics.Metrics` it
    counts in."""
    counter = itertools.count(first_seq)
    metrics = Metrics()
    sealer = Sealer(
        writer_id=writer_id,
        reserve_seq=lambda: next(counter),
        chunk_max_bytes=chunk_max_bytes,
        compress="zstd",
        metrics=metrics,
        max_event_bytes=max_event_bytes,
    )
    return sealer, metrics


class AckedSender(Background):
    """Sends events {"id": N, ...} over TCP in a thread; ``acked`` holds exactly the ids
    the relocator acknowledged. Stops at the first connection error (a crash)."""

    def __init__(self, port: int, dc: str, *, first_id: int, batch: int = 50) -> None:
        super().__init__("acked-sender")
        self.port = port
        self.dc = dc
        self.next_id = first_id
        self.batch = batch
        self.acked: list[int] = []

    def _run(self) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        except OSError:
            return
        sent: list[int] = []
        base = 0
        buf = b""
        try:
            while not self._stop.is_set():
                frames = []
                for _ in range(self.batch):
                    i = self.next_id
                    self.next_id += 1
                    doc = sereal.encode({"id": i, "pad": "x" * (i % 300), "t": ["web", i]})
                    f = encode_frame(int(time.time()), self.dc, "web", "www" if i % 2 else "", doc)
                    frames.append(LENGTH.pack(len(f)) + f)
                    sent.append(i)
                sock.sendall(b"".join(frames))
                while base < len(sent):
                    data = sock.recv(4096)
                    if not data:
                        return
                    buf += data
                    while len(buf) >= ACK.size:
                        (count,) = ACK.unpack_from(buf)
                        buf = buf[ACK.size :]
                        self.acked.extend(sent[base:count])
                        base = count
                time.sleep(0.01)
        except OSError:
            return
        finally:
            sock.close()


def send_acked(sock: socket.socket, frames: Sequence[bytes], *, acked: int = 0) -> int:
    """Send ``frames`` (each given its length prefix) on a producer connection and wait
    until the relocator has acknowledged them all.

    Args:
        sock: a connection to the relocator's TCP intake.
        frames: encoded frames (:func:`relocator.wire.encode_frame`).
        acked: frames acknowledged on this connection before (acknowledgements count
            every frame of the connection).

    Returns:
        The frames acknowledged on the connection now.

    Raises:
        ConnectionError: the relocator closed the connection first.
    """
    sock.sendall(b"".join(LENGTH.pack(len(f)) + f for f in frames))
    want = acked + len(frames)
    buf = b""
    while acked < want:
        data = sock.recv(4096)
        if not data:
            raise ConnectionError(f"relocator closed the connection after {acked} acks")
        buf += data
        while len(buf) >= ACK.size:
            (acked,) = ACK.unpack_from(buf)
            buf = buf[ACK.size :]
    return acked


def drop_spool_file(spool: Path, epoch: int, dc: str, ids: range, *, tag: str = "") -> Path:
    """Drop a spool file of events ``{"id": i, ...}`` for ``ids`` as an aggregator does
    (written aside, then renamed into place); returns its path."""
    data = sereal.encode([{"id": i, "url": "/search", "pad": "p" * (i % 500)} for i in ids])
    name = f"{epoch}-{dc}-web-www-{tag or 'f'}{ids.start}x{len(ids)}.srl"
    tmp = spool / f".{name}.tmp"
    tmp.write_bytes(data)
    path = spool / name
    tmp.replace(path)
    return path


def stored_events(client: RiakClient, dc: str, epochs: range) -> tuple[list[Any], list[str]]:
    """Every event Riak holds for ``dc`` in ``epochs`` (reading metadata, then chunks),
    and the chunk keys listed in metadata that could not be read."""
    events: list[Any] = []
    unreadable: list[str] = []
    for epoch in epochs:
        try:
            value = client.get("epochs", "epochs", f"{epoch}-{dc}").value
        except NotFound:
            continue
        for ref in parse_metadata(value):
            key = f"{epoch}:{dc}:{ref.format()}"
            try:
                events.extend(unpack_blob(client.get("events", "events", key).value, key=key))
            except Exception as e:  # any failure to read is what we look for
                unreadable.append(f"{key}: {e!r}")
    return events, unreadable


def run_loadgen(
    tcp_port: int, *, rate: float, seconds: float, dcs: Sequence[str]
) -> dict[str, Any]:
    """Run ``riak-events loadgen`` against the relocator on loopback ``tcp_port`` for
    ``seconds`` at ``rate`` events per second over ``dcs``, and return its JSON report
    (``sent``...).

    Raises:
        subprocess.CalledProcessError, subprocess.TimeoutExpired: it failed, or ran a
            minute longer than asked.
    """
    cli = Path(sys.executable).with_name("riak-events")
    out = subprocess.run(
        [
            str(cli),
            "loadgen",
            "--target",
            f"127.0.0.1:{tcp_port}",
            "--rate",
            str(rate),
            "--duration-s",
            str(seconds),
            "--dcs",
            ",".join(dcs),
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    )
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def run_pipeline(
    devnode_url: str,
    workdir: Path,
    *,
    rate: float = 3000.0,
    seconds: float = 3.0,
    dcs: tuple[str, ...] = ("ams1", "ams4"),
) -> dict[str, Any]:
    """The main job's relocator step: start a relocator process pushing to
    ``devnode_url``, feed it ``riak-events loadgen`` over TCP for ``seconds`` at ``rate``,
    wait until everything is pushed, and read back what was stored.

    Returns:
        ``{"sent", "stored", "epochs", "chunks", "metadata_keys", "sample_metadata",
        "unreadable"}``; ``stored == sent`` when the pipeline lost nothing.

    Raises:
        RuntimeError: the relocator did not start or did not drain in time (with its log).
    """
    proc, tcp = relocator_process(
        workdir,
        {"devnode": devnode_url},
        name="relocator",
        data_dir=workdir / "relocator-data",
        grace_s=0.5,
    )
    proc.start()
    try:
        first = int(time.time()) - 1
        report = run_loadgen(tcp, rate=rate, seconds=seconds, dcs=dcs)
        proc.wait_drained()
        epochs = range(first, int(time.time()) + 1)
        stored = 0
        unreadable: list[str] = []
        keys: list[str] = []
        chunks = 0
        sample = ""
        with RiakClient([devnode_url]) as client:
            for dc in dcs:
                events, bad = stored_events(client, dc, epochs)
                stored += len(events)
                unreadable += bad
                for epoch in epochs:
                    try:
                        value = client.get("epochs", "epochs", f"{epoch}-{dc}").value
                    except NotFound:
                        continue
                    keys.append(f"{epoch}-{dc}")
                    chunks += len(parse_metadata(value))
                    sample = sample or f"{epoch}-{dc} = {value.decode()}"
        return {
            "sent": report["sent"],
            "stored": stored,
            "epochs": len(keys),
            "chunks": chunks,
            "metadata_keys": keys,
            "sample_metadata": sample,
            "unreadable": unreadable,
        }
    finally:
        proc.stop()


def writer_session(hosts: str, root: str, writer_id: int) -> int:
    """The ZooKeeper session that holds ``<root>/writers/<writer_id>`` (its znode's
    ``ephemeralOwner``; 0 for a persistent znode).

    Raises:
        kazoo.exceptions.NoNodeError: no relocator holds that writer id.
    """
    from kazoo.client import KazooClient  # noqa: PLC0415 (optional dependency)

    zk = KazooClient(hosts=hosts)
    zk.start(timeout=10)
    try:
        _, stat = zk.get(zkpaths.writer(root, writer_id))
        return int(stat.ephemeralOwner)
    finally:
        zk.stop()
        zk.close()
