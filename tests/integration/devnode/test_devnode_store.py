"""The devnode as a process: durability across kill -9, props across restarts, expiry,
tombstones, limits and the HTTP details only the devnode promises."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from devnode.testing import DevnodeProcess, raw_request
from eventstore.riak import BadRequest, NotFound, RiakClient


def configured(
    devnode_factory: type[DevnodeProcess], directory: Path, text: str, **options: Any
) -> DevnodeProcess:
    """A devnode, not started, with its data in ``directory/data`` and the config file
    ``directory/devnode.toml`` holding ``text``."""
    config = directory / "devnode.toml"
    config.write_text(text)
    return devnode_factory(directory / "data", config=config, **options)


def test_acknowledged_writes_survive_kill_9(
    tmp_path: Path, devnode_factory: type[DevnodeProcess]
) -> None:
    data = tmp_path / "data"
    node = devnode_factory(data).start()
    values = {f"1413813813:1:t:s:{i}": bytes([i]) * 100_000 for i in range(20)}
    with RiakClient([node.url]) as riak:
        for key, value in values.items():
            riak.put("events", "events", key, value)
    node.kill()
    again = devnode_factory(data, port=node.port)
    again.start()
    with RiakClient([again.url]) as riak:
        got = riak.multi_get("events", "events", list(values))
    assert {k: o.value if o else None for k, o in got.items()} == values


def test_props_survive_restart(tmp_path: Path, devnode_factory: type[DevnodeProcess]) -> None:
    data = tmp_path / "data"
    node = devnode_factory(data)
    node.start()
    with RiakClient([node.url]) as riak:
        riak.set_bucket_props("events", "mine", {"r": 2})
        riak.set_bucket_type_props("substreams", {"notfound_ok": False})
    node.stop()
    again = devnode_factory(data, port=node.port)
    again.start()
    with RiakClient([again.url]) as riak:
        assert riak.get_bucket_props("events", "mine")["r"] == 2
        assert riak.get_bucket_props("events", "other")["r"] == 1
        assert riak.get_bucket_type_props("substreams")["notfound_ok"] is False
        assert riak.get_bucket_props("substreams", "s1")["notfound_ok"] is False


def test_invalid_props_are_refused(riak: RiakClient, bucket: str) -> None:
    with pytest.raises(BadRequest):
        riak.set_bucket_props(None, bucket, {"n_val": "three"})
    with pytest.raises(BadRequest):
        riak.set_bucket_props("events", bucket, {"allow_mult": True})


def test_expiry_per_bucket_type(tmp_path: Path, devnode_factory: type[DevnodeProcess]) -> None:
    node = configured(
        devnode_factory,
        tmp_path,
        "[devnode]\npurge_interval_s = 0.3\ntombstone_ttl_s = 0.3\n"
        "[bucket_types.short]\nexpiry_s = 0.6\n"
        "[bucket_types.short.props]\nallow_mult = false\nlast_write_wins = true\n",
    ).start()
    with RiakClient([node.url]) as riak:
        riak.put("short", "b", "k", b"soon gone")
        riak.put("events", "b", "k", b"stays")
        assert riak.get("short", "b", "k").value == b"soon gone"
        time.sleep(0.8)
        with pytest.raises(NotFound):
            riak.get("short", "b", "k")
        assert riak.get("events", "b", "k").value == b"stays"
        riak.put("short", "b", "never-read", b"x")
        deadline = time.monotonic() + 5
        while riak.stats()["devnode_objects"] > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert riak.stats()["devnode_objects"] == 1


def test_tombstone_then_reaped(tmp_path: Path, devnode_factory: type[DevnodeProcess]) -> None:
    text = "[devnode]\npurge_interval_s = 0.2\ntombstone_ttl_s = 0.5\n"
    node = configured(devnode_factory, tmp_path, text).start()
    path = "/types/events/buckets/b/keys/k"
    raw_request(node.url, "PUT", path, b"x", {"Content-Type": "text/plain"})
    assert raw_request(node.url, "DELETE", path)[0] == 204
    status, headers, body = raw_request(node.url, "GET", path)
    assert (status, headers.get("x-riak-deleted"), body) == (404, "true", b"not found\n")
    assert headers["x-riak-vclock"]
    time.sleep(0.8)
    status, headers, _ = raw_request(node.url, "GET", path)
    assert status == 404 and "x-riak-deleted" not in headers
    assert raw_request(node.url, "DELETE", path)[0] == 404


def test_http_details(tmp_path: Path, devnode_factory: type[DevnodeProcess]) -> None:
    node = configured(devnode_factory, tmp_path, "[devnode]\nmax_object_bytes = 1000\n").start()
    path = "/buckets/b/keys/k"
    ct = {"Content-Type": "application/octet-stream"}
    assert raw_request(node.url, "PUT", path, b"x" * 1001, ct)[0] == 413
    assert raw_request(node.url, "PUT", path, b"x", {"Content-Type": "nonsense"})[0] == 415
    assert raw_request(node.url, "PUT", path + "?w=banana", b"x", ct)[0] == 400
    assert raw_request(node.url, "PUT", path + "?returnbody=maybe", b"x", ct)[0] == 400
    status, headers, body = raw_request(
        node.url, "PUT", path + "?returnbody=true", b"abc", {**ct, "X-Riak-Meta-A": "1"}
    )
    assert (status, body, headers["x-riak-meta-a"]) == (200, b"abc", "1")
    assert headers["link"] == '</buckets/b>; rel="up"'
    status, headers, body = raw_request(node.url, "HEAD", path)
    assert (status, body, headers["content-length"]) == (200, b"", "3")
    assert raw_request(node.url, "GET", path, headers={"If-None-Match": headers["etag"]})[0] == 304
    assert raw_request(node.url, "GET", "/ping")[2] == b"OK"
    # conditional PUTs the devnode does not implement are refused, not ignored
    for header in ("If-Modified-Since", "If-Unmodified-Since"):
        when = {header: "Wed, 25 Nov 2026 08:00:00 GMT"}
        status, _, body = raw_request(node.url, "PUT", path, b"new", {**ct, **when})
        assert status == 400 and header.lower().encode() in body, body
    assert raw_request(node.url, "GET", path)[2] == b"abc"


def test_bad_config_fails_to_start_with_a_clear_message(
    tmp_path: Path, devnode_factory: type[DevnodeProcess]
) -> None:
    node = configured(devnode_factory, tmp_path, "[ring]\nring_size = 60\n", start_timeout_s=10)
    with pytest.raises(RuntimeError, match="ring_size must be a power of 2"):
        node.start()
