"""Running plugins under hard limits: one forked child per run, killed at its deadline.

The caller calls :func:`run_substreams` with a chunk's events, either decoded (shared
with each child copy-on-write, neither copied nor decoded again) or as a *loader* that
each child calls once before its first run (so the caller neither decodes nor frees
them, and pays no copy-on-write faults for them: the child decodes, runs, and exits
without freeing anything). With a loader each run sees the events narrowed to the
fields its substream declares (``Substream.fields``): the child calls the loader once
per distinct set of fields among its substreams (the decoder builds only those), as
the consumer's fallback and ``substream test`` decode them. For each child the process
forks; the child:

1. moves into a process group of its own (``setpgid(0, 0)``) and restores default
   signal handlers; closes every inherited descriptor but its result pipe (so it holds
   none of the parent's Riak connections or listening sockets);
2. sets ``RLIMIT_AS`` to what it inherited plus the plugin's ``memory_mb`` and
   ``RLIMIT_CPU`` just above its wall-clock limit; freezes the inherited heap for the GC;
3. installs an audit hook refusing sockets, subprocesses, ``os.fork``, ``exec`` and
   writing files (a guard against accidents, not a security boundary: see DESIGN.md),
   then the seccomp filter; with a loader, loads the events (``RLIMIT_AS`` is set after
   it; the loader's own limits bound it) and says LOADED, or UNREADABLE with the
   loader's message, which every job of the child gets as its ``unreadable`` outcome
   (the child's death or the deadline while loading too: nothing to retry elsewhere);
4. arms ``SIGALRM`` at the plugin's ``timeout_s`` (the soft, inner layer: it cannot
   interrupt C code), runs the plugin, packs the stored result value and writes it,
   length-prefixed and size-capped, into the pipe, then ``_exit``.

The parent waits on every child's pipe and pidfd with one selector. At
``timeout_s + kill_grace_s`` it sends SIGKILL to the child's whole process group (so
grandchildren die too), reaps the child with ``wait4`` (CPU time and peak RSS), kills
the group again in case something outlived the child, and classifies the exit:

============  ========  ===============================================================
kind          status    when
============  ========  ===============================================================
ok            ok        a complete result message arrived
exception     error     the plugin raised; the message holds the traceback's summary
too_large     error     the encoded result is over ``max_result_bytes``
unencodable   error     the result is not Sereal-encodable
timeout       timeout   SIGALRM fired, the parent's deadline passed, or RLIMIT_CPU hit
memory        killed    MemoryError under RLIMIT_AS (or the child's memory exit code)
killed        killed    died of a signal (SIGSEGV...) or exited without a result
unreadable    error     the loader failed (its message), or the child died loading
============  ========  ===============================================================

Failure semantics: each run is independent; one child's death never affects another's
result. :func:`run_substreams` always returns one :class:`Outcome` per substream, never
raises for anything a plugin does, and leaves no child behind (every child is reaped;
its group is SIGKILLed). When the machine cannot give it a pipe or a process (out of
descriptors, processes or memory) it raises :class:`SandboxUnavailable` naming the
call that failed, with the outcomes of the runs that had already ended. It must be
called from one thread at a time per child set, but several threads may each run their
own call.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import selectors
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from substreams.api import Context, Event, Substream
from substreams.child import (
    Job,
    Load,
    Loaded,
    Loader,
    child_main,
    substream_target,
)
from substreams.errors import SubstreamError
from substreams.protocol import (
    EXIT_MEMORY,
    HEADER,
    TAG_KIND,
    TAG_LOADED,
    TAG_START,
    TAG_UNREADABLE,
    USAGE,
    Isolation,
    Limits,
    Outcome,
)
from substreams.syscall_filter import FILTER_REASON, program

__all__ = ["LOAD_TIMEOUT_S", "SandboxUnavailable", "run_in_child", "run_substreams"]

_READ_SIZE = 65536
#: Allowance for a child's setup (fork, rlimits) before its first job starts, seconds.
_SETUP_S = 2.0
#: Wall-clock limit of a child's loading its events, seconds (a 370 KB chunk takes
#: ~10 ms; one at the decode limits, 64 MB of body, about a second).
LOAD_TIMEOUT_S = 10.0


class SandboxUnavailable(SubstreamError, OSError):
    """A child could not be started: ``pipe`` or ``fork`` failed (out of descriptors,
    processes or memory). Nothing the plugin did; trying later may work.

    Attributes:
        outcomes: one entry per job, the outcome of each run that had already ended,
            ``None`` for the others.
    """

    retriable = True

    def __init__(self, message: str, outcomes: Sequence[Outcome | None] = ()) -> None:
        super().__init__(message)
        self.outcomes = list(outcomes)


# -- the parent ---------------------------------------------------------------------------


@dataclass
class _Child:
    jobs: list[int]
    limits: dict[int, Limits]
    pid: int
    read_fd: int
    pidfd: int | None
    spawned: float
    buffer: bytearray = field(default_factory=bytearray)
    current: int | None = None
    current_started: float = 0.0
    started_any: bool = False
    done: set[int] = field(default_factory=set)
    overflow: bool = False
    killed_at_deadline: bool = False
    #: Loading its events (a loader was given and neither LOADED nor UNREADABLE came).
    loading: bool = False
    loaded_at: float = 0.0
    #: The loader's message, once UNREADABLE came.
    unreadable: str | None = None
    #: CPU of the load, not yet put on an outcome.
    load_cpu_s: float = 0.0

    def deadline(self) -> float:
        grace = max(lim.kill_grace_s for lim in self.limits.values())
        if self.loading:
            return self.spawned + _SETUP_S + LOAD_TIMEOUT_S + grace
        if self.current is None:
            waiting = [i for i in self.jobs if i not in self.done]
            first = self.limits[waiting[0]].timeout_s if waiting else 0.0
            since = self.current_started if self.started_any else self.spawned
            since = max(since, self.loaded_at)
            return since + first + grace + _SETUP_S
        return self.current_started + self.limits[self.current].timeout_s + grace

    def cap(self) -> int:
        return max(lim.max_result_bytes for lim in self.limits.values()) + 65536


def _spawn(
    jobs: list[tuple[int, Job]],
    syscall_filter: bool = True,
    nice: int = 0,
    load: Load | None = None,
) -> _Child:
    syscalls = program() if syscall_filter else None  # compiled once, before any fork
    try:
        read_fd, write_fd = os.pipe()
    except OSError as e:
        raise SandboxUnavailable(f"sandbox: pipe failed: {e}") from e
    spawned = time.monotonic()
    try:
        pid = os.fork()
    except OSError as e:
        os.close(read_fd)
        os.close(write_fd)
        raise SandboxUnavailable(f"sandbox: fork failed: {e}") from e
    if pid == 0:  # pragma: no cover - the child never returns
        os.close(read_fd)
        child_main(jobs, write_fd, syscalls, nice, load)
    os.close(write_fd)
    # Also set the group from the parent: whichever runs first, the group exists
    # before the parent might need to kill it.
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)
    os.set_blocking(read_fd, False)
    pidfd: int | None = None
    if hasattr(os, "pidfd_open"):
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(pid)
    return _Child(
        jobs=[i for i, _ in jobs],
        limits={i: job[2] for i, job in jobs},
        pid=pid,
        read_fd=read_fd,
        pidfd=pidfd,
        spawned=spawned,
        loading=load is not None,
    )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _drain(child: _Child) -> bool:
    """Read what is available; returns True at EOF (or when over the size cap)."""
    while True:
        try:
            data = os.read(child.read_fd, _READ_SIZE)
        except BlockingIOError:
            return False
        except OSError as e:
            if e.errno == errno.EINTR:
                continue
            return True
        if not data:
            return True
        child.buffer += data
        if len(child.buffer) > child.cap():
            child.overflow = True
            return True


def _parse(child: _Child, names: Sequence[str], outcomes: list[Outcome | None]) -> None:
    """Consume every complete message in the child's buffer."""
    while len(child.buffer) >= HEADER.size:
        tag, index, length = HEADER.unpack_from(child.buffer)
        loaded = tag in (TAG_LOADED, TAG_UNREADABLE)
        if loaded != child.loading:
            child.overflow = True  # out of order: garbage on the pipe
            return
        if (index not in child.limits and not loaded) or (tag != TAG_START and length < USAGE.size):
            child.overflow = True  # garbage on the pipe: treat like an over-size answer
            return
        if length > child.cap():
            child.overflow = True
            return
        if len(child.buffer) < HEADER.size + length:
            return
        body = bytes(child.buffer[HEADER.size : HEADER.size + length])
        del child.buffer[: HEADER.size + length]
        now = time.monotonic()
        if loaded:
            cpu_s, _ = USAGE.unpack_from(body)
            child.loading, child.loaded_at, child.load_cpu_s = False, now, cpu_s
            if tag == TAG_UNREADABLE:
                child.unreadable = body[USAGE.size :].decode(errors="replace")
            continue
        if tag == TAG_START:
            child.current, child.current_started, child.started_any = index, now, True
            continue
        kind = TAG_KIND.get(tag)
        if kind is None:
            child.overflow = True
            return
        cpu_s, max_rss_kb = USAGE.unpack_from(body)
        payload = body[USAGE.size :]
        wall_s = now - child.current_started if child.current == index else 0.0
        if kind == "ok":
            outcome = Outcome(names[index], "ok", payload)
        else:
            text = payload.decode(errors="replace")
            outcome = Outcome(names[index], kind, payload, error=f"{kind}: {text}")
        outcome.wall_s, outcome.cpu_s, outcome.max_rss_kb = wall_s, cpu_s, max_rss_kb
        outcome.load_cpu_s, child.load_cpu_s = child.load_cpu_s, 0.0
        outcomes[index] = outcome
        child.done.add(index)
        child.current, child.current_started = None, now  # idle since now


