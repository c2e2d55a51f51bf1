"""The fork server: a small process that forks the sandboxed child of each chunk.

Used by the consumer's fallback (``consumer_lib/forkserver.py``) and by each companion
worker (``companion/forkserver.py``), both through :class:`substreams.forkserver.ForkServer`,
which starts it as a fresh interpreter (this file run by path, so that nothing its caller
holds is in it: neither the caller's heap nor its threads' writes, which each fork of
the caller would copy or fault on). It is also the wire both sides speak.

Process: the caller passes a Unix socket (``control``) at start. Each connection it
wants arrives on ``control`` as a descriptor (``SCM_RIGHTS``); a thread serves it, one
request at a time. One kind of request (``"ping"`` aside, which only says the thread
is up), a JSON header + each chunk's stored (verified) bytes; plugins are loaded here
once per (origin, version) (substreams.loader: the file the caller loaded, its hash
checked before and after the import; or the installed entry points):

``"chunk"`` (the companion's workers and the consumer's fallback alike, through
:meth:`substreams.forkserver.ForkServer.run_chunks`: what ``sandbox.run_substreams``
does with a loader in the caller's own process, for one chunk or a batch of them in
one child)::

    request  = {"kind": "chunk", "chunks": [{"plugins": [{origin, name, version}],
                "ctx": [...]}, ...], "decode_limits": {...}, "cap": [limits] | null,
                "max_parallel": n, "nice": n} + each chunk's stored bytes
    outcomes = substreams.batch.run_batch([(plugins, loader, ctx), ...], cap=..., ...)
               # the loader is substreams.run.decode_chunk: the child decodes each
               # chunk once, with the union of the fields its plugins declare, and
               # each plugin gets the events narrowed to its own
    reply    = {"chunks": [{"outcomes": [...], "refused": {index: why}}, ...],
                "unavailable": why (when a child could not be started),
                "server_cpu_s": s} + each outcome's payload (empty unless ok)

The sandbox (substreams.sandbox) forks the children: own group, PDEATHSIG, fds closed,
rlimits, audit hook, seccomp, SIGALRM; SIGKILL of the group at the deadline. When it
cannot fork (or make a pipe) the reply says ``"unavailable"`` (with the outcomes of the
runs already ended); a request that cannot be served at all (another kind, a malformed
header) is answered ``{"unavailable": why}`` alone.

The server exits when ``control`` reaches EOF (the caller closed it, or died), and is
SIGKILLed by the kernel when the caller's thread that started it ends
(``PR_SET_PDEATHSIG``); the sandboxed children die with the server thread that forked
them (the sandbox sets the same on them).

Failure semantics: a plugin that cannot be loaded here (its file changed or vanished
since the caller loaded it) is refused, naming why; a chunk that does not decode gets
``unreadable`` outcomes (``loader_raised`` when the decoder refused its bytes); nothing
a plugin does reaches this process. This module imports only ``substreams`` and
``eventstore``: it is loaded by path in the server.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eventstore.blob import DecodeLimits
from substreams.api import Context, Substream, version_of
from substreams.batch import BatchChunk, run_batch
from substreams.errors import PluginLoadError
from substreams.loader import LoadReport, load_entry_points, load_file
from substreams.protocol import Limits, Outcome
from substreams.run import decode_chunk
from substreams.syscall_filter import program

__all__ = [
    "ENTRY_POINT_PREFIX",
    "MAX_MESSAGE_BYTES",
    "outcome_fields",
    "outcome_from",
    "recv_message",
    "send_message",
    "serve",
]

#: How the loader names an entry point's origin (``substreams.loader.load_entry_points``).
ENTRY_POINT_PREFIX = "entry point "
#: Largest message either side accepts (a stored chunk, or results up to their caps).
MAX_MESSAGE_BYTES = 256 * 2**20

_LENGTHS = struct.Struct(">II")  # header length, number of blobs
_BLOB = struct.Struct(">Q")
_PR_SET_PDEATHSIG = 1


# -- the wire (both sides) ------------------------------------------------------------------


def send_message(sock: socket.socket, header: dict[str, Any], blobs: Sequence[bytes] = ()) -> None:
    """One message: the lengths, the JSON header, each blob's length, then the blobs."""
    head = json.dumps(header, separators=(",", ":")).encode()
    lengths = b"".join(_BLOB.pack(len(blob)) for blob in blobs)
    sock.sendall(_LENGTHS.pack(len(head), len(blobs)) + head + lengths)
    for blob in blobs:
        sock.sendall(blob)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    if n > MAX_MESSAGE_BYTES:
        raise ValueError(f"message part of {n} bytes is over {MAX_MESSAGE_BYTES}")
    buffer = bytearray(n)
    view, got = memoryview(buffer), 0
    while got < n:
        read = sock.recv_into(view[got:])
        if read == 0:
            raise EOFError(f"connection closed after {got} of {n} bytes")
        got += read
    return bytes(buffer)


