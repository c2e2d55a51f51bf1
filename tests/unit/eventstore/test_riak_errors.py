"""The Riak client's status table: each HTTP answer mapped to its error, with details."""

from __future__ import annotations

import pytest

from devnode.errors import WEBMACHINE_404_PAGE
from eventstore.errors import EventStoreError
from eventstore.riak.errors import (
    BadRequest,
    BucketTypeNotFound,
    NotFound,
    Overload,
    PreconditionFailed,
    QuorumNotMet,
    RiakError,
    ServerError,
    Siblings,
    TooLarge,
    Unavailable,
    UnexpectedResponse,
    error_for,
)
from eventstore.riak.types import Location

LOC = Location("events", "events", "1413813813:1:t:s:0")


@pytest.mark.parametrize(
    ("status", "body", "headers", "cls", "retriable"),
    [
        (404, b"not found\n", {}, NotFound, False),
        (404, b"not found\n", {"x-riak-deleted": "true"}, NotFound, False),
        (404, b"Unknown bucket type: x\n", {}, BucketTypeNotFound, False),
        (300, b"Siblings:\nabc\ndef\n", {}, Siblings, False),
        (400, b"Missing Content-Type request header", {}, BadRequest, False),
        (412, b"", {}, PreconditionFailed, False),
        (413, b"object exceeds the limit of 1000 bytes\n", {}, TooLarge, False),
        (503, b"R-value unsatisfied: 0/1\n", {}, QuorumNotMet, True),
        (503, b"PW-value unsatisfied: 1/2\n", {}, QuorumNotMet, True),
        (503, b"Too Many write failures to satisfy W/DW\n", {}, QuorumNotMet, True),
        (503, b"request timed out\n", {}, Unavailable, True),
        (503, b"overload\n", {}, Overload, True),
        (500, b"Error:\noverload\n", {}, Overload, True),
        (429, b"", {}, Overload, True),
        (500, b"Error:\nbadarg\n", {}, ServerError, True),
        (418, b"", {}, UnexpectedResponse, False),
    ],
)
def test_status_table(
    status: int, body: bytes, headers: dict[str, str], cls: type[RiakError], retriable: bool
) -> None:
    error = error_for(status, body, headers, location=LOC, node="http://n1:8098")
    assert type(error) is cls
    assert error.retriable is retriable
    assert isinstance(error, EventStoreError)
    assert "events/events/1413813813:1:t:s:0" in str(error)
    assert "http://n1:8098" in str(error)


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        # GET props of an unknown type: webmachine's plain page, no word of a bucket type.
        (404, WEBMACHINE_404_PAGE, BucketTypeNotFound),
        # PUT props: riak_core's reason as a JSON string.
        (400, b'"undefined"', BucketTypeNotFound),
        (400, b'"no_type"', BucketTypeNotFound),
        (400, b'"not_active"', BucketTypeNotFound),
        # PUT type props with security on.
        (404, b'Cannot modify unknown bucket type: <<"x">>', BucketTypeNotFound),
        # Any other refusal of props stays what it was.
        (400, b'"no_default_update"', BadRequest),
        (400, b'[{"n_val":"must be a positive integer"}]', BadRequest),
        (503, b"overload\n", Overload),
    ],
)
def test_props_answers_of_an_unknown_type(status: int, body: bytes, cls: type[RiakError]) -> None:
    error = error_for(status, body, {}, location=None, node="n", props_of="x")
    assert type(error) is cls
    if cls is BucketTypeNotFound:
        assert "Unknown bucket type: x" in str(error)
        assert error.retriable is False


def test_plain_404_is_an_unknown_type_only_on_props() -> None:
    # On an object path the same page would mean "not found" (Riak never sends it there).
    assert type(error_for(404, WEBMACHINE_404_PAGE, {}, location=LOC, node="n")) is NotFound


def test_tombstone_and_siblings_details() -> None:
    gone = error_for(
        404, b"", {"x-riak-deleted": "true", "x-riak-vclock": "abc="}, location=LOC, node="n"
    )
    assert isinstance(gone, NotFound) and gone.deleted and gone.vclock == "abc="
    siblings = error_for(300, b"Siblings:\nv1\nv2\n", {}, location=LOC, node="n")
    assert isinstance(siblings, Siblings) and siblings.vtags == ("v1", "v2")