def _failure(child: _Child, name: str, limits: Limits, status: int) -> Outcome:
    """The outcome of the job that was running when the child died or was killed (or,
    when the events could not be loaded, of each of its jobs)."""
    if child.unreadable is not None:
        return Outcome(name, "unreadable", error=child.unreadable, loader_raised=True)
    if child.loading:
        died = _failure(replace(child, loading=False), name, limits, status).error or ""
        if child.killed_at_deadline:
            died = f"not loaded within {LOAD_TIMEOUT_S:.3g}s"
        return Outcome(name, "unreadable", error=f"chunk_unreadable: loading the events: {died}")
    if child.overflow:
        return Outcome(
            name,
            "too_large",
            error=f"too_large: result is over the limit of {limits.max_result_bytes} bytes",
        )
    if child.killed_at_deadline:
        return Outcome(
            name,
            "timeout",
            error=f"timeout: killed after {limits.timeout_s + limits.kill_grace_s:.3g}s "
            f"(wall-clock limit {limits.timeout_s}s)",
        )
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum in {signal.SIGXCPU, signal.SIGKILL}:
            return Outcome(
                name, "timeout", error=f"timeout: CPU limit ({signal.Signals(signum).name})"
            )
        signame = signal.Signals(signum).name
        if signum == signal.SIGSYS:
            return Outcome(name, "killed", error=f"killed: {FILTER_REASON} (SIGSYS)")
        return Outcome(name, "killed", error=f"killed: died of signal {signame}")
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    if code == EXIT_MEMORY:
        return Outcome(name, "memory", error=f"memory: limit of {limits.memory_mb} MiB")
    return Outcome(name, "killed", error=f"killed: exited with code {code} without a result")


