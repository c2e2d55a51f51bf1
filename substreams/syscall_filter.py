"""The sandbox's kernel-level guard (Linux): a seccomp filter loaded in each child just
before plugin code runs, so calling libc through ``ctypes`` (or any C extension) cannot
open a socket, write a file or escape the child's process group.

The audit hook in ``child.py`` refuses the same things at the Python level first, with
a readable :class:`~substreams.child.SandboxViolation`; the filter catches what goes
around Python. A filtered call kills the child at once (``SECCOMP_RET_KILL_PROCESS``,
the child dies of SIGSYS): the parent classifies the run ``killed`` with the reason
"the sandbox's seccomp filter refused a system call". Killing rather than failing
the call with an errno is on purpose: a hostile probe may ignore an error, it cannot
ignore its own death, and the stored result says why.

Refused (a deny list over a default of allow, on the native architecture; a call from
another ABI, e.g. ``int 0x80`` on x86-64, kills too, libseccomp's default):

- network and local services: ``socket``, ``socketpair``, ``connect``, ``bind``,
  ``listen``, ``accept``/``accept4`` (the child talks to its parent over a pipe made
  before the fork; it needs no socket of any family, AF_UNIX included);
- writing files: ``open``/``openat``/``creat`` with any of O_WRONLY, O_RDWR, O_CREAT,
  O_TRUNC, O_APPEND; ``openat2`` (its flags are behind a pointer the filter cannot
  read); renames, links, unlinks, ``mkdir``/``rmdir``/``mknod``, ``truncate``,
  ``chmod``/``chown``/``utimes`` families, extended attributes, ``open_by_handle_at``,
  ``io_uring_*`` (it can do all of these without the calls above), mounts and
  ``chroot``, swap, modules, ``bpf``, ``perf_event_open``, keyrings, ``reboot``;
- leaving the sandbox: ``fork``, ``vfork``, ``clone`` without CLONE_THREAD,
  ``execve``/``execveat``, ``setsid``/``setpgid`` (out of the group the parent kills),
  ``unshare``/``setns``, ``ptrace``, ``process_vm_readv``/``writev``, ``pidfd_*``,
  ``prlimit64`` on another process, the TIOCSTI ioctl (typing into a terminal).

Failed with an errno instead of killing (so ordinary code keeps working):

- ``clone3`` with ENOSYS: glibc's ``pthread_create`` tries it first and falls back to
  ``clone`` (threads stay allowed; their ``clone`` carries CLONE_THREAD);
- ``kill``, ``tkill``, ``tgkill``, ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo`` with
  EPERM: no signal to any process (the kernel's own SIGALRM and SIGXCPU still arrive;
  ``abort()`` then ends the child with SIGSEGV).

What stays allowed: reading any file the companion's user can read; writing to the
descriptors the child holds (its result pipe, and the standard streams it inherited:
the companion's log); memory (bounded by RLIMIT_AS); raising its own soft rlimits up
to the hard limits the parent set.

The program is compiled once per process (libseccomp through the ``pyseccomp`` ctypes
binding, which is API-compatible with libseccomp's own Python bindings) and exported
as raw BPF; a child only makes two ``prctl`` calls (NO_NEW_PRIVS, then the filter), a
few microseconds. Without libseccomp (not Linux, or the library missing) there is no
filter: :func:`program` returns None, the audit hook alone remains, and
:func:`unavailable_reason` says why.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
from functools import cache
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["FILTER_REASON", "Program", "program", "unavailable_reason"]

#: What the parent reports for a child killed by the filter (SIGSYS).
FILTER_REASON = (
    "the sandbox's seccomp filter refused a system call (a socket, a file write, a "
    "process or a signal made outside Python, e.g. through ctypes)"
)

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_CLONE_THREAD = 0x00010000
_TIOCSTI = 0x5412
_WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)

_DENY_ALWAYS = (
    # network and local services
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    # writing files without open(2)
    "creat", "openat2", "open_by_handle_at", "name_to_handle_at",
    "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
    "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir", "mknod", "mknodat",
    "truncate", "chmod", "fchmodat", "fchmodat2", "chown", "lchown", "fchownat",
    "utime", "utimes", "utimensat", "futimesat",
    "setxattr", "lsetxattr", "removexattr", "lremovexattr",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "mount", "umount2", "pivot_root", "chroot", "swapon", "swapoff", "acct",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "bpf", "perf_event_open", "add_key", "request_key", "keyctl", "reboot",
    # leaving the sandbox
    "fork", "vfork", "execve", "execveat", "setsid", "setpgid", "unshare", "setns",
    "ptrace", "process_vm_readv", "process_vm_writev",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal",
)  # fmt: skip
_EPERM = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Program:
    """A compiled filter, ready to load in a forked child.

    Attributes:
        bpf: the raw BPF instructions (8 bytes each).
    """

    def __init__(self, bpf: bytes) -> None:
        self.bpf = bpf
        self._buffer = ctypes.create_string_buffer(bpf, len(bpf))
        self._fprog = _SockFprog(len(bpf) // 8, ctypes.cast(self._buffer, ctypes.c_void_p))

    def load(self, prctl: Any) -> None:
        """Install the filter on the calling process (irreversible).

        Args:
            prctl: libc's ``prctl`` (looked up once in the parent).

        Raises:
            OSError: the kernel refused it.
        """
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self._fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


_unavailable: list[str] = []


def _compile() -> bytes:
    import pyseccomp as sc  # noqa: PLC0415 (optional: Linux with libseccomp only)

    f = sc.SyscallFilter(sc.ALLOW)
    kill = sc.KILL_PROCESS

    def rule(action: int, name: str, *args: Any) -> None:
        try:
            f.add_rule(action, name, *args)
        except (OSError, ValueError, RuntimeError):
            # A call this kernel/arch/libseccomp does not know (e.g. "open" on arm64,
            # "fchmodat2" before libseccomp 2.5.5) cannot be made either.
            log.debug("seccomp: no system call %s here, not filtered", name)

    for name in _DENY_ALWAYS:
        rule(kill, name)
    for flag in _WRITE_FLAGS:
        rule(kill, "open", sc.Arg(1, sc.MASKED_EQ, flag, flag))
        rule(kill, "openat", sc.Arg(2, sc.MASKED_EQ, flag, flag))
    rule(kill, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    rule(kill, "prlimit64", sc.Arg(0, sc.NE, 0))
    rule(kill, "ioctl", sc.Arg(1, sc.EQ, _TIOCSTI))
    rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for name in _EPERM:
        rule(sc.ERRNO(errno.EPERM), name)
    read_fd, write_fd = os.pipe()
    try:
        with os.fdopen(write_fd, "wb", closefd=False) as out:
            f.export_bpf(out)
        os.close(write_fd)
        write_fd = -1
        chunks = []
        while chunk := os.read(read_fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    return b"".join(chunks)


@cache
def program() -> Program | None:
    """The compiled filter of this process, or None when seccomp is not available here.

    Call it in the parent (it may run ``ldconfig`` to find libseccomp the first time).
    """
    try:
        bpf = _compile()
    except ImportError as e:
        _unavailable.append(f"pyseccomp is not installed: {e}")
    except (OSError, RuntimeError, AttributeError) as e:  # no libseccomp, not Linux
        _unavailable.append(f"libseccomp is not usable: {e}")
    else:
        return Program(bpf)
    log.warning("sandbox: no seccomp filter (%s); only the audit hook guards", _unavailable[0])
    return None


def unavailable_reason() -> str | None:
    """Why there is no filter in this process, or None when there is one."""
    return None if program() is not None else _unavailable[0]
