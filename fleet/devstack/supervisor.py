"""The ``dev up`` supervisor: start the stack, keep the state file, stop on a signal.

::

    lock DATA_DIR (one stack per directory)   -> StackRunning naming the holder's pid
    check every port                          -> PortsInUse naming each
    follow every log file; state "starting"
    start the processes in order              -> state gets each pid as it is healthy
    state "running"; write the context file; print the endpoints
    until SIGINT / SIGTERM / SIGHUP, or a process exits (loadgen alone may end);
      meanwhile do each `dev stop|start|restart PROCESS` request (fleet.devstack.control)
    state "stopping"; stop in reverse order; remove the context file
    keep the state as the ended record, with why (fleet.devstack.state.write_ended);
    remove the state file; unlock

Signals only set a flag: a start in progress finishes (or fails) first, then the
stack is stopped, so no half-started process is left without an owner.

Failure semantics: the supervisor killed with SIGKILL leaves its processes running
and the state file behind; ``dev down`` (:func:`stop_stack`) ends them by their
process groups, after checking each pid still names the process recorded (its start
time), so a reused pid is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import httpx

from companion.testing import process_alive
from eventstore.context import remove_context, write_context
from eventstore.dirlock import DirectoryLocked, lock_directory
from fleet.devstack.control import reply, take_requests
from fleet.devstack.errors import DevStackError, PortsInUse, StackRunning, StartFailed
from fleet.devstack.logs import LogMerger
from fleet.devstack.stack import (
    DEFAULT_PORTS,
    DevStack,
    StackOptions,
    kazoo_installed,
    ports_in_use,
)
from fleet.devstack.stack import free_ports as pick_free_ports
from fleet.devstack.state import read_ended, remove_state, write_ended, write_state
from relocator.testing import four_letter, zookeeper_available

__all__ = [
    "PortsInUse",
    "StackRunning",
    "banner",
    "describe",
    "ended_text",
    "options_for",
    "run",
    "stop_stack",
]


def options_for(
    data_dir: Path,
    *,
    plugin_dirs: tuple[Path, ...],
    zookeeper: str | None,
    no_zookeeper: bool,
    zk_root: str,
    loadgen_rate: float,
    free_ports: bool,
    context_file: Path | None = None,
) -> StackOptions:
    """The stack's options from ``dev up``'s: ZooKeeper is started only when neither
    given nor refused, and Debian's package and kazoo are installed."""
    start_zk = not zookeeper and not no_zookeeper and zookeeper_available() and kazoo_installed()
    return StackOptions(
        data_dir=data_dir,
        plugin_dirs=plugin_dirs,
        ports=pick_free_ports() if free_ports else DEFAULT_PORTS,
        start_zookeeper=start_zk,
        zookeeper="" if no_zookeeper else (zookeeper or ""),
        zk_root=zk_root,
        loadgen_rate=loadgen_rate,
        context_file=context_file,
    )


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks after boot), None when it does not exist."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19])
    return None


def same_process(pid: int | None, start: int | None) -> bool:
    """Whether ``pid`` is alive and still the process that started at ``start``."""
    if not pid or not process_alive(pid):
        return False
    return start is None or _start_time(pid) == start


#: How the end reason names a signal.
_SIGNALS = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event, why: dict[str, str]) -> Iterator[None]:
    signals = tuple(_SIGNALS)
    previous = {s: signal.getsignal(s) for s in signals}

    def on_signal(signum: int, frame: object) -> None:
        why.setdefault("reason", _SIGNALS.get(signal.Signals(signum), f"signal {signum}"))
        stop.set()

    for s in signals:
        signal.signal(s, on_signal)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run(options: StackOptions, out: TextIO) -> int:
    """Run the stack until a signal (see the module docstring).

    Returns:
        0 after a clean stop, 1 when a process did not start or exited.

    Raises:
        StackRunning: another stack holds the data directory.
        PortsInUse: a port is taken (nothing was started).
    """
    try:
        lock = lock_directory(options.data_dir)
    except DirectoryLocked as e:
        raise StackRunning(
            f"a dev stack already runs from {options.data_dir} (pid {e.holder_pid}): "
            f"riak-events dev status / dev down --data-dir {options.data_dir}"
        ) from None
    with lock:
        taken = ports_in_use(options.ports, zookeeper=options.start_zookeeper)
        if taken:
            names = ", ".join(f"{port} ({what})" for what, port in taken)
            raise PortsInUse(f"ports in use: {names}; stop what listens there or pass --free-ports")
        return _supervise(options, out)