def _finish(child: _Child, names: Sequence[str], outcomes: list[Outcome | None]) -> list[int]:
    """Reap a child that exited or was killed; returns the jobs it never started."""
    _, status, usage = os.wait4(child.pid, 0)
    _kill_group(child.pid)  # anything the plugin left behind in its group
    if not child.overflow:
        _drain(child)
        _parse(child, names, outcomes)
    os.close(child.read_fd)
    if child.pidfd is not None:
        os.close(child.pidfd)
    now = time.monotonic()
    blamed: list[int] = []
    if child.unreadable is not None or child.loading:
        # The events of this chunk cannot be loaded: no job of the child can run, and
        # another child would fail the same way.
        blamed = [i for i in child.jobs if i not in child.done]
    elif child.current is not None:
        blamed = [child.current]
    elif not child.started_any or child.overflow:
        # Died before any job started (setup failed), or sent garbage between jobs:
        # the first waiting job takes the blame, so a retry cannot loop forever.
        blamed = [i for i in child.jobs if i not in child.done][:1]
    unloaded = child.unreadable is not None or child.loading
    for n, index in enumerate(blamed):
        outcome = _failure(child, names[index], child.limits[index], status)
        started = child.current_started if child.current == index else child.spawned
        outcome.wall_s = now - started
        outcome.max_rss_kb = usage.ru_maxrss
        outcome.exit_status = status
        if not unloaded:
            outcome.cpu_s = usage.ru_utime + usage.ru_stime
        elif n == 0:  # the child's CPU was its load's, once
            outcome.load_cpu_s = usage.ru_utime + usage.ru_stime
        outcome.load_cpu_s, child.load_cpu_s = outcome.load_cpu_s or child.load_cpu_s, 0.0
        outcomes[index] = outcome
        child.done.add(index)
    ended = [o for i in child.jobs if (o := outcomes[i]) is not None]
    if ended:  # the child's own cost beside its runs' (fork faults, setup, exit)
        ended[0].child_cpu_s += usage.ru_utime + usage.ru_stime
    return [i for i in child.jobs if i not in child.done]


