"""The chaos campaign's pieces of the operating system: a network namespace joined to
this one by a veth pair (the link the campaign cuts), and a small tmpfs mount (the disk
it fills). Both need root and iproute2 / mount.

Every object registers its own undo in :data:`CLEANUP` as soon as it exists, so a
crash, an exception or Ctrl-C in the middle of a run still removes the namespace, the
veth pair and the mount (the campaign installs signal handlers that turn SIGINT and
SIGTERM into exceptions, and calls ``CLEANUP.run()`` in a ``finally`` and at exit).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = [
    "CLEANUP",
    "Cleanup",
    "NetNamespace",
    "TmpfsMount",
    "remove_stale_namespaces",
    "system_support",
]


class Cleanup:
    """Undo actions, run newest first, each at most once, errors logged not raised."""

    def __init__(self) -> None:
        self._actions: list[tuple[str, Callable[[], None]]] = []
        self._lock = threading.Lock()

    def add(self, what: str, action: Callable[[], None]) -> None:
        """Remember ``action`` (described by ``what``) to run at cleanup."""
        with self._lock:
            self._actions.append((what, action))

    def run(self) -> None:
        """Run every remembered action, newest first; forget them."""
        with self._lock:
            actions, self._actions = self._actions[::-1], []
        for what, action in actions:
            try:
                action()
            except Exception as e:  # cleanup goes on with the next action
                log.warning("cleanup: %s failed: %s", what, e)


#: The process-wide undo list (also run at interpreter exit).
CLEANUP = Cleanup()
atexit.register(CLEANUP.run)


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30)


def system_support() -> str | None:
    """Why namespaces or mounts cannot be used here (None: they can)."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} not found (apt-get install iproute2 mount)"
    return None


def remove_stale_namespaces(prefix: str = "chaos") -> list[str]:
    """Delete ``<prefix><pid>`` namespaces (and their veth pairs) whose run is gone: a
    run killed with SIGKILL could not clean up after itself. Returns the names removed."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    removed = []
    for line in listed.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        pid = name[len(prefix) :]
        if not name.startswith(prefix) or not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        NetNamespace(name, "0.0.0").delete()
        removed.append(name)
    return removed


class NetNamespace:
    """A network namespace named ``name`` with one veth pair to this namespace.

    The host end gets ``<prefix>.1/30``, the namespace end ``<prefix>.2/30``; the
    namespace's loopback is up. ``wrapper`` is the command prefix that runs a program
    inside it. ``link(False)`` takes the host end down: every connection across the
    link stalls or fails until ``link(True)``.

    Args:
        name: the namespace name (also the stem of the interface names, <= 11 chars).
        prefix: the first three octets of the /30 (``"10.231.7"`` uses .0/30).
    """

    def __init__(self, name: str, prefix: str) -> None:
        self.name = name
        self.host_if = f"{name[:11]}h"
        self.ns_if = f"{name[:11]}n"
        self.host_addr = f"{prefix}.1"
        self.ns_addr = f"{prefix}.2"
        self.wrapper: tuple[str, ...] = ("ip", "netns", "exec", name)
        self.up = False

    def create(self) -> NetNamespace:
        """Create the namespace and the link; registers their removal in CLEANUP.

        Raises:
            subprocess.CalledProcessError: ``ip`` refused (names taken, not root).
        """
        _run("ip", "netns", "add", self.name)
        CLEANUP.add(f"ip netns del {self.name}", self.delete)
        _run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        _run("ip", "link", "set", self.ns_if, "netns", self.name)
        _run("ip", "addr", "add", f"{self.host_addr}/30", "dev", self.host_if)
        _run(*self.wrapper, "ip", "addr", "add", f"{self.ns_addr}/30", "dev", self.ns_if)
        _run(*self.wrapper, "ip", "link", "set", "lo", "up")
        _run(*self.wrapper, "ip", "link", "set", self.ns_if, "up")
        self.link(True)
        return self

    def link(self, up: bool) -> None:
        """Bring the host end of the veth pair up or down."""
        _run("ip", "link", "set", self.host_if, "up" if up else "down")
        self.up = up

    def delete(self) -> None:
        """Remove the namespace and the pair (missing ones are fine)."""
        for argv in (("ip", "link", "del", self.host_if), ("ip", "netns", "del", self.name)):
            subprocess.run(argv, capture_output=True, timeout=30, check=False)


class TmpfsMount:
    """A tmpfs of ``size_mb`` mounted on ``path``, and a file that fills it.

    Args:
        path: the mount point (created if missing).
        size_mb: the file system's size, MiB.
    """

    def __init__(self, path: Path, size_mb: int) -> None:
        self.path = path
        self.size_mb = size_mb
        self.filler = path / "chaos-filler"
        self.full = False

    def mount(self) -> TmpfsMount:
        """Mount it; registers the unmount in CLEANUP."""
        self.path.mkdir(parents=True, exist_ok=True)
        _run(
            "mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0755", "tmpfs", str(self.path)
        )
        CLEANUP.add(f"umount {self.path}", self.unmount)
        return self

    def free_bytes(self) -> int:
        """Bytes an unprivileged writer could still write."""
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self) -> int:
        """Write the filler file until the file system is full; returns its size."""
        written = 0
        block = b"\0" * (1 << 20)
        with self.filler.open("ab") as f:
            while True:
                try:
                    n = f.write(block if self.free_bytes() >= len(block) else block[:4096])
                    f.flush()
                except OSError:  # ENOSPC: full, as wanted
                    break
                written += n
                if self.free_bytes() == 0:
                    break
        self.full = True
        return written

    def free(self) -> None:
        """Delete the filler file."""
        with contextlib.suppress(FileNotFoundError):
            self.filler.unlink()
        self.full = False

    def unmount(self) -> None:
        """Unmount (lazily: a process may still hold a file there)."""
        subprocess.run(
            ["umount", "-l", str(self.path)], capture_output=True, timeout=30, check=False
        )