def recv_message(sock: socket.socket) -> tuple[dict[str, Any], list[bytes]]:
    """The next message: (header, blobs).

    Raises:
        EOFError: the peer closed the connection (at or inside a message).
        ValueError: a malformed message.
        OSError, TimeoutError: from the socket.
    """
    head_len, count = _LENGTHS.unpack(_recv_exactly(sock, _LENGTHS.size))
    header = json.loads(_recv_exactly(sock, head_len))
    if not isinstance(header, dict):
        raise ValueError("message header is not an object")
    sizes = [_BLOB.unpack(_recv_exactly(sock, _BLOB.size))[0] for _ in range(count)]
    if sum(sizes) > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {sum(sizes)} bytes is over {MAX_MESSAGE_BYTES}")
    blobs = [_recv_exactly(sock, size) for size in sizes]
    return header, blobs


# -- outcomes on the wire -------------------------------------------------------------------


def outcome_fields(outcome: Outcome) -> dict[str, Any]:
    """An outcome as a reply header holds it (the payload travels as a blob)."""
    return {
        "kind": outcome.kind,
        "error": outcome.error,
        "wall_s": outcome.wall_s,
        "cpu_s": outcome.cpu_s,
        "max_rss_kb": outcome.max_rss_kb,
        "exit_status": outcome.exit_status,
        "load_cpu_s": outcome.load_cpu_s,
        "child_cpu_s": outcome.child_cpu_s,
        "loader_raised": outcome.loader_raised,
    }


def outcome_from(name: str, fields: dict[str, Any], payload: bytes) -> Outcome:
    """The outcome :func:`outcome_fields` described (and its payload)."""
    return Outcome(
        name,
        fields["kind"],
        payload,
        error=fields.get("error"),
        wall_s=float(fields.get("wall_s", 0.0)),
        cpu_s=float(fields.get("cpu_s", 0.0)),
        max_rss_kb=int(fields.get("max_rss_kb", 0)),
        exit_status=int(fields.get("exit_status", 0)),
        load_cpu_s=float(fields.get("load_cpu_s", 0.0)),
        child_cpu_s=float(fields.get("child_cpu_s", 0.0)),
        loader_raised=bool(fields.get("loader_raised", False)),
    )


# -- the server -----------------------------------------------------------------------------