def _warnings_only(line: str) -> bool:
    return " WARN " in line or " ERROR " in line


def _context_values(endpoints: dict[str, Any]) -> dict[str, Any]:
    """What the context file holds for the stack of ``endpoints``."""
    values: dict[str, Any] = {
        "nodes": [endpoints["riak"]],
        "companions": [endpoints["companion"]],
        "relocators": [endpoints["relocator_ops"]],
    }
    if endpoints.get("zookeeper"):
        values.update(zookeeper=endpoints["zookeeper"], zk_root=endpoints["zk_root"])
    return values


def _supervise(options: StackOptions, out: TextIO) -> int:
    stop = threading.Event()
    why: dict[str, str] = {}
    merger = LogMerger(out)
    state: dict[str, Any] = {
        "version": 1,
        "pid": os.getpid(),
        "pid_start": _start_time(os.getpid()),
        "phase": "starting",
        "started_at": time.time(),
        "data_dir": str(options.data_dir),
        "processes": {},
    }

    def started(name: str) -> None:
        process = stack.processes()[name]
        state["processes"][name] = {
            "pid": process.pid,
            "start": _start_time(process.pid or 0),
            "log": str(process.log_path),
        }
        write_state(options.data_dir, state)

    stack = DevStack(options, on_started=started)
    state["endpoints"] = stack.endpoints()
    for name, path in stack.log_files().items():
        # ZooKeeper logs ~150 INFO lines at start: only its warnings reach the terminal.
        merger.follow(name, path, _warnings_only if name == "zookeeper" else None)
    merger.start()
    code = 0
    context = options.context_file
    with _stop_on_signals(stop, why):
        write_state(options.data_dir, state)
        try:
            merger.say("dev", f"starting in {options.data_dir} ({', '.join(stack.log_files())})")
            stack.start(should_stop=stop.is_set)
            if not stop.is_set():
                if context is not None:
                    written = write_context(
                        context,
                        _context_values(state["endpoints"]),
                        dev_stack=str(options.data_dir),
                    )
                    state["context"] = {"file": str(context), "written": written}
                state["phase"] = "running"
                write_state(options.data_dir, state)
                merger.say(
                    "dev", banner(state["endpoints"], detached=False, context=state.get("context"))
                )
                code = _watch(stack, state, options.data_dir, merger, stop=stop, why=why)
        except StartFailed as e:
            merger.say("dev", f"error: {e}")
            why.setdefault("reason", str(e))
            code = 1
        finally:
            state["phase"] = "stopping"
            write_state(options.data_dir, state)
            merger.say("dev", "stopping")
            stack.stop()
            if context is not None:
                remove_context(context, dev_stack=str(options.data_dir))
            merger.say("dev", "stopped")
            merger.stop()
            state["phase"] = "ended"
            state["ended"] = {"at": time.time(), "reason": why.get("reason", "?"),
                              "exit_status": code}  # fmt: skip
            write_ended(options.data_dir, state)
            remove_state(options.data_dir)
    return code


def _control(stack: DevStack, state: dict[str, Any], request: dict[str, Any]) -> str:
    """Do one ``dev stop|start|restart PROCESS`` request; returns what was done.

    Raises:
        DevStackError: it could not be done (no such process, it did not start...).
    """
    name, action = str(request["process"]), str(request["action"])
    done = []
    if action in ("stop", "restart"):
        code = stack.stop_process(name)
        state["processes"].setdefault(name, {})["stopped"] = f"dev {action}"
        done.append(f"{name} stopped" + ("" if code is None else f" (exit {code})"))
    if action in ("start", "restart"):
        stack.start_process(name)
        process = stack.processes()[name]
        info = state["processes"].setdefault(name, {})
        info.pop("stopped", None)
        info.update(pid=process.pid, start=_start_time(process.pid or 0), log=str(process.log_path))
        done.append(f"{name} started (pid {process.pid})")
    if not done:
        raise DevStackError(f"unknown action {action!r}")
    return "; ".join(done)


