"""Errors of the Riak client: one root, one table from Riak's answers to classes.

Every HTTP answer from Riak (or the devnode) is translated here, in :func:`error_for`,
and nowhere else. Each class says in ``retriable`` whether the same request may succeed
on another node or a little later; the client's retry loop reads only that attribute.

Each error carries the location (bucket_type, bucket, key) and the node it concerns,
so a log line or a traceback names what failed and where.
"""

from __future__ import annotations

from collections.abc import Mapping

from eventstore.errors import EventStoreError
from eventstore.riak.types import Location


class RiakError(EventStoreError):
    """Root of every error raised by :mod:`eventstore.riak` (an ``EventStoreError``)."""

    def __init__(
        self,
        message: str,
        *,
        location: Location | None = None,
        node: str | None = None,
        status: int | None = None,
    ) -> None:
        self.message = message
        self.location = location
        self.node = node
        self.status = status
        super().__init__(self._describe())

    def _describe(self) -> str:
        parts = [self.message]
        if self.location is not None:
            parts.append(f"at {self.location}")
        if self.node is not None:
            parts.append(f"on {self.node}")
        if self.status is not None:
            parts.append(f"(HTTP {self.status})")
        return " ".join(parts)


class NotFound(RiakError):
    """The object does not exist, was deleted (a tombstone) or has expired (404).

    ``deleted`` is true when Riak said ``X-Riak-Deleted: true``; ``vclock`` is then the
    tombstone's vector clock.
    """

    deleted: bool = False
    vclock: str | None = None


class BucketTypeNotFound(RiakError):
    """The bucket type named in the request does not exist (or is not active).

    Riak 3.2 says so in three ways (see devnode/DESIGN.md, "Unknown bucket
    types"): object requests answer 404 ``Unknown bucket type: T``; a GET of props
    answers webmachine's plain 404 page; a PUT of props answers 400 with riak_core's
    reason as a JSON string (``"undefined"``, ``"no_type"``, ``"not_active"``).
    """


class Siblings(RiakError):
    """The object has siblings (300 Multiple Choices); ``vtags`` names them.

    Our bucket types use last_write_wins, so this means a bucket is misconfigured.
    """

    vtags: tuple[str, ...] = ()


class BadRequest(RiakError):
    """Riak refused the request as malformed (400): missing Content-Type, bad option."""


class TooLarge(RiakError):
    """The request's body exceeds the node's limit (413): an object over Riak's
    ``object.size.maximum``, or a props document over the devnode's limit."""


class PreconditionFailed(RiakError):
    """A conditional request's precondition did not hold (412)."""


class Unavailable(RiakError):
    """The node could not serve the request now (503 other than quorum): e.g. timeout."""

    retriable = True


class QuorumNotMet(Unavailable):
    """Too few replicas answered to satisfy r/w/pr/pw/dw (503 "...-value unsatisfied")."""


class Overload(Unavailable):
    """The node sheds load (Riak's overload protection); try another node, later."""


class ServerError(RiakError):
    """Any other 5xx answer: Riak's 500 "Error: ..." for unexpected failures."""

    retriable = True


class UnexpectedResponse(RiakError):
    """An answer the client does not understand (status not in the table)."""


class ConnectionFailed(RiakError):
    """The node could not be reached or dropped the connection mid-request."""

    retriable = True


class RequestTimeout(ConnectionFailed):
    """The node did not answer within the client's socket timeout."""


#: What riak_core answers (as a JSON string, HTTP 400) when props are PUT on a bucket
#: type, or a bucket of a type, that does not exist or is not active.
_NO_TYPE_REASONS = frozenset({'"undefined"', '"no_type"', '"not_active"'})


def error_for(
    status: int,
    body: bytes,
    headers: dict[str, str],
    *,
    location: Location | None,
    node: str,
    props_of: str | None = None,
) -> RiakError:
    """Translate a non-success answer of Riak into the matching :class:`RiakError`.

    Args:
        status: HTTP status code of the answer.
        body: the answer's body (Riak puts a plain-text reason there).
        headers: the answer's headers, names lower-case.
        location: the object or bucket the request concerned, if any.
        node: the node (base URL) that answered.
        props_of: the bucket type, when the request was for props (of the type or of a
            bucket of it): there a 404 can only mean the type does not exist.

    Returns:
        The error to raise. Never raises itself.
    """
    text = body[:512].decode("utf-8", "replace").strip()
    lowered = text.lower()
    cls: type[RiakError]
    if props_of is not None and (status == 404 or (status == 400 and text in _NO_TYPE_REASONS)):
        return BucketTypeNotFound(
            f"Unknown bucket type: {props_of}", location=location, node=node, status=status
        )
    if status == 404:
        if "bucket type" in lowered:
            return BucketTypeNotFound(text, location=location, node=node, status=status)
        deleted = headers.get("x-riak-deleted", "").lower() == "true"
        missing = NotFound(
            "tombstone" if deleted else "not found", location=location, node=node, status=status
        )
        missing.deleted = deleted
        missing.vclock = headers.get("x-riak-vclock")
        return missing
    if status == 300:
        siblings = Siblings("object has siblings", location=location, node=node, status=status)
        siblings.vtags = tuple(line.strip() for line in text.splitlines()[1:] if line.strip())
        return siblings
    if "overload" in lowered and status in (429, 500, 503):
        cls = Overload
    elif status == 503 and ("unsatisfied" in lowered or "too many write failures" in lowered):
        cls = QuorumNotMet
    else:
        cls = _BY_STATUS.get(status) or (ServerError if 500 <= status < 600 else UnexpectedResponse)
    return cls(text or f"HTTP {status}", location=location, node=node, status=status)


#: The one table from Riak's status codes to error classes (special cases above it).
_BY_STATUS: dict[int, type[RiakError]] = {
    400: BadRequest,
    412: PreconditionFailed,
    413: TooLarge,
    429: Overload,
    503: Unavailable,
}


class PartialFailure(RiakError):
    """Some requests of a multi_get / multi_put failed (each after its own retries).

    Attributes:
        failures: key -> the error of that key.
        results: key -> what succeeded (for multi_get, ``None`` for not found).
        all_retriable: every failure was retriable (repeating the whole call may help).
    """

    failures: dict[str, RiakError]
    results: dict[str, object]
    all_retriable: bool = False

    @classmethod
    def of(
        cls, failures: dict[str, RiakError], results: Mapping[str, object], *, what: str
    ) -> PartialFailure:
        """Build one from per-key failures."""
        first_key, first = next(iter(failures.items()))
        error = cls(
            f"{what}: {len(failures)} failed, first {first_key!r}: {first}",
            location=first.location,
            node=first.node,
        )
        error.failures = dict(failures)
        error.results = dict(results)
        error.all_retriable = all(e.retriable for e in failures.values())
        return error