class _Plugins:
    """Plugins loaded in the server, by (origin, version)."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, str], list[Substream]] = {}
        self._lock = threading.Lock()

    def get(self, origin: str, name: str, version: str) -> Substream:
        """Raises: PluginLoadError naming why that version cannot be had here."""
        with self._lock:
            found = self._loaded.get((origin, version))
            if found is None:
                found = self._load(origin, version)
                self._loaded[(origin, version)] = found
        for sub in found:
            if sub.name == name:
                return sub
        raise PluginLoadError(origin, f"does not declare substream {name!r}")

    @staticmethod
    def _load(origin: str, version: str) -> list[Substream]:
        if origin.startswith(ENTRY_POINT_PREFIX):
            report = LoadReport()
            load_entry_points(report)
            found = [s for s in report.substreams.values() if s.origin == origin]
        else:
            path = Path(origin)
            try:
                now = version_of(path.read_bytes())
            except OSError as e:
                raise PluginLoadError(origin, f"cannot read: {e}") from e
            if now != version:  # checked before importing: never another version's code
                raise PluginLoadError(origin, f"is now version {now}, not {version}")
            found = load_file(path)
        if any(s.version != version for s in found) or not found:
            raise PluginLoadError(origin, f"version {version} is not what loads here")
        return found


def handle_chunks(
    plugins: _Plugins, header: dict[str, Any], blobs: list[bytes]
) -> tuple[dict[str, Any], list[bytes]]:
    """The request (module docstring): ``run_batch`` (one child for every chunk of it,
    each with its loader); the reply."""
    started = time.thread_time()
    limits = DecodeLimits(**header["decode_limits"])
    batch: list[BatchChunk] = []
    refused: list[dict[int, str]] = []
    for spec, value in zip(header["chunks"], blobs, strict=True):
        ctx = Context(*spec["ctx"])
        subs: list[Substream] = []
        refused.append({})
        for i, plugin in enumerate(spec["plugins"]):
            try:
                subs.append(plugins.get(plugin["origin"], plugin["name"], plugin["version"]))
            except PluginLoadError as e:
                refused[-1][i] = f"not loadable in the fork server: {e}"
        loader = functools.partial(decode_chunk, ctx.key.format(), value, limits)
        batch.append((subs, loader, ctx))
    ran, unavailable = run_batch(
        [chunk for chunk in batch if chunk[0]],
        cap=None if header.get("cap") is None else Limits(*header["cap"]),
        max_parallel=int(header.get("max_parallel", 1)),
        nice=int(header.get("nice", 0)),
    )
    by_chunk = iter(ran)
    chunks: list[dict[str, Any]] = []
    payloads: list[bytes] = []
    for (run, _, _), spec, skipped in zip(batch, header["chunks"], refused, strict=True):
        outcomes = iter(next(by_chunk) if run else [])
        mine = [None if i in skipped else next(outcomes) for i in range(len(spec["plugins"]))]
        chunks.append(
            {"outcomes": [None if o is None else outcome_fields(o) for o in mine],
             "refused": skipped}
        )  # fmt: skip
        payloads += [o.payload if o is not None and o.ok else b"" for o in mine]
    reply: dict[str, Any] = {"chunks": chunks, "server_cpu_s": time.thread_time() - started}
    if unavailable is not None:
        reply["unavailable"] = unavailable
    return reply, payloads


def _serve_connection(plugins: _Plugins, conn: socket.socket) -> None:
    with conn:
        while True:
            try:
                header, blobs = recv_message(conn)
            except (EOFError, OSError, ValueError):
                return  # the caller closed it (or spoke nonsense: it then sees EOF)
            reply: dict[str, Any] = {}  # a ping (the caller's start): this thread is up
            payloads: list[bytes] = []
            kind = header.get("kind")
            try:
                if kind == "chunk":
                    reply, payloads = handle_chunks(plugins, header, blobs)
                elif kind != "ping":
                    reply = {"unavailable": f"no request of kind {kind!r}: only 'chunk'"}
            except Exception as e:  # a malformed request, or the OS refused (wait4, pipe)
                reply, payloads = {"unavailable": f"{type(e).__name__}: {e}"}, []
            try:
                send_message(conn, reply, payloads)
            except OSError:
                return


def _refuse(conn: socket.socket, error: RuntimeError) -> None:
    """Answer a connection's first request with why it cannot run, then close it (served
    inline: no thread could be started for it)."""
    with conn:
        try:
            recv_message(conn)
            send_message(conn, {"unavailable": f"sandbox: fork failed: no thread: {error}"})
        except (EOFError, OSError, ValueError):
            return


def _die_with_parent(parent_pid: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the prctl
        os._exit(0)


def serve(control_fd: int, parent_pid: int) -> None:
    """The server's main loop (see module docstring); never returns."""
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides; we die with it
    program()  # compile the seccomp filter once, before any fork
    plugins = _Plugins()
    control = socket.socket(fileno=control_fd)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, 16, 4)
        except OSError:
            break
        if not data and not fds:
            break  # EOF: the caller closed control, or died
        for fd in fds:
            conn = socket.socket(fileno=fd)
            try:
                threading.Thread(
                    target=_serve_connection, args=(plugins, conn), daemon=True
                ).start()
            except RuntimeError as e:  # out of processes (threads count): no thread, no child
                _refuse(conn, e)
    os._exit(0)  # children of our threads get SIGKILL (PDEATHSIG)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