def _serve_requests(
    stack: DevStack, state: dict[str, Any], data_dir: Path, merger: LogMerger
) -> None:
    for request in take_requests(data_dir):
        try:
            message, ok = _control(stack, state, request), True
        except DevStackError as e:
            message, ok = str(e), False
        write_state(data_dir, state)
        merger.say("dev", f"dev {request['action']} {request['process']}: {message}")
        reply(data_dir, str(request["id"]), ok=ok, message=message)


def _watch(
    stack: DevStack,
    state: dict[str, Any],
    data_dir: Path,
    merger: LogMerger,
    *,
    stop: threading.Event,
    why: dict[str, str],
) -> int:
    """Wait for a signal (0) or a process that exits (1; the load generator alone may
    end, the stack runs on; one stopped by ``dev stop`` is not an exit), doing the
    ``dev stop|start|restart`` requests meanwhile."""
    while not stop.wait(0.5):
        _serve_requests(stack, state, data_dir, merger)
        gone = stack.exited()
        if not gone:
            continue
        if set(gone) == {"loadgen"}:
            merger.say("dev", f"loadgen exited with {gone['loadgen']}; the stack runs on")
            stack.loadgen = None
            state["processes"].pop("loadgen", None)
            write_state(data_dir, state)
            continue
        what = ", ".join(f"{name} (exit {rc})" for name, rc in gone.items())
        merger.say("dev", f"error: {what} exited; stopping the stack")
        why.setdefault(
            "reason", ", ".join(f"{name} exited with status {rc}" for name, rc in gone.items())
        )
        return 1
    return 0


def banner(
    endpoints: dict[str, Any], *, detached: bool, context: dict[str, Any] | None = None
) -> str:
    """What ``dev up`` prints once everything is up: the endpoints, the context file
    and what to try (without address flags when the context holds them)."""
    riak = endpoints["riak"]
    zk = endpoints["zookeeper"]
    in_context = bool(context and context.get("written"))
    lines = [
        f"dev stack up (data, configs and logs in {endpoints['data_dir']}):",
        f"  riak (devnode)  {riak}",
        f"  companion       {endpoints['companion']}    status page {endpoints['status_page']}",
        f"  relocator       udp {endpoints['relocator_udp']}  tcp {endpoints['relocator_tcp']}"
        f"  status {endpoints['relocator_ops']}/status",
        f"  zookeeper       {zk} (root {endpoints['zk_root']})"
        if zk
        else "  zookeeper       none (apt-get install zookeeper, pip install "
        "'riak-events[zookeeper]'; or --zookeeper HOSTS)",
        f"  plugins         {', '.join(endpoints['plugin_dirs'])} (hot reloaded) and the "
        "installed examples",
    ]
    if context is not None:
        lines.append(
            f"  context         {context['file']} (every riak-events command's addresses)"
            if in_context
            else f"  context         {context['file']} is your own: not changed (give the "
            "addresses as flags)"
        )
    lines.append("try:")
    if in_context:
        lines += [
            "  riak-events read --dc ams4 --start now-1m --end now",
            "  riak-events status",
        ]
    else:
        lines += [
            f"  riak-events read --node {riak} --dc ams4 --start now-1m --end now",
            f"  riak-events status --node {riak} --companion {endpoints['companion']} "
            f"--relocator {endpoints['relocator_ops']}",
        ]
    data_dir = f" --data-dir {endpoints['data_dir']}"
    lines.append(
        f"riak-events dev status{data_dir} / dev stop|start|restart PROCESS{data_dir} / "
        f"dev down{data_dir}"
        if detached
        else f"Ctrl-C stops everything (dev stop|start|restart PROCESS{data_dir}: one process)."
    )
    return "\n".join(lines)


