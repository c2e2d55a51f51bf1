"""The fallback's fork server: the small process that forks one sandboxed child per chunk.

Started by :class:`consumer_lib.forkserver.ForkServer` as a fresh interpreter (this file
run by path, so that neither the consumer library nor anything the caller holds is in
it: ~26 MB resident instead of the caller's hundreds, which is what each fork copies).
It is also the wire both sides speak.

Process: the caller passes a Unix socket (``control``) at start. Each connection it
wants arrives on ``control`` as a descriptor (``SCM_RIGHTS``); a thread serves it, one
request at a time::

    request  = header {"plugins": [{origin, name, version, limits}], "ctx": [...],
                       "decode_limits": {...}} + the chunk's stored (verified) bytes
    plugins  = loaded here once per (origin, version) (substreams.loader: the file the
               caller loaded, its hash checked before and after the import; or the
               installed entry points)
    outcomes = run_in_child([decode, plugin, ...], isolation="chunk", max_parallel=1)
               # substreams.sandbox: one forked child per chunk: own group, PDEATHSIG,
               # fds closed, rlimits, audit hook, seccomp, SIGALRM; SIGKILL of the
               # group at the deadline. The decode is the child's first job (its own
               # deadline and memory allowance), so each plugin's limits are measured
               # from the decoded chunk exactly as when the caller forked. Each plugin
               # is given the events narrowed to its declared fields (projection.py),
               # as the companion and ``substream test`` give them.
    reply    = header {"decode": outcome, "outcomes": [...]} + each outcome's payload

The server exits when ``control`` reaches EOF (the caller closed it, or died), and is
SIGKILLed by the kernel when the caller's thread that started it ends
(``PR_SET_PDEATHSIG``); the sandboxed children die with the server thread that forked
them (the sandbox sets the same on them).

Failure semantics: a plugin that cannot be loaded here (its file changed or vanished
since the caller loaded it) gets an ``error`` outcome naming why; a chunk that does not
decode gets a ``decode`` outcome the caller turns into ``ChunkUnreadable``; nothing a
plugin does reaches this process. This module imports only ``substreams`` and
``eventstore`` (never ``consumer_lib``): it is loaded by path in the server.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eventstore.blob import DecodeLimits, unpack_blob
from eventstore.errors import BlobError
from eventstore.sereal.projection import compile_fields, project_events
from substreams.api import Context, Event, Substream, version_of
from substreams.child import Job, Reported, Unencodable
from substreams.errors import PluginLoadError
from substreams.loader import LoadReport, load_entry_points, load_file
from substreams.protocol import Limits
from substreams.results import ok_value
from substreams.sandbox import Outcome, SandboxUnavailable, run_in_child
from substreams.syscall_filter import program

__all__ = [
    "DECODE_LIMITS",
    "ENTRY_POINT_PREFIX",
    "MAX_MESSAGE_BYTES",
    "recv_message",
    "send_message",
    "serve",
]

#: The decode's own limits in the child (the first job): the body is already capped by
#: the caller's decode limits (64 MiB by default); Python objects take a few times that.
DECODE_LIMITS = Limits(timeout_s=10.0, memory_mb=2048, max_result_bytes=1024)
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


def _decode_job(
    value: bytes, key: str, limits: DecodeLimits, fields: list[str] | None, into: list[list[Event]]
) -> Callable[[], bytes]:
    def decode() -> bytes:
        # As the caller's Store decodes (the same limits); the exact error is the
        # caller's to raise (it decodes the blob itself when this fails: a rare path).
        # Only the fields the plugins declare are built (None: one reads them all).
        try:
            decoded = unpack_blob(value, key=key, limits=limits, fields=fields)
        except BlobError as e:
            raise Reported(f"{type(e).__name__}: {e}") from None
        if not isinstance(decoded, list):
            raise Reported(f"chunk holds a {type(decoded).__name__}, not an array of events")
        into.append(decoded)  # set only here: an empty chunk is decoded too
        return b""

    return decode


def _plugin_job(
    sub: Substream, chunk: list[list[Event]], ctx: Context, *, own_list: bool, narrow: bool
) -> Callable[[], bytes]:
    def target() -> bytes:
        if not chunk:  # the decode failed, or this child started after the decode's died
            raise Reported("the chunk was not decoded")
        decoded = chunk[0]
        if narrow:  # decoded with more fields than it declares: its own only
            events = project_events(decoded, sub.projection)
        else:
            events = list(decoded) if own_list else decoded
        result = sub.function(events, ctx)
        try:
            return ok_value(sub.name, sub.version, result)
        except MemoryError:
            raise
        except Exception as e:
            raise Unencodable(f"result is not Sereal-encodable: {e}") from None

    return target


def _union_fields(subs: list[Substream]) -> list[str] | None:
    """Every field any of ``subs`` declares (None: one reads them all); as
    ``substreams.harness.union_fields``, which this process does not import."""
    if any(sub.fields is None for sub in subs):
        return None
    return [field for sub in subs for field in sub.fields or ()]


def _outcome_header(outcome: Outcome) -> dict[str, Any]:
    return {
        "kind": outcome.kind,
        "error": outcome.error,
        "wall_s": outcome.wall_s,
        "cpu_s": outcome.cpu_s,
        "max_rss_kb": outcome.max_rss_kb,
    }


def handle(
    plugins: _Plugins, header: dict[str, Any], value: bytes
) -> tuple[dict[str, Any], list[bytes]]:
    """One request: the plugins on the chunk in one sandboxed child; the reply."""
    ctx = Context(*header["ctx"])
    specs = header["plugins"]
    decoded: list[list[Event]] = []  # the decoded events, once the child decoded them
    key = ctx.key.format()
    decode_limits = DecodeLimits(**header["decode_limits"])
    refused: dict[int, Outcome] = {}
    loaded: list[tuple[Substream, Limits]] = []
    for i, spec in enumerate(specs):
        try:
            sub = plugins.get(spec["origin"], spec["name"], spec["version"])
        except PluginLoadError as e:
            refused[i] = Outcome(
                spec["name"], "exception", error=f"exception: not loadable in the fork server: {e}"
            )
            continue
        loaded.append((sub, Limits(*spec["limits"])))
    fields = _union_fields([sub for sub, _ in loaded])
    tree = compile_fields(fields)
    jobs: list[Job] = [
        ("decode", _decode_job(value, key, decode_limits, fields, decoded), DECODE_LIMITS)
    ]
    for sub, limits in loaded:
        narrow = sub.projection != tree
        target = _plugin_job(sub, decoded, ctx, own_list=len(specs) > 1, narrow=narrow)
        jobs.append((sub.name, target, limits))
    try:
        ran = run_in_child(jobs, max_parallel=1, isolation="chunk")
    except SandboxUnavailable as e:
        return {"unavailable": str(e)}, []
    decode, rest = ran[0], iter(ran[1:])
    outcomes = [refused[i] if i in refused else next(rest) for i in range(len(specs))]
    reply = {
        "decode": _outcome_header(decode),
        "decode_message": decode.payload.decode(errors="replace") if not decode.ok else "",
        "outcomes": [_outcome_header(o) for o in outcomes],
    }
    return reply, [o.payload if o.ok else b"" for o in outcomes]


def _serve_connection(plugins: _Plugins, conn: socket.socket) -> None:
    with conn:
        while True:
            try:
                header, blobs = recv_message(conn)
            except (EOFError, OSError, ValueError):
                return  # the caller closed it (or spoke nonsense: it then sees EOF)
            try:
                reply, payloads = handle(plugins, header, blobs[0])
            except Exception as e:  # a malformed request, or the OS refused (wait4, pipe)
                reply, payloads = {"unavailable": f"{type(e).__name__}: {e}"}, []
            try:
                send_message(conn, reply, payloads)
            except OSError:
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
            threading.Thread(target=_serve_connection, args=(plugins, conn), daemon=True).start()
    os._exit(0)  # children of our threads get SIGKILL (PDEATHSIG)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