def run_in_child(
    jobs: Sequence[Job],
    *,
    max_parallel: int = 4,
    isolation: Isolation = "substream",
    syscall_filter: bool = True,
    nice: int = 0,
    load: Load | None = None,
) -> list[Outcome]:
    """Run each job's target in a forked, limited child.

    Args:
        jobs: (name, target, limits); ``target()`` runs in the child and returns the
            bytes to send back.
        max_parallel: children alive at once.
        isolation: ``"substream"``: one child per job (nothing shared between jobs);
            ``"chunk"``: one child runs the jobs in turn (one fork and one copy of the
            touched pages per chunk instead of per job; jobs see each other's
            mutations of shared data and module state; :func:`run_substreams` gives
            each substream its own shallow list of the events). Either way each job
            has its own deadline and limits, and when a job kills its child the jobs
            after it run in a new one.
        syscall_filter: load the seccomp filter in each child
            (:mod:`substreams.syscall_filter`; where available). Off only to measure it.
        nice: added to each child's nice value before its first job (0: as the
            caller): a run that may hog the CPU yields it to the caller's other work.
        load: called in each child before its first job with the indexes of the jobs
            it will run, within ``LOAD_TIMEOUT_S``; when it raises (or the child dies
            or overruns while loading), every job of that child ends ``unreadable``
            with its message, and is not tried in another child.

    Returns:
        One outcome per job, in order.

    Raises:
        SandboxUnavailable: a pipe or a child could not be made; the children already
            started are killed and reaped first.
    """
    names = [name for name, _, _ in jobs]
    outcomes: list[Outcome | None] = [None] * len(jobs)
    indexed = list(enumerate(jobs))
    pending: list[list[tuple[int, Job]]] = (
        [indexed] if isolation == "chunk" and indexed else [[job] for job in indexed]
    )
    running: dict[int, _Child] = {}  # pid -> child
    selector = selectors.DefaultSelector()
    try:
        while pending or running:
            while pending and len(running) < max(1, max_parallel):
                try:
                    child = _spawn(pending.pop(0), syscall_filter, nice, load)
                except SandboxUnavailable as e:
                    e.outcomes = list(outcomes)
                    raise
                running[child.pid] = child
                selector.register(child.read_fd, selectors.EVENT_READ, (child.pid, "pipe"))
                if child.pidfd is not None:
                    selector.register(child.pidfd, selectors.EVENT_READ, (child.pid, "exit"))
            wait_s = max(0.0, min(c.deadline() for c in running.values()) - time.monotonic())
            if any(c.pidfd is None for c in running.values()):
                wait_s = min(wait_s, 0.01)
            finished: set[int] = set()
            for key, _ in selector.select(wait_s):
                pid, what = key.data
                child = running[pid]
                if what == "pipe":
                    eof = _drain(child)
                    _parse(child, names, outcomes)
                    if eof:
                        with contextlib.suppress(KeyError, ValueError):
                            selector.unregister(child.read_fd)
                    if child.overflow:
                        _kill_group(child.pid)
                else:
                    finished.add(pid)
            now = time.monotonic()
            for pid, child in running.items():
                if pid in finished:
                    continue
                if child.pidfd is None and _exited(pid):
                    finished.add(pid)
                elif now >= child.deadline():
                    child.killed_at_deadline = True
                    _kill_group(pid)
                    finished.add(pid)
            for pid in finished:
                child = running.pop(pid)
                for fd in (child.read_fd, child.pidfd):
                    if fd is not None:
                        with contextlib.suppress(KeyError, ValueError):
                            selector.unregister(fd)
                rest = _finish(child, names, outcomes)
                if rest:
                    by_index = dict(indexed)
                    pending.insert(0, [(i, by_index[i]) for i in rest])
    finally:
        for child in running.values():  # only on an exception of our own
            _kill_group(child.pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child.pid, 0)
        selector.close()
    return [o for o in outcomes if o is not None]


