"""The caller's side of a fork server (:mod:`substreams.forkserver_process`): a small
helper process, started once per caller on its first request, that forks the sandboxed
child of each chunk.

Why: forking the caller costs its page tables, and a copy-on-write fault for every page
either side writes while the child lives: the caller's threads keep writing (HTTP,
buffers, counters) and fault on their own heap after every fork. A fallback forked from
a large caller costs ~5 ms per chunk at 37 MB and ~17 ms at 200 MB
(``consumer_lib/DESIGN.md``); a companion worker paid ~1 ms of faults per chunk on its
own side (``companion/DESIGN.md``, "Performance"). The server is a fresh interpreter
holding only the sandbox, the codec and the plugins; it does nothing between forks but
wait, and the chunk is decoded in the child, not in the caller.

    server = ForkServer("consumer: the fallback's fork server")   # no process yet
    served = server.run_chunks([(plugins, blob, key)], decode_limits=..., cap=...,
                               where="consumer: key=...")
    served.chunks[0].outcomes                       # one per plugin (None: not run)
    server.close()                                  # the process and its children end

One client, one request kind: the companion's workers (``companion/forkserver.py``)
and the consumer's fallback (``consumer_lib/fallback.py``) both send the ``"chunk"``
request (:mod:`substreams.forkserver_process`), a batch of one or more chunks, each
decoded in the server's child by the loader every caller uses
(:func:`substreams.run.decode_chunk`). :meth:`ForkServer.request` is the raw exchange
under :meth:`ForkServer.run_chunks`.

Per request: a connection from the pool (an idle one, or a new socketpair whose far end
is passed to the server over its control socket: nothing else can connect), the
request, the reply awaited with a deadline (the caller's: the runs' own deadlines and a
margin; the server's sandbox kills a late child well before). Threads may call
:meth:`ForkServer.request` concurrently: each holds its own connection, served by its
own thread in the server, so up to ``max_connections`` chunks run at once.

The server is started from a thread of this object that lives until :meth:`close`,
because ``PR_SET_PDEATHSIG`` (set by the server on itself) fires when the *thread*
that started it ends: the server is SIGKILLed if this process dies (and its children
with it: theirs is set on the server's threads), and it exits when its control socket
closes.

Failure semantics: :meth:`ForkServer.request` and :meth:`ForkServer.run_chunks` raise
:class:`ForkServerUnavailable` (never hang) when the server cannot be started, dies
during the request (killed, crashed), or does not answer within the deadline (then it
is killed); :meth:`~ForkServer.run_chunks` also when the server could not serve the
request at all (``fork server: <why>``). The next request starts a new server. Nothing
a plugin does reaches the server or the caller: its run's outcome says it.
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
from dataclasses import dataclass
from pathlib import Path
from queue import SimpleQueue
from typing import Any, ClassVar

from eventstore.blob import DecodeLimits
from eventstore.names import ChunkKey
from substreams import forkserver_process
from substreams.api import Substream
from substreams.child import LOAD_CPU_S
from substreams.errors import SubstreamError
from substreams.forkserver_process import outcome_from, recv_message, send_message
from substreams.protocol import Limits, Outcome
from substreams.sandbox import LOAD_TIMEOUT_S

log = logging.getLogger(__name__)

__all__ = ["ForkServer", "ForkServerUnavailable", "ServedChunk", "ServedChunks"]

#: How long the server may take to start (a fresh interpreter importing the sandbox), s.
_START_TIMEOUT_S = 60.0
#: Allowance per request on top of the runs' own deadlines (server and child setup), s.
MARGIN_S = 10.0
# Runs the server file by path: the caller's packages (and what they import) stay out
# of the server; the caller's import path is the server's.
_BOOT = (
    "import json, runpy, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


class ForkServerUnavailable(SubstreamError):
    """The fork server could not run a request: not started, died, or late. Nothing
    the plugin did; the next request starts a new server.

    Attributes:
        late: it did not answer within the deadline (else it could not start or died).
    """

    retriable: ClassVar[bool] = True

    def __init__(self, message: str, *, late: bool = False) -> None:
        super().__init__(message)
        self.late = late


@dataclass(frozen=True)
class ServedChunk:
    """What the server says about one chunk of a request.

    Attributes:
        outcomes: one per substream asked for, in order; ``None``: not run (the server
            could not load that plugin, or could not start a child for it).
        refused: index -> why the server could not load that plugin (``not loadable in
            the fork server: ...``).
    """

    outcomes: list[Outcome | None]
    refused: dict[int, str]


@dataclass(frozen=True)
class ServedChunks:
    """The reply to one request.

    Attributes:
        chunks: one per chunk asked for, in order.
        unavailable: why some runs have no outcome though not refused (a child could not
            be started: the sandbox's message), None when every run has one.
        server_cpu_s: CPU seconds the server's thread spent on the request (its fork,
            wait and reap).
    """

    chunks: list[ServedChunk]
    unavailable: str | None
    server_cpu_s: float


def deadline_s(runs: Sequence[Limits]) -> float:
    """How long a request may take, seconds: the child's load (``LOAD_TIMEOUT_S``, and
    ``LOAD_CPU_S`` more), every run's deadline and kill grace, and :data:`MARGIN_S`
    (the server's sandbox kills a late child well before)."""
    return MARGIN_S + LOAD_TIMEOUT_S + LOAD_CPU_S + sum(r.timeout_s + r.kill_grace_s for r in runs)


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
    """A fork server (module docstring); lazy: no process until a request.

    Args:
        label: names it in log messages (e.g. ``"consumer: the fallback's fork server"``).
        max_connections: requests in flight at once (more callers wait for one).
        on_start: called each time a server process is started (a metric).
    """

    def __init__(
        self,
        label: str = "the fork server",
        *,
        max_connections: int = 4,
        on_start: Callable[[], None] | None = None,
    ) -> None:
        self.label = label
        self._on_start = on_start
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

    def request(
        self, header: dict[str, Any], blobs: list[bytes], deadline_s: float, where: str
    ) -> tuple[dict[str, Any], list[bytes]]:
        """Send one request and wait for its reply.

        Args:
            header, blobs: the request (:mod:`substreams.forkserver_process`).
            deadline_s: how long to wait for the reply, seconds.
            where: what the request is about, for messages (e.g. ``key=...``).

        Returns:
            The reply's header and blobs.

        Raises:
            ForkServerUnavailable: see the module docstring.
        """
        with self._slots:
            gen, conn = self._connection()
            try:
                conn.settimeout(deadline_s)
                send_message(conn, header, blobs)
                reply, payloads = recv_message(conn)
            except (OSError, EOFError, ValueError) as e:  # TimeoutError is an OSError
                conn.close()
                late = isinstance(e, TimeoutError)
                self._discard(gen, kill=True)
                what = f"did not answer within {deadline_s:.3g}s" if late else f"died: {e}"
                log.error("%s: %s: %s", where, self.label, what)
                raise ForkServerUnavailable(f"fork server {what}", late=late) from e
            with self._lock:
                if gen == self._generation:
                    self._idle.append((gen, conn))
                else:
                    conn.close()
        return reply, payloads

    def run_chunks(
        self,
        chunks: Sequence[tuple[Sequence[Substream], bytes, ChunkKey]],
        *,
        decode_limits: DecodeLimits,
        cap: Limits | None,
        max_parallel: int = 1,
        nice: int = 0,
        where: str,
    ) -> ServedChunks:
        """Run each chunk's substreams in a sandboxed child of the server: the chunks of
        the request in one child (``substreams.batch.run_batch``), each decoded there
        (:func:`substreams.run.decode_chunk`, with the union of its substreams' fields)
        and each substream given its events narrowed to its own fields.

        Args:
            chunks: (substreams, stored bytes with their checksum verified by the
                caller, key) of each chunk; every substream one :meth:`can_run`.
            decode_limits: what a chunk may decode to.
            cap: platform caps lowering each substream's declared limits (None: as
                declared), applied in the server to the plugin it loaded.
            max_parallel: children alive at once.
            nice: added to each child's nice value.
            where: what the request is about, for messages (e.g. ``consumer: key=...``).

        Returns:
            Each chunk's outcomes, why a plugin was refused, and why runs have none.

        Raises:
            ForkServerUnavailable: see the module docstring.
        """
        header = {
            "kind": "chunk",
            "chunks": [
                {
                    "plugins": [
                        {"origin": s.origin, "name": s.name, "version": s.version} for s in subs
                    ],
                    "ctx": [key.epoch, key.dc, key.type, key.subtype, key.chunk],
                }
                for subs, _, key in chunks
            ],
            "decode_limits": dataclasses.asdict(decode_limits),
            "cap": None if cap is None else list(dataclasses.astuple(cap)),
            "max_parallel": max_parallel,
            "nice": nice,
        }
        runs = [Limits.of(s, cap) for subs, _, _ in chunks for s in subs]
        reply, payloads = self.request(
            header, [blob for _, blob, _ in chunks], deadline_s(runs), where
        )
        if "chunks" not in reply:  # the request itself failed there
            why = reply.get("unavailable", "no outcomes in the reply")
            raise ForkServerUnavailable(f"fork server: {why}")
        blobs = iter(payloads)
        served = []
        for (subs, _, _), got in zip(chunks, reply["chunks"], strict=True):
            outcomes: list[Outcome | None] = []
            for sub, fields in zip(subs, got["outcomes"], strict=True):
                payload = next(blobs)  # one per substream, empty unless ok
                outcomes.append(None if fields is None else outcome_from(sub.name, fields, payload))
            refused = {int(i): str(why) for i, why in got["refused"].items()}
            served.append(ServedChunk(outcomes, refused))
        unavailable = reply.get("unavailable")
        return ServedChunks(
            served,
            None if unavailable is None else str(unavailable),
            float(reply.get("server_cpu_s", 0.0)),
        )

    def start(self, connections: int = 1) -> None:
        """Start the server now if none runs (else the first request does), with
        ``connections`` idle connections (each a thread in the server), so the first
        requests neither wait for the interpreter nor need a new thread there.

        Raises:
            ForkServerUnavailable: it could not start.
        """
        opened = [self._connection() for _ in range(max(1, connections))]
        for gen, conn in opened:  # answered: the server is up, with a thread for each
            try:
                conn.settimeout(_START_TIMEOUT_S)
                send_message(conn, {"kind": "ping"})
                recv_message(conn)
            except (OSError, EOFError, ValueError) as e:
                for _, each in opened:
                    each.close()
                self._discard(gen, kill=True)
                raise ForkServerUnavailable(f"fork server did not start: {e}") from e
        with self._lock:
            for gen, conn in opened:
                if gen == self._generation:
                    self._idle.append((gen, conn))
                else:
                    conn.close()

    def close(self) -> None:
        """End the server (its children die with it) and the starter thread; a later
        request starts a new one."""
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

    def _connection(self) -> tuple[int, socket.socket]:
        """An idle connection to a live server, or a new one (starting the server)."""
        with self._lock:
            process = self._process
            if process is not None and process.popen.poll() is not None:
                log.warning(
                    "%s pid %d exited (%s); starting another",
                    self.label,
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
                    raise ForkServerUnavailable(f"fork server could not start: {e}") from e
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
            raise ForkServerUnavailable(f"fork server died: {e}") from e

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
                target=_spawner_loop, args=(self._spawner,), name="forkserver-start", daemon=True
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
        process = done.result(timeout=_START_TIMEOUT_S)
        if self._on_start is not None:
            self._on_start()
        log.info("%s started, pid %d", self.label, process.popen.pid)
        return process

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
                json.dumps([p for p in sys.path if p]),
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
    return _Process(popen, ours, generation)
