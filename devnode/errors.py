"""Errors of the devnode: each names what was wrong and carries the HTTP answer Riak gives.

Handlers raise these; ``app.py`` has the one table that turns them into responses, with
the status codes, content types and bodies of riak_kv's webmachine resources. Each class
says how its answer looks on the wire (:meth:`DevnodeError.body`, ``content_type``),
because some of Riak's answers are not the plain-text reason most of them are (see
DESIGN.md, "Unknown bucket types").
"""

from __future__ import annotations

import json

from eventstore.errors import RiakEventsError

#: The page webmachine's default error handler renders for a 404 without a body of its
#: own (webmachine ``src/webmachine_error_handler.erl``); Riak installs no other handler.
WEBMACHINE_404_PAGE = (
    b"<HTML><HEAD><TITLE>404 Not Found</TITLE></HEAD><BODY><H1>Not Found</H1>"
    b"The requested document was not found on this server.<P><HR>"
    b"<ADDRESS>mochiweb+webmachine web server</ADDRESS></BODY></HTML>"
)


class DevnodeError(RiakEventsError):
    """Root of the devnode's errors. ``status`` is the HTTP status it answers with."""

    status: int = 500
    content_type: str = "text/plain"

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)

    def body(self) -> bytes:
        """The response body: the message and a newline, as most of Riak's answers."""
        return (self.message + "\n").encode()


class InvalidRequest(DevnodeError):
    """Malformed request: missing Content-Type, bad option value, bad props JSON (400)."""

    status = 400


class ObjectNotFound(DevnodeError):
    """No live object at the location (404). ``tombstone_vclock`` is set for a tombstone."""

    status = 404

    def __init__(self, message: str, *, tombstone_vclock: str | None = None) -> None:
        self.tombstone_vclock = tombstone_vclock
        super().__init__(message)


class UnknownBucketType(DevnodeError):
    """An object request names a bucket type that does not exist (404).

    riak_kv_wm_object answers ``Unknown bucket type: <type>``, text/plain, no newline.
    """

    status = 404

    def __init__(self, bucket_type: str) -> None:
        self.bucket_type = bucket_type
        super().__init__(f"Unknown bucket type: {bucket_type}")

    def body(self) -> bytes:
        return self.message.encode()


class ResourceNotFound(DevnodeError):
    """A resource that does not exist: props of an unknown bucket type, or no route (404).

    Riak's props resources answer ``resource_exists`` false and webmachine renders its
    default HTML page; the message is for the log only.
    """

    status = 404
    content_type = "text/html"

    def body(self) -> bytes:
        return WEBMACHINE_404_PAGE


class PropsNotSet(DevnodeError):
    """Riak refused to set props and answered its reason as a JSON string (400).

    ``reason`` is the Erlang atom riak_core returned: ``undefined`` (PUT props of an
    unknown bucket type), ``no_type`` (PUT props of a bucket of an unknown type),
    ``no_default_update`` (PUT props of the ``default`` type).
    """

    status = 400
    content_type = "application/json"

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)

    def body(self) -> bytes:
        return json.dumps(self.reason).encode()


class EntityTooLarge(DevnodeError):
    """A request body exceeds its configured maximum (413); detected while reading."""

    status = 413


class ConditionNotMet(DevnodeError):
    """A PUT's ``If-Match`` or ``If-None-Match`` did not hold (412, empty body, as
    webmachine answers for riak_kv_wm_object)."""

    status = 412

    def body(self) -> bytes:
        return b""


class UnsupportedMediaType(DevnodeError):
    """The Content-Type is not a ``type/subtype`` media type, or props not JSON (415)."""

    status = 415


class InvalidProps(InvalidRequest):
    """A bucket or bucket-type property has a value of the wrong kind (400)."""


class StoreFailure(DevnodeError):
    """The embedded store failed (disk full, map full, I/O error): 500, nothing half-written."""

    status = 500
