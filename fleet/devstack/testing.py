"""A harness that runs ``riak-events dev up`` (or ``dev`` subcommands) as a subprocess,
for tests.

:class:`DevUpProcess` starts ``riak-events dev up --free-ports --data-dir DIR ...`` in a
session of its own with its output in ``DIR.log``, waits until the state file says
``running``, and gives the state (pids, endpoints). :meth:`DevUpProcess.interrupt` sends
SIGINT as Ctrl-C does and waits for a clean exit; ``stop`` (SIGTERM, then SIGKILL of its
group) is the fallback. :func:`run_dev` runs one ``riak-events dev ...`` command to its end.

Both give the stack a context file of its own, ``<data_dir>.context.toml``
(:func:`context_file_for`, through ``RIAK_EVENTS_CONTEXT``): a test never writes the
developer's ``~/.config/riak-events/context.toml``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from fleet.devstack.state import read_state
from fleet.harness import ServerProcess, environment_without, live_processes

__all__ = [
    "DevUpProcess",
    "context_file_for",
    "dev_environment",
    "group_alive",
    "riak_events",
    "run_dev",
]


def riak_events() -> str:
    """The ``riak-events`` script of this interpreter's environment."""
    return str(Path(sys.executable).with_name("riak-events"))


def context_file_for(data_dir: Path) -> Path:
    """The context file a test stack of ``data_dir`` writes: next to it, not the user's."""
    return data_dir.with_name(data_dir.name + ".context.toml")


def dev_environment(data_dir: Path | None) -> dict[str, str]:
    """This environment without ``RIAK_EVENTS_*``, plus the stack's own context file
    (none at all without a data directory)."""
    context = "" if data_dir is None else str(context_file_for(data_dir))
    return {**environment_without(), "RIAK_EVENTS_CONTEXT": context}


def group_alive(pgid: int) -> bool:
    """Whether a live process (not a zombie waiting to be reaped) is in group ``pgid``."""
    return any(int(fields[2]) == pgid for _, fields in live_processes())


class DevUpProcess(ServerProcess):
    """``riak-events dev up`` on free ports with its data in ``data_dir``.

    Args:
        data_dir: the stack's data directory (its log is ``<data_dir>.log``).
        args: more ``dev up`` options (``--plugin-dir``, ``--zookeeper``...).
        start_timeout_s: how long to wait for ``running``, seconds.
    """

    def __init__(self, data_dir: Path, *args: str, start_timeout_s: float = 120.0) -> None:
        super().__init__("dev up", data_dir.with_name(data_dir.name + ".log"))
        self.data_dir = data_dir
        self.args = args
        self._start_timeout_s = start_timeout_s
        self.state: dict[str, Any] = {}

    def start(self) -> DevUpProcess:
        """Start and wait until the stack runs; ``self.state`` is its state file.

        Raises:
            RuntimeError: it exited or was not running in time (with its output).
        """
        argv = [riak_events(), "dev", "up", "--free-ports", "--data-dir", str(self.data_dir)]
        self._launch(
            [*argv, *self.args],
            healthy=self._running,
            timeout_s=self._start_timeout_s,
            env=dev_environment(self.data_dir),
            what="running",
            poll_interval_s=0.2,
        )
        return self

    def _running(self) -> bool:
        state = read_state(self.data_dir)
        if state is None or state.get("phase") != "running" or state.get("pid") != self.pid:
            return False
        self.state = state
        return True

    def interrupt(self, timeout_s: float = 90.0) -> int:
        """SIGINT (Ctrl-C) and wait for the exit; returns the exit code.

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout_s`` (then ``stop``).
        """
        process = self._process
        assert process is not None, "not started"
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout_s)
        self._process = None
        return code


def run_dev(*args: str, timeout_s: float = 180.0) -> subprocess.CompletedProcess[str]:
    """Run ``riak-events dev ARGS`` to its end; text output captured; the context file is
    :func:`context_file_for` the ``--data-dir`` given."""
    data_dir = Path(args[args.index("--data-dir") + 1]) if "--data-dir" in args else None
    return subprocess.run(
        [riak_events(), "dev", *args],
        env=dev_environment(data_dir),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
