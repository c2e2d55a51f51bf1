"""The shapes the Riak client speaks in: locations, objects, option values.

Identity is (bucket_type, bucket, key), as in Riak 2+. ``bucket_type`` ``None`` and
``"default"`` both mean the default bucket type (the plain ``/buckets/...`` resource).
The value is opaque bytes; its encoding is the caller's business (``content_type``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

#: Riak's quorum values: an integer, or one of Riak's words.
Quorum = int | Literal["one", "quorum", "all", "default"]

DEFAULT_BUCKET_TYPE = "default"


class Location(NamedTuple):
    """Where an object lives: bucket type, bucket and key (all text)."""

    bucket_type: str
    bucket: str
    key: str

    def __str__(self) -> str:
        return f"{self.bucket_type}/{self.bucket}/{self.key}"


def location(bucket_type: str | None, bucket: str, key: str) -> Location:
    """Build a :class:`Location`, normalising ``None`` to the default bucket type."""
    return Location(bucket_type or DEFAULT_BUCKET_TYPE, bucket, key)


@dataclass(frozen=True)
class RiakObject:
    """One stored object as Riak returned it.

    Attributes:
        location: bucket type, bucket and key.
        value: the stored bytes, exactly as written.
        content_type: the Content-Type given when it was written (without parameters).
        charset: the charset parameter of that Content-Type, if any.
        usermeta: user metadata (``X-Riak-Meta-<name>`` headers), names lower-case
            without the prefix.
        vclock: the opaque vector clock (``X-Riak-Vclock``); pass it back on update.
        etag: the object's vtag (``ETag``, unquoted).
        last_modified: the ``Last-Modified`` header as sent (RFC 1123 date).
        node: the node (base URL) that served the request.
    """

    location: Location
    value: bytes
    content_type: str = "application/octet-stream"
    charset: str | None = None
    usermeta: dict[str, str] = field(default_factory=dict)
    vclock: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    node: str | None = None


@dataclass(frozen=True)
class PutItem:
    """One object to store with :meth:`eventstore.riak.RiakClient.multi_put`."""

    key: str
    value: bytes
    content_type: str = "application/octet-stream"
    usermeta: dict[str, str] = field(default_factory=dict)
    vclock: str | None = None
