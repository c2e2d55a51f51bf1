"""The stored result value: a blob holding ``{status, substream, version, result | error}``.

Same format as every blob (Sereal + checksum postfix, ``eventstore.blob``). ``status`` is
one of ``ok``, ``error``, ``timeout``, ``killed``, ``shed``: anything but ``ok`` tells a
consumer to fall back to the full chunk at once. ``error`` is a short text whose first
word is the failure's kind (``memory:``, ``too_large:``, ``exception:``, ...).

Pure logic, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from eventstore.blob import pack_blob, unpack_blob

__all__ = ["STATUSES", "ResultRecord", "Status", "error_value", "ok_value", "read_result"]

Status = Literal["ok", "error", "timeout", "killed", "shed"]
STATUSES: tuple[Status, ...] = ("ok", "error", "timeout", "killed", "shed")

#: Results are small; compressing them costs more than it saves below this size.
_COMPRESS_THRESHOLD = 4096


def ok_value(substream: str, version: str, result: Any) -> bytes:
    """The stored value of a successful run.

    Raises:
        eventstore.sereal.SerealEncodeError: ``result`` cannot be Sereal-encoded.
    """
    record = {"status": "ok", "substream": substream, "version": version, "result": result}
    return pack_blob(record, compress_threshold=_COMPRESS_THRESHOLD)


def error_value(status: Status, substream: str, version: str, error: str) -> bytes:
    """The stored value of a run that produced no result (error, timeout, killed, shed)."""
    if status == "ok":
        raise ValueError("error_value needs a failure status, not 'ok'")
    record = {"status": status, "substream": substream, "version": version, "error": error}
    return pack_blob(record, compress_threshold=_COMPRESS_THRESHOLD)


@dataclass(frozen=True)
class ResultRecord:
    """A decoded result value."""

    status: Status
    substream: str
    version: str
    result: Any = None
    error: str | None = None

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
    )
