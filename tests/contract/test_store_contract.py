"""The store behaviours our components rely on, for the devnode and for any real Riak.

Runs against the session devnode, or unchanged against a real cluster with
``pytest tests/contract --riak-url=http://host:8098`` (the bucket types events, epochs
and substreams of ../shared/DESIGN.md section 3 must exist there). Every test works in
a bucket of its own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any
from urllib.parse import urlsplit

import pytest

from devnode.testing import free_port, raw_request
from eventstore.riak import (
    BadRequest,
    BucketTypeNotFound,
    NotFound,
    PreconditionFailed,
    PutItem,
    Retry,
    RiakClient,
)
from eventstore.testing import DESIGNED_CHUNK_PROPS

CHUNK_KEY = "1413813813:1:type1:subtype1:0"
VALUE_400K = os.urandom(400 * 1024)


def test_ping(riak: RiakClient) -> None:
    assert riak.ping()


def test_round_trip_400k_binary_value(riak: RiakClient, bucket: str) -> None:
    riak.put("events", bucket, CHUNK_KEY, VALUE_400K, content_type="application/x-sereal")
    got = riak.get("events", bucket, CHUNK_KEY)
    assert got.value == VALUE_400K
    assert got.content_type == "application/x-sereal"
    assert got.vclock


def test_every_byte_value_survives(riak: RiakClient, bucket: str) -> None:
    value = bytes(range(256)) * 4 + b"\x00\r\n\r\n"
    riak.put("events", bucket, "bytes", value)
    assert riak.get("events", bucket, "bytes").value == value


def test_empty_value(riak: RiakClient, bucket: str) -> None:
    riak.put("events", bucket, "empty", b"", content_type="text/plain")
    assert riak.get("events", bucket, "empty").value == b""


def test_content_type_charset_and_usermeta_preserved(riak: RiakClient, bucket: str) -> None:
    riak.put(
        "epochs",
        bucket,
        "1413813813-1",
        b"type1:subtype1:0",
        content_type="text/plain; charset=utf-8",
        usermeta={"chunks": "1", "writer": "relocator-7"},
    )
    got = riak.get("epochs", bucket, "1413813813-1")
    assert got.content_type == "text/plain"
    assert got.charset == "utf-8"
    assert got.usermeta == {"chunks": "1", "writer": "relocator-7"}
    assert got.etag
    assert got.last_modified


def test_missing_key_is_not_found(riak: RiakClient, bucket: str) -> None:
    with pytest.raises(NotFound) as caught:
        riak.get("events", bucket, "never-written")
    assert caught.value.location is not None
    assert caught.value.location.key == "never-written"
    assert caught.value.status == 404


def test_not_found_after_delete(riak: RiakClient, bucket: str) -> None:
    riak.put("events", bucket, CHUNK_KEY, b"x")
    assert riak.delete("events", bucket, CHUNK_KEY) is True
    with pytest.raises(NotFound):
        riak.get("events", bucket, CHUNK_KEY)
    assert riak.delete("events", bucket, CHUNK_KEY) is False


def test_write_after_delete_is_visible(riak: RiakClient, bucket: str) -> None:
    riak.put("events", bucket, "k", b"one")
    riak.delete("events", bucket, "k")
    riak.put("events", bucket, "k", b"two")
    assert riak.get("events", bucket, "k").value == b"two"


def test_returnbody(riak: RiakClient, bucket: str) -> None:
    assert riak.put("events", bucket, "a", b"no body") is None
    stored = riak.put(
        "events", bucket, "b", b"with body", content_type="text/plain", returnbody=True
    )
    assert stored is not None
    assert stored.value == b"with body"
    assert stored.content_type == "text/plain"
    assert stored.vclock


def test_typed_and_default_buckets_are_distinct(riak: RiakClient, bucket: str) -> None:
    riak.put(None, bucket, "same-key", b"default type")
    riak.put("events", bucket, "same-key", b"events type")
    assert riak.get(None, bucket, "same-key").value == b"default type"
    assert riak.get("default", bucket, "same-key").value == b"default type"
    assert riak.get("events", bucket, "same-key").value == b"events type"


@pytest.mark.parametrize(
    "key",
    [
        CHUNK_KEY,
        "1413813813-1",
        "1413813813:2:type3::0",
        "with/slash",
        "with space",
        "percent%41literal",
        "query?and#hash&amp=1",
        "plus+sign",
        "unicode-é-🙂",
    ],
)
def test_keys_are_url_quoted(riak: RiakClient, bucket: str, key: str) -> None:
    riak.put("events", bucket, key, key.encode())
    assert riak.get("events", bucket, key).value == key.encode()


def test_quoted_and_unquoted_keys_are_different_objects(riak: RiakClient, bucket: str) -> None:
    riak.put("events", bucket, "a:b", b"colon")
    riak.put("events", bucket, "a%3Ab", b"percent")
    assert riak.get("events", bucket, "a:b").value == b"colon"
    assert riak.get("events", bucket, "a%3Ab").value == b"percent"


@pytest.mark.parametrize("bucket_type", ["events", "epochs"])
def test_bucket_type_props_as_designed(riak: RiakClient, bucket_type: str) -> None:
    props = riak.get_bucket_type_props(bucket_type)
    expected = DESIGNED_CHUNK_PROPS
    assert {k: props.get(k) for k in expected} == expected


def test_substreams_type_never_has_siblings(riak: RiakClient) -> None:
    props = riak.get_bucket_type_props("substreams")
    assert props["allow_mult"] is False
    assert props["last_write_wins"] is True
    assert props["n_val"] in (1, 2, 3)


def test_epochs_type_has_a_postcommit_hook(riak: RiakClient) -> None:
    assert riak.get_bucket_type_props("epochs")["postcommit"]


def test_typed_bucket_inherits_type_props(riak: RiakClient, bucket: str) -> None:
    props = riak.get_bucket_props("events", bucket)
    assert props["last_write_wins"] is True
    assert props["n_val"] == 3


def test_bucket_props_set_and_read_back(riak: RiakClient, bucket: str) -> None:
    riak.set_bucket_props(None, bucket, {"n_val": 2, "notfound_ok": False})
    props = riak.get_bucket_props(None, bucket)
    assert props["n_val"] == 2
    assert props["notfound_ok"] is False


def test_unknown_bucket_type(riak: RiakClient, bucket: str) -> None:
    with pytest.raises(BucketTypeNotFound):
        riak.get("no_such_type_x", bucket, "k")
    with pytest.raises(BucketTypeNotFound):
        riak.get_bucket_type_props("no_such_type_x")


def test_unknown_bucket_type_on_every_request(riak: RiakClient, bucket: str) -> None:
    # Riak answers these three ways (devnode/DESIGN.md, "Unknown bucket
    # types"); nothing may be created by any of them.
    calls: list[Callable[[], object]] = [
        lambda: riak.put("no_such_type_x", bucket, "k", b"v"),
        lambda: riak.delete("no_such_type_x", bucket, "k"),
        lambda: riak.get_bucket_props("no_such_type_x", bucket),
        lambda: riak.set_bucket_props("no_such_type_x", bucket, {"n_val": 3}),
        lambda: riak.set_bucket_type_props("no_such_type_x", {"n_val": 3}),
    ]
    for call in calls:
        with pytest.raises(BucketTypeNotFound):
            call()
    with pytest.raises(BucketTypeNotFound):
        riak.get_bucket_type_props("no_such_type_x")


def test_last_write_wins_overwrite(riak: RiakClient, bucket: str) -> None:
    for i in range(5):
        riak.put("events", bucket, "lww", f"v{i}".encode())
    assert riak.get("events", bucket, "lww").value == b"v4"


def test_overwrite_with_vclock(riak: RiakClient, bucket: str) -> None:
    riak.put("events", bucket, "vc", b"first")
    first = riak.get("events", bucket, "vc")
    riak.put("events", bucket, "vc", b"second", vclock=first.vclock)
    assert riak.get("events", bucket, "vc").value == b"second"


@pytest.mark.parametrize("bucket_type", ["epochs", "events"])
def test_conditional_put_refuses_a_stale_write(
    riak: RiakClient, bucket: str, bucket_type: str
) -> None:
    """If-Match / If-None-Match on PUT (412 when they do not hold; the metadata merge
    relies on them so that a late PUT cannot overwrite a newer value)."""
    key = "1413813813-1"
    riak.put(bucket_type, bucket, key, b"v1", content_type="text/plain", if_none_match="*")
    with pytest.raises(PreconditionFailed):
        riak.put(
            bucket_type, bucket, key, b"v1-again", content_type="text/plain", if_none_match="*"
        )
    first = riak.get(bucket_type, bucket, key)
    assert first.etag and first.value == b"v1"
    riak.put(bucket_type, bucket, key, b"v2", content_type="text/plain", if_match=first.etag)
    second = riak.get(bucket_type, bucket, key)
    assert second.value == b"v2" and second.etag != first.etag
    with pytest.raises(PreconditionFailed):  # read before v2: refused, v2 stays
        riak.put(bucket_type, bucket, key, b"stale", content_type="text/plain", if_match=first.etag)
    with pytest.raises(PreconditionFailed):
        riak.put(
            bucket_type, bucket, key, b"v3", content_type="text/plain", if_none_match=second.etag
        )
    assert riak.get(bucket_type, bucket, key).value == b"v2"
    riak.put(bucket_type, bucket, key, b"v3", content_type="text/plain", if_match="*")
    assert riak.get(bucket_type, bucket, key).value == b"v3"
    with pytest.raises(PreconditionFailed):
        riak.put(
            bucket_type, bucket, "never-written", b"x", content_type="text/plain", if_match="*"
        )
    with pytest.raises(NotFound):
        riak.get(bucket_type, bucket, "never-written")


def test_concurrent_puts_to_one_key_leave_one_value(riak: RiakClient, bucket: str) -> None:
    values = [f"writer-{i}".encode() * 1000 for i in range(16)]
    barrier = threading.Barrier(len(values))

    def write(value: bytes) -> None:
        barrier.wait()
        riak.put("events", bucket, "contended", value)

    threads = [threading.Thread(target=write, args=(v,)) for v in values]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert riak.get("events", bucket, "contended").value in values


def test_concurrent_puts_to_many_keys(riak: RiakClient, bucket: str) -> None:
    items = [PutItem(f"1413813813:1:t:s:{i}", os.urandom(50_000)) for i in range(40)]
    riak.multi_put("events", bucket, items)
    got = riak.multi_get("events", bucket, [item.key for item in items])
    assert {k: o.value if o else None for k, o in got.items()} == {i.key: i.value for i in items}


def test_multi_get_with_missing_keys(riak: RiakClient, bucket: str) -> None:
    riak.put("events", bucket, "present-1", b"1")
    riak.put("events", bucket, "present-2", b"2")
    got = riak.multi_get("events", bucket, ["present-1", "absent", "present-2", "absent-too"])
    assert list(got) == ["present-1", "absent", "present-2", "absent-too"]
    assert got["present-1"] is not None and got["present-1"].value == b"1"
    assert got["present-2"] is not None and got["present-2"].value == b"2"
    assert got["absent"] is None and got["absent-too"] is None


def test_put_without_content_type_is_400(riak_url: str, bucket: str) -> None:
    status, _, _ = raw_request(riak_url, "PUT", f"/types/events/buckets/{bucket}/keys/k", b"x")
    assert status == 400


def test_put_then_get_with_raw_http_headers(riak_url: str, bucket: str) -> None:
    path = f"/types/events/buckets/{bucket}/keys/raw"
    status, _, _ = raw_request(
        riak_url, "PUT", path, b"raw", {"Content-Type": "application/octet-stream"}
    )
    assert status == 204
    status, headers, body = raw_request(riak_url, "GET", path)
    assert (status, body) == (200, b"raw")
    assert headers["content-type"] == "application/octet-stream"
    for name in ("x-riak-vclock", "etag", "last-modified"):
        assert name in headers
    status, _, _ = raw_request(riak_url, "DELETE", path)
    assert status == 204
    status, _, body = raw_request(riak_url, "GET", path)
    assert status == 404
    assert body.strip() == b"not found"


def test_quorum_above_n_val_is_bad_request(riak: RiakClient, bucket: str) -> None:
    with pytest.raises(BadRequest):
        riak.put("events", bucket, "k", b"x", w=4)


def test_riak_options_are_accepted(riak: RiakClient, bucket: str) -> None:
    riak.put("events", bucket, "opts", b"x", w=3, dw=0, pw=0, timeout=5000)
    got = riak.get(
        "events", bucket, "opts", r=1, pr=0, notfound_ok=True, basic_quorum=True, timeout=5000
    )
    assert got.value == b"x"
    riak.put("events", bucket, "words", b"y", w="quorum", dw="one", pw="default")
    assert riak.get("events", bucket, "words", r="one").value == b"y"


def test_retry_goes_to_another_node_when_one_is_dead(riak_url: str, bucket: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with RiakClient([dead, riak_url], retry=Retry(max_tries=3, deadline_s=10.0)) as client:
        for i in range(6):
            client.put("events", bucket, f"k{i}", b"v")
            assert client.get("events", bucket, f"k{i}").value == b"v"
        assert dead in client.nodes.cooling()
        assert client.ping()


def test_stats_answers_json(riak: RiakClient) -> None:
    stats = riak.stats()
    assert "ring_members" in stats
    assert stats["ring_num_partitions"] >= 8


class Relay:
    """A TCP relay on a free loopback port (``url``) in front of the store: counts the
    connections it accepted, and :meth:`drop` closes every one of them, as a server
    closes its idle keep-alive connections. Bytes pass unchanged (Riak or the devnode)."""

    def __init__(self, upstream: str) -> None:
        up = urlsplit(upstream)
        self._upstream = (up.hostname or "127.0.0.1", up.port or 8098)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.accepted = 0
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            self.accepted += 1
            self._open += [client, server]
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            sock.close()

    def drop(self) -> None:
        for sock in self._open:
            with contextlib.suppress(OSError):  # closed already
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._listener.close()
        self.drop()


def test_a_kept_connection_is_reused_and_one_the_server_closed_is_replaced(
    riak_url: str, bucket: str
) -> None:
    """Keep-alive: one connection for a run of requests; a kept connection the server
    has closed is replaced at once, without a try of the retry policy (one allowed)."""
    with (
        Relay(riak_url) as relay,
        RiakClient([relay.url], retry=Retry(max_tries=1, deadline_s=10.0)) as client,
    ):
        for i in range(20):
            client.put("events", bucket, f"k{i}", b"v" * 100, usermeta={"n": str(i)})
            got = client.get("events", bucket, f"k{i}")
            assert (got.value, got.usermeta) == (b"v" * 100, {"n": str(i)})
        assert relay.accepted == 1
        relay.drop()
        client.put("events", bucket, "after", VALUE_400K)  # a large body: sent in two parts
        assert client.get("events", bucket, "after").value == VALUE_400K
        assert relay.accepted == 2


def test_requests_build_no_http_client_machinery(riak: RiakClient, bucket: str) -> None:
    """A request is its bytes and its answer parsed in place (``eventstore/riak/wire.py``):
    no ``http.client`` response, buffered file or ``email`` header parser per request."""
    riak.put("events", bucket, "warm", b"w")  # a kept connection to reuse
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        name = frame.f_code.co_filename
        if event == "call" and name.endswith(("http/client.py", "email/feedparser.py")):
            called.append(f"{name}:{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        riak.put("events", bucket, "k", b"v", usermeta={"a": "1"})
        assert riak.get("events", bucket, "k").value == b"v"
        with pytest.raises(NotFound):
            riak.get("events", bucket, "absent")
        assert riak.delete("events", bucket, "k") is True
    finally:
        sys.setprofile(None)
    assert called == []
