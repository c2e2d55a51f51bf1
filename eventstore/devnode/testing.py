"""A harness that runs a real devnode process, for tests and benchmarks.

It picks a free loopback port, starts ``python -m eventstore.devnode`` as a subprocess
with its log in a file, waits until ``/ping`` answers, and stops it with SIGTERM (then
SIGKILL). ``log_text()`` returns the log so a failing test can show it.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class DevnodeProcess:
    """One devnode subprocess serving ``data_dir`` on a free loopback port."""

    def __init__(
        self,
        data_dir: Path,
        *,
        config: Path | None = None,
        port: int | None = None,
        start_timeout_s: float = 20.0,
        python: str = sys.executable,
    ) -> None:
        self.data_dir = data_dir
        self.config = config
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = data_dir.parent / f"devnode-{self.port}.log"
        self._start_timeout_s = start_timeout_s
        self._python = python
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> DevnodeProcess:
        """Start the process and wait for ``/ping``.

        Raises:
            RuntimeError: it exited or did not answer in time; the message holds its log.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = [self._python, "-m", "eventstore.devnode", "--data-dir", str(self.data_dir)]
        argv += ["--listen", f"127.0.0.1:{self.port}"]
        if self.config is not None:
            argv += ["--config", str(self.config)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RIAK_EVENTS_")}
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + self._start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"devnode exited with {self._process.returncode}:\n{self.log_text()}"
                )
            if self.ping():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"devnode did not answer /ping in {self._start_timeout_s}s:\n{self.log_text()}"
        )

    def ping(self) -> bool:
        """Whether ``/ping`` answers 200 now."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1.0)
        try:
            connection.request("GET", "/ping")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM, wait, SIGKILL if needed; returns the exit code."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._process = None
        return process.returncode

    def kill(self) -> None:
        """SIGKILL: a crash, for recovery tests."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    @property
    def pid(self) -> int | None:
        """The process id while running."""
        return self._process.pid if self._process else None

    def log_text(self) -> str:
        """Everything the process logged so far."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")
        return ""

    def __enter__(self) -> DevnodeProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
