"""The common part of the test harnesses that run a real server as a subprocess.

:class:`ServerProcess` starts a command in its own process group (session) with its
output appended to a log file, waits until a health check passes, and stops it with
SIGTERM, then SIGKILL of the whole group, so no worker or child outlives a test. The
harnesses built on it (the devnode, the companion, the relocator, ZooKeeper) add only
their command line and their health check. :func:`live_processes` and
:func:`children_of` read ``/proc`` for what a test or a harness left running.

Failure semantics: :meth:`ServerProcess._launch` raises ``RuntimeError`` holding the
process's log when it exits before it is healthy, or when it is not healthy by the
deadline (it is then stopped first, so nothing is left running). ``stop`` and ``kill``
never raise for a process that is already gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

__all__ = ["Background", "ServerProcess", "children_of", "environment_without", "live_processes"]

_S = TypeVar("_S", bound="ServerProcess")


def live_processes() -> Iterator[tuple[int, list[str]]]:
    """Every live process (not a zombie waiting to be reaped): its pid and the fields of
    its ``/proc/PID/stat`` after the command name (``[0]`` the state, ``[1]`` the
    parent's pid, ``[2]`` the process group). One that ends while it is read is left out.
    """
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            yield int(entry.name), fields


def children_of(pid: int) -> list[int]:
    """The live child processes of ``pid``, sorted."""
    return sorted(child for child, fields in live_processes() if int(fields[1]) == pid)


def environment_without(prefixes: Sequence[str] = ("RIAK_EVENTS_",)) -> dict[str, str]:
    """This process's environment minus variables starting with ``prefixes``.

    The harnesses pass their settings explicitly; a ``RIAK_EVENTS_*`` variable of the
    developer's shell must not change the server a test starts, and neither may the
    developer's context file (``~/.config/riak-events/context.toml``, written by ``dev
    up``): ``RIAK_EVENTS_CONTEXT`` is set empty, which means no file (eventstore/context.py).
    """
    kept = {k: v for k, v in os.environ.items() if not k.startswith(tuple(prefixes))}
    return kept | {"RIAK_EVENTS_CONTEXT": ""}


class ServerProcess:
    """A server subprocess with its log in ``log_path``; subclasses define :meth:`start`.

    Args:
        name: how messages name the server (``"devnode"``, ``"companion"``...).
        log_path: the file its stdout and stderr are appended to.
    """

    def __init__(self, name: str, log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> ServerProcess:
        """Start the server and wait until it is healthy; returns ``self``."""
        raise NotImplementedError

    def _launch(
        self,
        argv: Sequence[str],
        *,
        healthy: Callable[[], bool],
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        what: str = "healthy",
        poll_interval_s: float = 0.05,
    ) -> None:
        """Start ``argv`` in a new session and wait until ``healthy()`` is true.

        Args:
            argv: the command line.
            healthy: the health check; it must not raise for a server not yet listening.
            timeout_s: how long to wait for health, seconds.
            env: the child's environment (None: this process's).
            what: the health condition, for the timeout message ("answering /ping").
            poll_interval_s: seconds between two health checks.

        Raises:
            RuntimeError: it exited first, or was not healthy in ``timeout_s`` (it is
                stopped then); the message holds its log.
        """
        with self.log_path.open("ab") as log:
            self._process = process = subprocess.Popen(
                list(argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=None if env is None else dict(env),
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self._process = None
                self._kill_group(process)
                raise RuntimeError(
                    f"{self.name} exited with {process.returncode}:\n{self.log_text()}"
                )
            if healthy():
                return
            time.sleep(poll_interval_s)
        self.stop()
        raise RuntimeError(f"{self.name} not {what} in {timeout_s}s:\n{self.log_text()}")

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM, wait up to ``timeout_s``, then SIGKILL the process group.

        Returns:
            The exit code (negative: the signal that ended it), None if not started.
        """
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout_s)
        self._kill_group(process)
        self._process = None
        return process.returncode

    def kill(self) -> None:
        """SIGKILL the process group at once: a crash, for recovery tests."""
        process = self._process
        if process is not None:
            self._kill_group(process)
            self._process = None

    @staticmethod
    def _kill_group(process: subprocess.Popen[bytes]) -> None:
        # The group outlives its leader: workers or children may still be in it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    @property
    def pid(self) -> int | None:
        """The process id while started."""
        return self._process.pid if self._process else None

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._process is not None and self._process.poll() is None

    def log_text(self) -> str:
        """Everything the process logged so far ("" if there is no log yet)."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")
        return ""

    def __enter__(self: _S) -> _S:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


_B = TypeVar("_B", bound="Background")


class Background:
    """A load of a test or benchmark that runs in a daemon thread (``_run``) until
    :meth:`stop`: ``_stop`` is the event ``_run`` watches."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self: _B) -> _B:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ask ``_run`` to end and wait for it (10 s at most)."""
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        raise NotImplementedError
