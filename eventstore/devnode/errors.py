"""Errors of the devnode: each names what was wrong and carries the HTTP answer Riak gives.

Handlers raise these; ``app.py`` has the one table that turns them into responses, with
the status codes and plain-text bodies of riak_kv's webmachine resources.
"""

from __future__ import annotations


class DevnodeError(Exception):
    """Root of the devnode's errors. ``status`` is the HTTP status it answers with."""

    status: int = 500

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class BadRequest(DevnodeError):
    """Malformed request: missing Content-Type, bad option value, bad props JSON (400)."""

    status = 400


class ObjectNotFound(DevnodeError):
    """No live object at the location (404). ``tombstone_vclock`` is set for a tombstone."""

    status = 404

    def __init__(self, message: str, *, tombstone_vclock: str | None = None) -> None:
        self.tombstone_vclock = tombstone_vclock
        super().__init__(message)


class UnknownBucketType(DevnodeError):
    """The bucket type in the path is not configured (404)."""

    status = 404


class EntityTooLarge(DevnodeError):
    """The PUT body exceeds the configured maximum object size (413)."""

    status = 413


class UnsupportedMediaType(DevnodeError):
    """The Content-Type is not a ``type/subtype`` media type, or props not JSON (415)."""

    status = 415


class InvalidProps(BadRequest):
    """A bucket or bucket-type property has a value of the wrong kind (400)."""


class StoreFailure(DevnodeError):
    """The embedded store failed (disk full, map full, I/O error): 500, nothing half-written."""

    status = 500
