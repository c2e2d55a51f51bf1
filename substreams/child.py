"""The sandbox's child side: what runs after the fork, until ``_exit``.

Setup (own process group, PR_SET_PDEATHSIG, default signal handlers, every inherited
descriptor but the result pipe closed, ``gc.freeze()``, rlimits, the audit hook, the
seccomp filter); then, when the parent gave a loader, the chunk's events are loaded
here (decoded: under the audit hook and the filter, before the address-space limit,
which is then set above what the events take) and reported LOADED, or UNREADABLE with
the loader's message; then each job in turn: START message, the plugin under SIGALRM,
the classified result message. The child ends with ``_exit``: nothing it built is
freed. See ``sandbox.py`` for the parent and ``substreams/DESIGN.md`` for what this
does and does not prevent.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import math
import os
import resource
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sereal_codec.projection import Tree, merge
from substreams import defaults
from substreams.api import Context, Event, Substream
from substreams.declared import declared_events
from substreams.errors import SoftTimeout, SubstreamError
from substreams.protocol import (
    EXIT_INTERNAL,
    EXIT_MEMORY,
    HEADER,
    KIND_TAG,
    TAG_LOADED,
    TAG_START,
    TAG_UNREADABLE,
    USAGE,
    Kind,
    Limits,
)
from substreams.results import ok_value
from substreams.syscall_filter import Program

__all__ = [
    "LOAD_CPU_S",
    "Job",
    "Load",
    "Loaded",
    "Loader",
    "Reported",
    "SandboxViolation",
    "Unencodable",
    "child_main",
    "declared_for",
    "substream_target",
]

_DENIED_EVENTS = frozenset(
    {
        "socket.connect",
        "socket.bind",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "pty.spawn",
        "os.kill",
        "os.killpg",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.truncate",
        "shutil.rmtree",
        # Refused here with a readable error before the seccomp filter would kill the
        # child for the same system call (syscall_filter.py).
        "socket.__new__",
        "os.mkdir",
        "os.chmod",
        "os.chown",
        "os.link",
        "os.symlink",
        "os.utime",
        "os.mkfifo",
        "os.mknod",
        "os.setxattr",
        "os.removexattr",
    }
)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class SandboxViolation(SubstreamError, PermissionError):
    """A plugin tried something the sandbox refuses (network, processes, writes)."""


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in _DENIED_EVENTS or (event == "resource.setrlimit" and not _platform_active):
        raise SandboxViolation(f"sandbox: {event} is not allowed in a substream")
    if event == "open" and len(args) >= 3:
        mode, flags = args[1], args[2]
        writing = (isinstance(flags, int) and flags & _WRITE_FLAGS) or (
            isinstance(mode, str) and any(c in mode for c in "wax+")
        )
        if writing:
            raise SandboxViolation(f"sandbox: opening {args[0]!r} for writing is not allowed")


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


#: Loaded and looked up once in the parent, at import: dlopen and the symbol lookup in
#: every child cost ~0.9 ms per fork.
_LIBC = _libc()
_PRCTL = getattr(_LIBC, "prctl", None)
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _die_with_parent() -> None:
    """Linux: SIGKILL this child if the thread that forked it dies (a worker killed
    mid-run must not leave its children running in groups nobody will kill)."""
    with contextlib.suppress(OSError, ctypes.ArgumentError):
        pr_set_pdeathsig = 1
        if _PRCTL is not None:
            _PRCTL(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


#: The child's /proc/self/statm, opened once in its setup (before the audit hook).
_statm_fd = -1


def _vm_bytes() -> int:
    """The child's virtual memory size, bytes (0 if /proc cannot tell)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(os.pread(_statm_fd, 128, 0).split()[0]) * _PAGE_BYTES
    return 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _send(fd: int, tag: bytes, index: int, payload: bytes = b"") -> None:
    _write_all(fd, HEADER.pack(tag, index, len(payload)) + payload)


#: Files whose frames a run's error leaves out (the platform's, not the plugin's).
_OURS = frozenset(
    {Path(__file__).name, "declared.py", "forkserver_process.py", "batch.py", "projection.py"}
)


def _traceback_summary(e: BaseException) -> str:
    if isinstance(e, Reported):
        return str(e)[: defaults.ERROR_MAX_BYTES]
    frames = [
        f for f in traceback.extract_tb(e.__traceback__) if Path(f.filename).name not in _OURS
    ]
    frames = frames[-4:]
    lines = [f"{type(e).__name__}: {e}"[:500]]
    lines += [f"  at {Path(f.filename).name}:{f.lineno} in {f.name}" for f in frames]
    return "\n".join(lines)[: defaults.ERROR_MAX_BYTES]


