"""The stored result value: a blob holding ``{status, substream, version, result | error,
kind}``.

Same format as every blob (Sereal + checksum postfix, ``eventstore.blob``). ``status`` is
one of ``ok``, ``error``, ``timeout``, ``killed``, ``shed``: anything but ``ok`` tells a
consumer to fall back to the full chunk at once. ``error`` is a short text for people
whose first word is the failure's kind (``memory:``, ``too_large:``, ``exception:``,
``disabled:``...); ``kind`` is that word as a field of its own, which readers use
(:attr:`ResultRecord.kind`; for a record written before the field existed it is taken
from the text). :data:`DISABLED` is the one kind a consumer acts on: the plugin is
disabled on that node, so it is not re-run client-side.

Pure logic, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from eventstore.blob import pack_blob, unpack_blob

if TYPE_CHECKING:
    from substreams.api import Substream

__all__ = [
    "DISABLED",
    "STATUSES",
    "ResultRecord",
    "RunResult",
    "Status",
    "disabled_value",
    "error_value",
    "ok_value",
    "read_result",
    "stored_value",
]

Status = Literal["ok", "error", "timeout", "killed", "shed"]
STATUSES: tuple[Status, ...] = ("ok", "error", "timeout", "killed", "shed")

#: The kind of the failure stored for a substream disabled on the node.
DISABLED = "disabled"

#: Results are small; compressing them costs more than it saves below this size.
_COMPRESS_THRESHOLD = 4096


def ok_value(substream: str, version: str, result: Any) -> bytes:
    """The stored value of a successful run.

    Raises:
        sereal_codec.SerealEncodeError: ``result`` cannot be Sereal-encoded.
    """
    record = {"status": "ok", "substream": substream, "version": version, "result": result}
    return pack_blob(record, compress_threshold=_COMPRESS_THRESHOLD)


def error_value(status: Status, substream: str, version: str, error: str) -> bytes:
    """The stored value of a run that produced no result (error, timeout, killed, shed)."""
    if status == "ok":
        raise ValueError("error_value needs a failure status, not 'ok'")
    record = {
        "status": status,
        "substream": substream,
        "version": version,
        "error": error,
        "kind": _kind_of(error),
    }
    return pack_blob(record, compress_threshold=_COMPRESS_THRESHOLD)


def disabled_value(substream: str, version: str) -> bytes:
    """The stored value for a substream disabled on this node: ``error`` of kind
    :data:`DISABLED`, so consumers see a gap instead of re-running it."""
    return error_value("error", substream, version, f"{DISABLED}: on this node")


class Ended(Protocol):
    """What :func:`stored_value` reads of a run's outcome: a
    :class:`substreams.protocol.Outcome` (named by what is read, as ``protocol``
    imports this module)."""

    @property
    def ok(self) -> bool: ...
    @property
    def status(self) -> Status: ...
    @property
    def kind(self) -> str: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def error(self) -> str | None: ...


def stored_value(sub: Substream, outcome: Ended) -> bytes:
    """The value to store for a run's outcome: the child's packed result, or a marked
    failure (:func:`error_value` with the outcome's status and error)."""
    if outcome.ok:
        return outcome.payload
    return error_value(outcome.status, sub.name, sub.version, outcome.error or outcome.kind)


def _kind_of(error: str | None) -> str:
    """The failure's kind: the first word of its text, before ``:``."""
    return (error or "").split(":", 1)[0].strip()


@dataclass(frozen=True)
class RunResult:
    """One plugin's run on one chunk for a caller that stores nothing (the consumer's
    fallback, ``substream test``): what its stored record would give back.

    Attributes:
        substream: the plugin's name.
        status: ``ok``, or why there is no result (never ``shed``): ``timeout`` (the
            deadline or the CPU limit), ``killed`` (the memory limit, a signal, an exit
            without a result), ``error`` (an exception, a result too large or not
            encodable, no sandbox).
        result: the result as a consumer decodes a stored one (``None`` unless ok).
        error: the record's error (the sandbox's classification and detail), ``None``
            when ok.
        wall_s: the run's wall-clock time, seconds (a query's share of the walk).
        cpu_s: the run's CPU time, seconds (the child's, or a query's share).
    """

    substream: str
    status: Status
    result: Any = None
    error: str | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class ResultRecord:
    """A decoded result value."""

    status: Status
    substream: str
    version: str
    result: Any = None
    error: str | None = None
    kind: str = ""

    @property
    def ok(self) -> bool:
        """Whether the run succeeded (else a consumer falls back)."""
        return self.status == "ok"


def read_result(data: bytes, *, key: str | None = None) -> ResultRecord:
    """Decode and check a stored result value.

    Raises:
        eventstore.errors.EventStoreError: checksum or Sereal failure.
        ValueError: the record is not a result record.
    """
    record = unpack_blob(data, key=key)
    if not isinstance(record, dict) or record.get("status") not in STATUSES:
        raise ValueError(f"result value of {key} is not a result record")
    return ResultRecord(
        status=record["status"],
        substream=str(record.get("substream", "")),
        version=str(record.get("version", "")),
        result=record.get("result"),
        error=record.get("error"),
        kind=str(record.get("kind") or _kind_of(record.get("error"))),
    )
