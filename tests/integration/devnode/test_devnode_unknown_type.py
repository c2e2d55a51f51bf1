"""Unknown bucket types: the devnode answers each request as Riak 3.2 does, byte for byte,
and the client maps every one of those answers to BucketTypeNotFound.

What Riak answers, and the source files it was read from, is in
devnode/DESIGN.md ("Unknown bucket types").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytest

from devnode.errors import WEBMACHINE_404_PAGE
from devnode.testing import DevnodeProcess, raw_request
from eventstore.riak import BadRequest, BucketTypeNotFound, RiakClient

JSON = {"Content-Type": "application/json"}
PROPS = b'{"props":{"n_val":3}}'
PLAIN = "text/plain"


class Case(NamedTuple):
    """One request and Riak's answer to it: status, content type, body (None: any)."""

    method: str
    path: str
    body: bytes | None
    headers: dict[str, str]
    answer: tuple[int, str, bytes | None]


OBJECT = "/types/nope/buckets/b/keys/k"
UNKNOWN = b"Unknown bucket type: nope"
FORM = b'bucket type PUT must be a JSON object of the form:\n{"props":{...bucket properties...}}\n'
CASES = [
    # riak_kv_wm_object: 404 "Unknown bucket type: T", text/plain, no newline.
    Case("GET", OBJECT, None, {}, (404, PLAIN, UNKNOWN)),
    Case("HEAD", OBJECT, None, {}, (404, PLAIN, b"")),
    Case("PUT", OBJECT, b"v", {"Content-Type": "text/plain"}, (404, PLAIN, UNKNOWN)),
    Case("POST", OBJECT, b"v", {"Content-Type": "text/plain"}, (404, PLAIN, UNKNOWN)),
    Case("DELETE", OBJECT, None, {}, (404, PLAIN, UNKNOWN)),
    # malformed_request runs before the type is looked at.
    Case("PUT", OBJECT, b"v", {}, (400, PLAIN, b"Missing Content-Type request header\n")),
    Case("GET", OBJECT + "?r=banana", None, {}, (400, PLAIN, None)),
    # riak_kv_wm_bucket_type / riak_kv_wm_props: resource_exists is false, so GET gets
    # webmachine's default 404 page, HEAD the same without a body.
    Case("GET", "/types/nope/props", None, {}, (404, "text/html", WEBMACHINE_404_PAGE)),
    Case("HEAD", "/types/nope/props", None, {}, (404, "text/html", b"")),
    Case("GET", "/types/nope/buckets/b/props", None, {}, (404, "text/html", WEBMACHINE_404_PAGE)),
    # PUT goes on to accept the body; riak_core refuses with a reason, JSON-encoded.
    Case("PUT", "/types/nope/props", PROPS, JSON, (400, "application/json", b'"undefined"')),
    Case(
        "PUT", "/types/nope/buckets/b/props", PROPS, JSON, (400, "application/json", b'"no_type"')
    ),
    Case(
        "PUT",
        "/types/default/props",
        PROPS,
        JSON,
        (400, "application/json", b'"no_default_update"'),
    ),
    # The body's form is checked first (malformed_request), the media type next.
    Case("PUT", "/types/nope/props", b"{}", JSON, (400, PLAIN, FORM)),
    Case(
        "PUT",
        "/types/nope/buckets/b/props",
        PROPS,
        {"Content-Type": "text/plain"},
        (415, PLAIN, None),
    ),
    # Key listing is not served (a no-goal): no route, and Riak's dispatcher answers a
    # path it does not know with webmachine's page too.
    Case(
        "GET",
        "/types/nope/buckets/b/keys?keys=true",
        None,
        {},
        (404, "text/html", WEBMACHINE_404_PAGE),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.method} {c.path}" for c in CASES])
def test_devnode_answers_as_riak(session_devnode: DevnodeProcess, case: Case) -> None:
    status, headers, got = raw_request(
        session_devnode.url, case.method, case.path, case.body, case.headers
    )
    want_status, want_type, want_body = case.answer
    assert (status, headers.get("content-type", "")) == (want_status, want_type)
    if want_body is not None:
        assert got == want_body


def test_known_type_still_answers(session_devnode: DevnodeProcess) -> None:
    assert raw_request(session_devnode.url, "GET", "/types/events/props")[0] == 200
    assert raw_request(session_devnode.url, "GET", "/types/events/buckets/b/props")[0] == 200
    assert raw_request(session_devnode.url, "GET", "/buckets/b/props")[0] == 200


CALLS: dict[str, Callable[[RiakClient], object]] = {
    # the "Unknown bucket type" form (object paths)
    "get": lambda riak: riak.get("nope", "b", "k"),
    "put": lambda riak: riak.put("nope", "b", "k", b"v"),
    "delete": lambda riak: riak.delete("nope", "b", "k"),
    # the plain-page form (GET props) and the JSON reason (PUT props)
    "get_bucket_type_props": lambda riak: riak.get_bucket_type_props("nope"),
    "get_bucket_props": lambda riak: riak.get_bucket_props("nope", "b"),
    "set_bucket_type_props": lambda riak: riak.set_bucket_type_props("nope", {"n_val": 3}),
    "set_bucket_props": lambda riak: riak.set_bucket_props("nope", "b", {"n_val": 3}),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_client_maps_every_answer_to_bucket_type_not_found(
    session_devnode: DevnodeProcess, call: str
) -> None:
    with RiakClient([session_devnode.url]) as riak, pytest.raises(BucketTypeNotFound) as caught:
        CALLS[call](riak)
    assert "nope" in str(caught.value)
    assert caught.value.status in (400, 404)


def test_default_type_props_are_fixed(session_devnode: DevnodeProcess) -> None:
    with RiakClient([session_devnode.url]) as riak, pytest.raises(BadRequest):
        riak.set_bucket_type_props("default", {"n_val": 3})
