"""What the sandbox's parent and child agree on: limits, outcome kinds, the pipe's wire,
and the shape of an outcome every caller gets.

Pure definitions, no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal

from substreams import defaults
from substreams.api import Substream
from substreams.results import Status

__all__ = [
    "DEFAULT_CAP",
    "EXIT_INTERNAL",
    "EXIT_MEMORY",
    "HEADER",
    "KIND_TAG",
    "STATUS_OF",
    "TAG_KIND",
    "TAG_LOADED",
    "TAG_START",
    "TAG_UNREADABLE",
    "USAGE",
    "Isolation",
    "Kind",
    "Limits",
    "Outcome",
]

Kind = Literal[
    "ok", "exception", "too_large", "unencodable", "timeout", "memory", "killed", "unreadable"
]
STATUS_OF: dict[str, Status] = {
    "ok": "ok",
    "exception": "error",
    "too_large": "error",
    "unencodable": "error",
    "timeout": "timeout",
    "memory": "killed",
    "killed": "killed",
    # The chunk could not be decoded in the child: not the plugin's doing.
    "unreadable": "error",
}

# Messages written by the child: tag byte, job index, payload length, payload. "S" says
# a job starts (no payload); a result's payload is (cpu_s, max_rss_kb) + the body. A
# child that loads the chunk's events itself first says "D" (loaded; payload: usage of
# the load) or "X" (the events could not be loaded; payload: usage + the message, which
# becomes every job's error); index 0 for both.
HEADER = struct.Struct(">cHI")
USAGE = struct.Struct(">dq")
TAG_START = b"S"
TAG_LOADED = b"D"
TAG_UNREADABLE = b"X"
TAG_KIND: dict[bytes, Kind] = {
    b"O": "ok",
    b"E": "exception",
    b"L": "too_large",
    b"U": "unencodable",
    b"T": "timeout",
    b"M": "memory",
}
KIND_TAG = {kind: tag for tag, kind in TAG_KIND.items()}
#: Exit code of a child that hit MemoryError and could not even report it.
EXIT_MEMORY = 75
#: Exit code of a child whose setup failed.
EXIT_INTERNAL = 76

Isolation = Literal["substream", "chunk"]


@dataclass(frozen=True)
class Limits:
    """The hard limits of one run.

    Attributes:
        timeout_s: wall-clock limit, seconds (the child's own alarm).
        memory_mb: address space the child may add to what it inherits, MiB.
        max_result_bytes: limit of the stored result value, bytes.
        kill_grace_s: the parent SIGKILLs the group at ``timeout_s + kill_grace_s``.
    """

    timeout_s: float = defaults.TIMEOUT_S
    memory_mb: int = defaults.MEMORY_MB
    max_result_bytes: int = defaults.MAX_RESULT_BYTES
    kill_grace_s: float = defaults.KILL_GRACE_S

    @classmethod
    def of(cls, sub: Substream, cap: Limits | None = None) -> Limits:
        """The limits a substream declared, lowered to ``cap`` when given."""
        if cap is None:
            return cls(sub.timeout_s, sub.memory_mb, sub.max_result_bytes)
        return cls(
            min(sub.timeout_s, cap.timeout_s),
            min(sub.memory_mb, cap.memory_mb),
            min(sub.max_result_bytes, cap.max_result_bytes),
            cap.kill_grace_s,
        )


#: The platform's default caps (``substreams.defaults.CAP_*``): every caller lowers a
#: plugin's declared limits to these unless told otherwise.
DEFAULT_CAP = Limits(
    timeout_s=defaults.CAP_TIMEOUT_S,
    memory_mb=defaults.CAP_MEMORY_MB,
    max_result_bytes=defaults.CAP_MAX_RESULT_BYTES,
)


@dataclass
class Outcome:
    """How one run ended.

    Attributes:
        name: the substream (or what was run).
        kind: the classified exit (see ``substreams/sandbox.py``'s docstring).
        payload: the child's message: the stored value when ``ok``, else the error text
            as UTF-8 (empty when the child said nothing).
        error: a one-paragraph description of a failure, ``None`` when ok.
        wall_s: from fork to reap, seconds.
        cpu_s: the child's user + system CPU time, seconds.
        max_rss_kb: the child's peak resident set (includes inherited pages it touched), KiB.
        exit_status: the raw ``wait4`` status.
        load_cpu_s: CPU seconds the child spent loading the events (on one outcome per
            child that loaded them, 0 on the others), not in ``cpu_s``.
        child_cpu_s: the whole CPU time of the child this run ended in (``wait4``:
            setup, load, every run, exit), on one outcome per child, 0 on the others.
        loader_raised: ``unreadable`` because the loader raised: the chunk's bytes do
            not load (``error`` is the loader's message); False for every other
            outcome, a child that died or overran while loading included.
    """

    name: str
    kind: Kind
    payload: bytes = b""
    error: str | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    max_rss_kb: int = 0
    exit_status: int = 0
    load_cpu_s: float = 0.0
    child_cpu_s: float = 0.0
    loader_raised: bool = False

    @property
    def status(self) -> Status:
        """The stored status for this kind."""
        return STATUS_OF[self.kind]

    @property
    def ok(self) -> bool:
        return self.kind == "ok"
