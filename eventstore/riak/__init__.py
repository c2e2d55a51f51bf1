"""A client of Riak KV's HTTP API (and of the devnode, which serves the same subset).

Identity is (bucket_type, bucket, key); options keep Riak's names (r, w, pr, pw, dw,
notfound_ok, basic_quorum, timeout, returnbody). Pooled keep-alive connections,
parallel multi_get / multi_put, retries on another node with backoff and a deadline,
and one error hierarchy (:mod:`eventstore.riak.errors`).

    with RiakClient(["http://127.0.0.1:8098"]) as riak:
        riak.put("events", "events", "1413813813:1:t:s:0", blob)
        obj = riak.get("events", "events", "1413813813:1:t:s:0")
"""

from __future__ import annotations

from eventstore.riak.client import RiakClient
from eventstore.riak.errors import (
    BadRequest,
    BucketTypeNotFound,
    ConnectionFailed,
    NotFound,
    Overload,
    PartialFailure,
    PreconditionFailed,
    QuorumNotMet,
    RequestTimeout,
    RiakError,
    ServerError,
    Siblings,
    TooLarge,
    Unavailable,
    UnexpectedResponse,
)
from eventstore.riak.retry import Retry
from eventstore.riak.settings import RiakSettings
from eventstore.riak.types import Location, PutItem, RiakObject

__all__ = [
    "BadRequest",
    "BucketTypeNotFound",
    "ConnectionFailed",
    "Location",
    "NotFound",
    "Overload",
    "PartialFailure",
    "PreconditionFailed",
    "PutItem",
    "QuorumNotMet",
    "RequestTimeout",
    "Retry",
    "RiakClient",
    "RiakError",
    "RiakObject",
    "RiakSettings",
    "ServerError",
    "Siblings",
    "TooLarge",
    "Unavailable",
    "UnexpectedResponse",
]
