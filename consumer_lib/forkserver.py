"""The caller's side of the fallback's fork server: a small helper process, started once
per client on the first fallback, that forks the sandboxed child of each chunk.

Why: forking the caller costs its page tables and a copy-on-write fault for every page
it writes afterwards, so a fallback forked from a large caller (a Spark executor, a
consumer holding data) costs ~5 ms per chunk at 37 MB and ~17 ms at 200 MB
(``consumer_lib/DESIGN.md``). The server is a fresh interpreter holding only the
sandbox, the codec and the plugins (:mod:`consumer_lib.forkserver_process`); forking it
costs the same whatever the caller's size, and the chunk is decoded in the child, not in
the caller (whose decode held the GIL).

    server = ForkServer()                                   # no process yet
    outcomes = server.run(plugins, blob.value, key, limits, decode_limits)
    server.close()                                          # the process and its children end

Per request: a connection from the pool (an idle one, or a new socketpair whose far end
is passed to the server over its control socket: nothing else can connect), the
request, the reply awaited with a deadline (every plugin's ``timeout_s`` plus its kill
grace, the decode's, and a margin: the server's own sandbox kills a late child well
before). Threads may call :meth:`ForkServer.run` concurrently: each holds its own
connection, served by its own thread in the server, so up to ``max_connections``
chunks run at once.

The server is started from a thread of this object that lives until :meth:`close`,
because ``PR_SET_PDEATHSIG`` (set by the server on itself) fires when the *thread*
that started it ends: the server is SIGKILLed if this process dies, and it exits when
its control socket closes.

Failure semantics: :meth:`ForkServer.run` raises :class:`ForkServerFailed` (never
hangs) when the server cannot be started, dies during the request (killed, crashed),
does not answer within the deadline (then it is killed), or refuses (no fork, no pipe);
the caller marks the chunk ``error`` with that reason. The next request starts a new
server. Nothing a plugin does reaches the server or the caller.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from queue import SimpleQueue
from typing import Any, ClassVar

from prometheus_client import Counter

from consumer_lib import forkserver_process
from consumer_lib.errors import ConsumerError
from consumer_lib.forkserver_process import DECODE_LIMITS, recv_message, send_message
from eventstore.blob import DecodeLimits
from eventstore.names import ChunkKey
from substreams.api import Substream
from substreams.protocol import Kind, Limits
from substreams.sandbox import Outcome

log = logging.getLogger(__name__)

__all__ = ["SERVER_STARTS_TOTAL", "ForkServer", "ForkServerFailed", "Reply"]

SERVER_STARTS_TOTAL = Counter(
    "consumer_fallback_server_starts_total",
    "Fork servers of the client-side fallback started (a restart after a death counts too)",
)

#: Allowance per request on top of the runs' own deadlines (server and child setup), s.
_MARGIN_S = 10.0
#: How long the server may take to start (a fresh interpreter importing the sandbox), s.
_START_TIMEOUT_S = 60.0
# Runs the server file by path: the consumer library's package (and what it imports)
# stays out of the server; the caller's import path is the server's.
_BOOT = (
    "import json, runpy, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


class ForkServerFailed(ConsumerError):
    """The fork server could not run a request: not started, died, late, or refused.
    Nothing the plugin did; the next request starts a new server."""

    retriable: ClassVar[bool] = True


@dataclasses.dataclass(frozen=True)
class Reply:
    """What the server says about one chunk.

    Attributes:
        decode: how the child's decode of the chunk ended (its ``error`` says why not).
        outcomes: one per plugin asked for, in order (each plugin's own run).
    """

    decode: Outcome
    outcomes: list[Outcome]


class _Process:
    """One started server: the process, its control socket, a generation number."""

    def __init__(self, popen: subprocess.Popen[bytes], control: socket.socket, gen: int) -> None:
        self.popen = popen
        self.control = control
        self.generation = gen
        self.lock = threading.Lock()  # one connection handed over at a time

    def connect(self) -> socket.socket:
        near, far = socket.socketpair()
        try:
            with self.lock:
                socket.send_fds(self.control, [b"c"], [far.fileno()])
        except OSError:
            near.close()
            raise
        finally:
            far.close()
        return near

    def stop(self, *, kill: bool) -> None:
        with contextlib.suppress(OSError):
            self.control.close()
        if kill:
            with contextlib.suppress(OSError):
                self.popen.kill()
        try:
            self.popen.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


class ForkServer:
    """The fallback's fork server (module docstring); lazy: no process until a run.

    Args:
        max_connections: requests in flight at once (more callers wait for one).
    """

    def __init__(self, *, max_connections: int = 4) -> None:
        self._slots = threading.BoundedSemaphore(max(1, max_connections))
        self._lock = threading.Lock()
        self._process: _Process | None = None
        self._generation = 0
        self._idle: list[tuple[int, socket.socket]] = []
        self._spawner: SimpleQueue[Callable[[], None] | None] | None = None
        self._spawner_thread: threading.Thread | None = None

    @staticmethod
    def can_run(plugin: Substream) -> bool:
        """Whether the server can load ``plugin`` itself: from its file, or an installed
        entry point (a plugin declared in the caller's own code cannot be)."""
        if not sys.executable:
            return False
        if plugin.origin.startswith(forkserver_process.ENTRY_POINT_PREFIX):
            return True
        return bool(plugin.origin) and Path(plugin.origin).is_file()

    @property
    def pid(self) -> int | None:
        """The running server's process id (None: not started)."""
        process = self._process
        return None if process is None else process.popen.pid

    def run(
        self,
        plugins: Sequence[tuple[Substream, Limits]],
        value: bytes,
        key: ChunkKey,
        decode_limits: DecodeLimits,
    ) -> Reply:
        """Decode one stored chunk and run ``plugins`` on it in one sandboxed child of
        the server.

        Args:
            plugins: each with its limits (already lowered to the caller's caps).
            value: the chunk's stored bytes, checksum verified by the caller.
            key: the chunk.
            decode_limits: what the chunk may decode to (the caller's store's).

        Returns:
            The decode's outcome and each plugin's.

        Raises:
            ForkServerFailed: see the module docstring.
        """
        header = {
            "plugins": [
                {
                    "origin": sub.origin,
                    "name": sub.name,
                    "version": sub.version,
                    "limits": [
                        lim.timeout_s,
                        lim.memory_mb,
                        lim.max_result_bytes,
                        lim.kill_grace_s,
                    ],
                }
                for sub, lim in plugins
            ],
            "ctx": [key.epoch, key.dc, key.type, key.subtype, key.chunk],
            "decode_limits": dataclasses.asdict(decode_limits),
        }
        deadline_s = _MARGIN_S + sum(
            lim.timeout_s + lim.kill_grace_s for lim in [DECODE_LIMITS, *(pl[1] for pl in plugins)]
        )
        where: dict[str, Any] = {"epoch": key.epoch, "dc": key.dc, "key": key.format()}
        with self._slots:
            gen, conn = self._connection(where)
            try:
                conn.settimeout(deadline_s)
                send_message(conn, header, [value])
                reply, payloads = recv_message(conn)
            except (OSError, EOFError, ValueError) as e:  # TimeoutError is an OSError
                conn.close()
                late = isinstance(e, TimeoutError)
                self._discard(gen, kill=True)
                what = f"did not answer within {deadline_s:.3g}s" if late else f"died: {e}"
                log.error("consumer: key=%s: the fallback's fork server %s", key, what)
                raise ForkServerFailed(f"fork server {what}", **where) from e
            with self._lock:
                if gen == self._generation:
                    self._idle.append((gen, conn))
                else:
                    conn.close()
        if "unavailable" in reply:
            raise ForkServerFailed(f"fork server: {reply['unavailable']}", **where)
        outcomes = [
            _outcome(sub.name, o, p)
            for (sub, _), o, p in zip(plugins, reply["outcomes"], payloads, strict=True)
        ]
        decode = _outcome("decode", reply["decode"], reply.get("decode_message", "").encode())
        return Reply(decode, outcomes)

    def close(self) -> None:
        """End the server (its children die with it) and the starter thread; a later
        :meth:`run` starts a new one."""
        with self._lock:
            process, self._process = self._process, None
            idle, self._idle = self._idle, []
            spawner, self._spawner = self._spawner, None
            thread, self._spawner_thread = self._spawner_thread, None
            self._generation += 1
        for _, conn in idle:
            conn.close()
        if process is not None:
            process.stop(kill=False)  # EOF on control: it exits; killed if it does not
        if spawner is not None:
            spawner.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)

    # -- plumbing -------------------------------------------------------------------------

    def _connection(self, where: dict[str, Any]) -> tuple[int, socket.socket]:
        """An idle connection to a live server, or a new one (starting the server)."""
        with self._lock:
            process = self._process
            if process is not None and process.popen.poll() is not None:
                log.warning(
                    "consumer: the fallback's fork server pid %d exited (%s); starting another",
                    process.popen.pid,
                    process.popen.returncode,
                )
                self._forget_locked()
                process.stop(kill=True)
                process = None
            if process is None:
                try:
                    process = self._start()
                except (OSError, subprocess.SubprocessError, TimeoutError) as e:
                    raise ForkServerFailed(f"fork server could not start: {e}", **where) from e
                self._process = process
            while self._idle:
                gen, conn = self._idle.pop()
                if gen == process.generation:
                    return gen, conn
                conn.close()
        try:
            return process.generation, process.connect()
        except OSError as e:
            self._discard(process.generation, kill=True)
            raise ForkServerFailed(f"fork server died: {e}", **where) from e

    def _forget_locked(self) -> None:
        self._process = None
        self._generation += 1
        idle, self._idle = self._idle, []
        for _, conn in idle:
            conn.close()

    def _start(self) -> _Process:
        """Start a server from the starter thread (PR_SET_PDEATHSIG's anchor); with the lock."""
        if self._spawner is None:
            self._spawner = SimpleQueue()
            self._spawner_thread = threading.Thread(
                target=_spawner_loop, args=(self._spawner,), name="fallback-forkserver", daemon=True
            )
            self._spawner_thread.start()
        self._generation += 1
        gen = self._generation
        done: Future[_Process] = Future()

        def start() -> None:
            try:
                done.set_result(_spawn(gen))
            except BaseException as e:
                done.set_exception(e)

        self._spawner.put(start)
        return done.result(timeout=_START_TIMEOUT_S)

    def _discard(self, generation: int, *, kill: bool) -> None:
        """Forget (and kill) the server of ``generation``, if it is still the current one."""
        with self._lock:
            process = self._process
            if process is None or process.generation != generation:
                return
            self._forget_locked()
        process.stop(kill=kill)


def _spawner_loop(queue: SimpleQueue[Callable[[], None] | None]) -> None:
    while (job := queue.get()) is not None:
        job()


def _spawn(generation: int) -> _Process:
    ours, theirs = socket.socketpair()
    try:
        popen = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _BOOT,
                _json_path(),
                forkserver_process.__file__,
                str(theirs.fileno()),
                str(os.getpid()),
            ],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    SERVER_STARTS_TOTAL.inc()
    log.info("consumer: the fallback's fork server started, pid %d", popen.pid)
    return _Process(popen, ours, generation)


def _json_path() -> str:
    return json.dumps([p for p in sys.path if p])


def _outcome(name: str, fields: dict[str, Any], payload: bytes) -> Outcome:
    kind: Kind = fields["kind"]
    return Outcome(
        name,
        kind,
        payload,
        error=fields.get("error"),
        wall_s=float(fields.get("wall_s", 0.0)),
        cpu_s=float(fields.get("cpu_s", 0.0)),
        max_rss_kb=int(fields.get("max_rss_kb", 0)),
    )