def _probe(name: str, endpoints: dict[str, Any]) -> str:
    """One process's health in words: "ok", or what is wrong."""
    urls = {
        "devnode": f"{endpoints['riak']}/ping",
        "companion": f"{endpoints['companion']}/healthz",
        "relocator": f"{endpoints['relocator_ops']}/readyz",
    }
    if name == "zookeeper":
        port = int(str(endpoints["zookeeper"]).rsplit(":", 1)[1])
        try:
            return "ok" if four_letter(port, "ruok") == "imok" else "not answering ruok"
        except OSError as e:
            return f"unreachable: {e.strerror or e}"
    if name not in urls:
        return "ok"
    try:
        answer = httpx.get(urls[name], timeout=3.0)
    except httpx.HTTPError as e:
        return f"unreachable: {type(e).__name__}"
    if answer.status_code == 200:
        return "ok"
    return f"HTTP {answer.status_code}: {answer.text.strip()[:80]}"


def describe(state: dict[str, Any]) -> dict[str, Any]:
    """``dev status``'s report from a state file: each process alive and healthy."""
    endpoints = state.get("endpoints", {})
    alive = same_process(state.get("pid"), state.get("pid_start"))
    shown = {
        "zookeeper": endpoints.get("zookeeper"),
        "devnode": endpoints.get("riak"),
        "companion": endpoints.get("companion"),
        "relocator": endpoints.get("relocator_ops"),
        "loadgen": endpoints.get("relocator_tcp"),
    }
    processes = {}
    for name, info in state.get("processes", {}).items():
        stopped = info.get("stopped")
        running = not stopped and same_process(info.get("pid"), info.get("start"))
        health = _probe(name, endpoints) if running else "not running"
        processes[name] = {
            "pid": None if stopped else info.get("pid"),
            "running": running,
            "health": f"stopped ({stopped})" if stopped else health,
            "endpoint": shown.get(name),
            "log": info.get("log"),
        }
    phase = state.get("phase", "?") if alive else "supervisor gone"
    return {
        "data_dir": state.get("data_dir"),
        "running": alive,
        "phase": phase,
        "healthy": alive
        and phase == "running"
        and all(p["health"] == "ok" for p in processes.values()),
        "uptime_s": time.time() - float(state.get("started_at", time.time())) if alive else None,
        "supervisor": {"pid": state.get("pid"), "alive": alive},
        "processes": processes,
        "endpoints": endpoints,
    }


def stop_stack(data_dir: Path, state: dict[str, Any], *, timeout_s: float) -> list[str]:
    """Stop the stack of ``state``: SIGTERM to its supervisor, which stops everything;
    then SIGKILL of the process group of whatever is left (a supervisor that was killed
    or did not finish in ``timeout_s``).

    Returns:
        The names of the processes that had to be killed.
    """
    pid, start = state.get("pid"), state.get("pid_start")
    if same_process(pid, start):
        assert pid is not None
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while same_process(pid, start) and time.monotonic() < deadline:
            time.sleep(0.2)
    killed = []
    if same_process(pid, start):
        assert pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        killed.append("supervisor")
    for name, info in state.get("processes", {}).items():
        if same_process(info.get("pid"), info.get("start")):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(info["pid"], signal.SIGKILL)
            killed.append(name)
    ended = read_ended(data_dir)
    if (
        ended is None
        or ended.get("pid") != pid
        or ended.get("started_at") != state.get("started_at")
    ):
        ended = {**state, "phase": "ended", "ended": {"at": time.time(), "exit_status": None}}
    ended["ended"]["reason"] = "dev down" + (f" (killed: {', '.join(killed)})" if killed else "")
    write_ended(data_dir, ended)
    context = (state.get("context") or {}).get("file")
    if context:
        remove_context(Path(context), dev_stack=str(state.get("data_dir")))
    remove_state(data_dir)
    return killed


def ended_text(ended: dict[str, Any]) -> str:
    """Why the last stack of a data directory ended, in words."""
    info = ended.get("ended") or {}
    at = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(float(info.get("at") or 0)))
    return f"the last one (supervisor pid {ended.get('pid')}) ended at {at}: {info.get('reason')}"