Job = tuple[str, Callable[[], bytes], Limits]
#: Loads a chunk's events in the child before its jobs, given the indexes of the jobs
#: it will run; raises with the message every job's result will carry.
Load = Callable[[list[int]], None]
#: CPU seconds a child may spend loading its events, on top of its jobs' (RLIMIT_CPU).
LOAD_CPU_S = 10


def _child_setup(
    jobs: list[tuple[int, Job]],
    write_fd: int,
    syscalls: Program | None,
    nice: int,
    loading: bool,
) -> None:
    global _statm_fd
    os.setpgid(0, 0)
    _die_with_parent()
    if nice:
        with contextlib.suppress(OSError):  # a lower priority is a courtesy, not a limit
            os.nice(nice)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD, signal.SIGWINCH):
        signal.signal(signum, signal.SIG_DFL)
    os.closerange(3, write_fd)
    os.closerange(write_fd + 1, 65536)
    gc.freeze()  # keep the GC from writing into (and so copying) the inherited heap
    with contextlib.suppress(OSError):
        _statm_fd = os.open("/proc/self/statm", os.O_RDONLY)
    if not loading:  # else once the events are loaded (_load)
        _limit_address_space(jobs)
    cpu = sum(max(1, math.ceil(limits.timeout_s)) for _, (_, _, limits) in jobs) + 1
    cpu += LOAD_CPU_S if loading else 0
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.addaudithook(_audit)

    def on_alarm(signum: int, frame: object) -> None:
        raise SoftTimeout

    signal.signal(signal.SIGALRM, on_alarm)
    if syscalls is not None:
        # Last: from here on a socket, a file write or a new process made outside
        # Python kills this child (the parent reports why).
        syscalls.load(_PRCTL)


def _limit_address_space(jobs: list[tuple[int, Job]]) -> None:
    """The hard limit: what the child has now plus the most any of its jobs may add."""
    most = max(limits.memory_mb for _, (_, _, limits) in jobs)
    address_space = _vm_bytes() + most * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))