def _exited(pid: int) -> bool:
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def run_substreams(
    substreams: Sequence[Substream],
    events: list[Event] | Loader,
    ctx: Context,
    *,
    cap: Limits | None = None,
    max_parallel: int = 4,
    isolation: Isolation = "substream",
    syscall_filter: bool = True,
    nice: int = 0,
) -> list[Outcome]:
    """Run substreams on one chunk's events in limited children.

    Args:
        substreams: what to run (the caller has matched them to the chunk).
        events: the chunk's decoded events, shared with the children copy-on-write and
            given to each run as they are (narrowed by the caller, if at all); or a
            :data:`~substreams.child.Loader` that each child calls once per distinct
            set of fields its substreams declare, each run then seeing the events
            narrowed to its own substream's fields.
        ctx: the chunk's context.
        cap: platform caps lowering each substream's declared limits.
        max_parallel: children alive at once.
        isolation: one child per substream, or one per chunk (see :func:`run_in_child`);
            with ``"chunk"`` each substream gets its own list of the events (the event
            dicts are shared: read-only by contract).
        nice: see :func:`run_in_child`.

    Returns:
        One outcome per substream, in order; ``payload`` of an ok outcome is the value
        to store; use :func:`substreams.results.stored_value` for any outcome. With a
        loader that failed, the runs of the children it failed in are ``unreadable``,
        the loader's message their ``error``.

    Raises:
        SandboxUnavailable: see :func:`run_in_child`.
    """
    own_list = isolation == "chunk" and len(substreams) > 1
    load: Load | None = None
    source: list[Event] | Loaded = events if isinstance(events, list) else Loaded(events)
    if isinstance(source, Loaded):
        load = functools.partial(source.load, substreams)
    jobs = [
        (s.name, substream_target(s, source, ctx, own_list=own_list), Limits.of(s, cap))
        for s in substreams
    ]
    return run_in_child(
        jobs,
        max_parallel=max_parallel,
        isolation=isolation,
        syscall_filter=syscall_filter,
        nice=nice,
        load=load,
    )
