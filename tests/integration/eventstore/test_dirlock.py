"""The data-directory lock: one process per directory, released by the kernel on death."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eventstore.dirlock import DirectoryLocked, lock_directory


def test_second_lock_is_refused_with_the_holder_pid(tmp_path: Path) -> None:
    held = lock_directory(tmp_path / "data")
    code = (
        "import sys\nfrom eventstore.dirlock import lock_directory, DirectoryLocked\n"
        "try:\n    lock_directory(sys.argv[1])\nexcept DirectoryLocked as e:\n"
        "    print(e.holder_pid, e); sys.exit(3)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "data")],
        check=False,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith(f"{os.getpid()} ")
    assert "in use by process" in proc.stdout
    held.release()
    again = lock_directory(tmp_path / "data")
    assert again.held
    again.release()


def test_lock_of_a_killed_holder_is_free(tmp_path: Path) -> None:
    code = (
        "import sys, time\nfrom eventstore.dirlock import lock_directory\n"
        "lock_directory(sys.argv[1]); print('locked', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    with pytest.raises(DirectoryLocked):
        lock_directory(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    deadline = time.monotonic() + 5
    while True:
        try:
            lock = lock_directory(tmp_path)
            break
        except DirectoryLocked:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    with lock:
        assert lock.held
    assert not lock.held