def _load(load: Load, jobs: list[tuple[int, Job]], write_fd: int) -> None:
    """Load the events (reported LOADED), or report UNREADABLE and exit."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    gc.disable()  # the loader builds thousands of containers: no collection meanwhile
    try:
        load([index for index, _ in jobs])
    except BaseException as e:  # whatever the loader raised is the chunk's error
        message = str(e) if isinstance(e, Exception) and str(e) else type(e).__name__
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        payload = USAGE.pack(cpu_s, after.ru_maxrss) + message.encode(errors="replace")
        _send(write_fd, TAG_UNREADABLE, 0, payload[: USAGE.size + defaults.ERROR_MAX_BYTES])
        os._exit(0)
    # The events live until _exit: out of the collector's sight, as the inherited heap.
    gc.freeze()
    gc.enable()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    _send(write_fd, TAG_LOADED, 0, USAGE.pack(cpu_s, after.ru_maxrss))
    _limit_address_space(jobs)


def _run_job(target: Callable[[], bytes], limits: Limits) -> tuple[Kind, bytes]:
    try:
        signal.setitimer(signal.ITIMER_REAL, limits.timeout_s)
        try:
            payload = target()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if len(payload) > limits.max_result_bytes:
            return "too_large", (
                f"result of {len(payload)} bytes is over the limit of "
                f"{limits.max_result_bytes} bytes"
            ).encode()
        return "ok", payload
    except SoftTimeout:
        return "timeout", f"wall-clock limit of {limits.timeout_s}s".encode()
    except MemoryError:
        return "memory", f"memory limit of {limits.memory_mb} MiB".encode()
    except Unencodable as e:
        return "unencodable", str(e).encode(errors="replace")
    except BaseException as e:  # a plugin may raise anything, even SystemExit
        return "exception", _traceback_summary(e).encode(errors="replace")


def child_main(
    jobs: list[tuple[int, Job]],
    write_fd: int,
    syscalls: Program | None = None,
    nice: int = 0,
    load: Load | None = None,
) -> None:
    """Runs in the forked child: each job in turn; never returns.

    Args:
        jobs: (index, job) to run in turn.
        write_fd: the result pipe.
        syscalls: the seccomp filter to load before the first job (None: none).
        nice: added to the child's nice value (0: none).
        load: called once before the first job, with the jobs' indexes (see
            :data:`Load`); None: nothing to load.
    """
    global _platform_active
    try:
        _platform_active = True
        _child_setup(jobs, write_fd, syscalls, nice, load is not None)
        if load is not None:
            _load(load, jobs, write_fd)
    except MemoryError:
        os._exit(EXIT_MEMORY)
    except BaseException:
        os._exit(EXIT_INTERNAL)
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    for index, (_, target, limits) in jobs:
        try:
            _platform_active = True
            soft = min(hard, _vm_bytes() + limits.memory_mb * 2**20)
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
            _send(write_fd, TAG_START, index)
            _platform_active = False
            before = resource.getrusage(resource.RUSAGE_SELF)
            kind, payload = _run_job(target, limits)
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            usage = USAGE.pack(cpu_s, after.ru_maxrss)
            _platform_active = True
            _send(write_fd, KIND_TAG[kind], index, usage + payload)
        except MemoryError:
            os._exit(EXIT_MEMORY)
        except BaseException:
            os._exit(EXIT_INTERNAL)
    os._exit(0)


#: True while platform code (not a plugin) runs in a child: lets it set rlimits.
_platform_active = False


class Unencodable(SubstreamError):
    pass


class Reported(SubstreamError):
    """A failure already described; its message is the whole report."""


#: A chunk's events decoded in the child: called there with the fields to build (a
#: compiled tree, None: all), returns the events narrowed to them
#: (``sereal_codec/projection.py``); what it raises is every run's error.
Loader = Callable[[Tree | None], list[Event]]


class Loaded:
    """The events a child loads through a :data:`Loader` (set in the child only): once,
    with the union of the fields its substreams declare; each substream then gets them
    narrowed to its own fields (``project_events``: the rule the decoder follows, so the
    same events the consumer's fallback and ``substream test`` decode with its fields).

    Why not a projected decode per field set instead (the fallback's own call): with
    the 10 plugins of bench/companion_bench.py it cost more (decode ~21 ms per chunk
    against ~7 ms for the union, while narrowing, compiled, costs ~0.35 ms per substream);
    companion/DESIGN.md, "Performance".
    """

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self.events: list[Event] = []
        self.tree: Tree | None = None
        self._narrowed: dict[str, list[Event]] = {}

    def load(self, substreams: Sequence[Substream], indexes: list[int]) -> None:
        """Decode the events with the union of ``substreams[indexes]``' fields."""
        self.tree = merge(substreams[i].projection for i in indexes)
        self.events = self.loader(self.tree)

    def events_for(self, sub: Substream) -> list[Event]:
        """The events narrowed to ``sub``'s fields, strictly (:func:`declared_for`),
        made once per declaration (substreams declaring the same fields in the same
        order share them), in the first run that needs it: within that run's limits."""
        if sub.fields is None:
            return self.events
        key = json.dumps(sub.fields)
        narrowed = self._narrowed.get(key)
        if narrowed is None:
            narrowed = self._narrowed[key] = declared_for(sub, self.events)
        return narrowed


def substream_target(
    sub: Substream, events: list[Event] | Loaded, ctx: Context, *, own_list: bool
) -> Callable[[], bytes]:
    """What a job of ``sub`` runs in the child: the plugin on the events, its result
    packed.

    Args:
        sub: the substream.
        events: the events as they are, or loaded per field set in the child.
        ctx: the chunk's context.
        own_list: several runs share the child: each gets its own list (a plugin that
            sorts, filters in place or appends does not change what the next one
            sees). The event dicts themselves are shared between runs with the same
            fields: plugins must treat them as read-only. A shallow copy costs ~20 us
            per 4k events; no deep copy.
    """

    def target() -> bytes:
        if isinstance(events, Loaded):
            mine = events.events_for(sub)
            return run_packed(sub, list(mine) if own_list else mine, ctx)
        # Given as they are (narrowed by the caller): made declared here, a new list.
        mine = declared_for(sub, events)
        return run_packed(sub, list(mine) if own_list and mine is events else mine, ctx)

    return target


def declared_for(sub: Substream, events: list[Event]) -> list[Event]:
    """``events`` (whole, or narrowed to any fields containing ``sub``'s) narrowed to
    ``sub``'s fields as ``substreams.declared`` gives them to a substream that declares
    fields: reading an undeclared one raises. One walk and one allocation per event,
    as the plain narrowing (the compiled core builds the strict dicts itself, and
    leaves a dict of scalars out of the collector's sight, as a plain one); a
    substream declaring no fields gets ``events`` as they are.
    """
    return declared_events(events, sub.fields, sub.projection)


def run_packed(sub: Substream, events: list[Event], ctx: Context) -> bytes:
    """Run the plugin on ``events`` and pack its result (what a child job returns).

    Raises:
        Unencodable: the result cannot be Sereal-encoded.
        MemoryError: as raised (the child reports it as such).
    """
    result = sub.function(events, ctx)
    try:
        return ok_value(sub.name, sub.version, result)
    except MemoryError:
        raise
    except Exception as e:
        raise Unencodable(f"result is not Sereal-encodable: {e}") from None
