"""The devnode as an operated process: bad bodies are refused cleanly (deep JSON: 400,
oversized: 413 while the body is still arriving), /healthz, /readyz and /metrics are
served, and a second process on the same data directory is refused."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from devnode.defaults import MAX_PROPS_BYTES, MAX_PROPS_DEPTH
from devnode.testing import DevnodeProcess, free_port, raw_request
from eventstore.riak import NotFound, RiakClient, TooLarge
from fleet.harness import environment_without

TEN_MB = 10 * 1024**2
OBJECT_LIMIT = 1024**2


def nested(depth: int) -> bytes:
    """A props document whose "x" prop is ``depth`` arrays deep (``depth + 2`` in all)."""
    return b'{"props":{"x":' + b"[" * depth + b"]" * depth + b"}}"


@pytest.mark.parametrize(
    "body",
    [nested(100_000), nested(MAX_PROPS_DEPTH - 1)],
    ids=["far-past-the-parser", "just-past-the-limit"],
)
def test_deeply_nested_props_are_a_400(session_devnode: DevnodeProcess, body: bytes) -> None:
    path = "/types/events/buckets/deep/props"
    status, _, text = raw_request(
        session_devnode.url, "PUT", path, body, {"Content-Type": "application/json"}
    )
    assert (status, text) == (
        400,
        f"bucket props JSON nests deeper than {MAX_PROPS_DEPTH} levels\n".encode(),
    )
    # Nothing was set, and the node still serves.
    with RiakClient([session_devnode.url]) as riak:
        assert "x" not in riak.get_bucket_props("events", "deep")


def test_props_nested_within_the_limit_are_stored(session_devnode: DevnodeProcess) -> None:
    body = nested(MAX_PROPS_DEPTH - 2)
    status, _, _ = raw_request(
        session_devnode.url,
        "PUT",
        "/types/events/buckets/deep-ok/props",
        body,
        {"Content-Type": "application/json"},
    )
    assert status == 204


def refused_midway(port: int, path: str, *, limit: int, chunked: bool) -> bytes:
    """Start a 10 MB PUT to ``path``, send only a little past ``limit`` of it, and return
    the server's whole answer. A server that waited for the rest would never answer:
    the read times out and the test fails."""
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {TEN_MB}"
    head = (
        f"PUT {path} HTTP/1.1\r\nHost: devnode\r\nContent-Type: application/json\r\n"
        f"{framing}\r\n\r\n"
    ).encode()
    part = b"x" * 65536
    if chunked:
        part = b"10000\r\n" + part + b"\r\n"
    # With Content-Length the size is known from the head; chunked, only from the bytes.
    parts = limit // 65536 + 1 if chunked else 1
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + part * parts)
        answer = sock.makefile("rb")
        status_line = answer.readline()
        headers = {}
        for line in iter(answer.readline, b"\r\n"):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        return status_line + answer.read(int(headers["content-length"]))


@pytest.fixture(scope="module")
def small_devnode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevnodeProcess]:
    """A devnode whose objects may be at most ``OBJECT_LIMIT`` bytes."""
    root = tmp_path_factory.mktemp("small-devnode")
    config = root / "devnode.toml"
    config.write_text(f"[devnode]\nmax_object_bytes = {OBJECT_LIMIT}\n")
    node = DevnodeProcess(root / "data", config=config).start()
    yield node
    node.stop()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(
    ("path", "limit"),
    [
        ("/types/events/buckets/b/keys/k", OBJECT_LIMIT),
        ("/types/events/buckets/b/props", MAX_PROPS_BYTES),
        ("/types/events/props", MAX_PROPS_BYTES),
    ],
    ids=["object", "bucket-props", "type-props"],
)
def test_ten_mb_body_is_refused_while_it_arrives(
    small_devnode: DevnodeProcess, path: str, limit: int, chunked: bool
) -> None:
    answer = refused_midway(small_devnode.port, path, limit=limit, chunked=chunked)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert answer.endswith(f"exceeds the limit of {limit} bytes\n".encode())
    assert small_devnode.ping()


def test_client_gets_too_large_for_an_oversized_object(small_devnode: DevnodeProcess) -> None:
    with (
        RiakClient([small_devnode.url]) as riak,
        pytest.raises(TooLarge, match="exceeds the limit"),
    ):
        riak.put("events", "big", "k", b"x" * TEN_MB)


def scrape(node: DevnodeProcess) -> dict[str, float]:
    """Every sample of /metrics, by name and labels."""
    status, _, text = raw_request(node.url, "GET", "/metrics")
    assert status == 200
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def test_health_readiness_and_metrics(
    tmp_path: Path, devnode_factory: type[DevnodeProcess]
) -> None:
    node = devnode_factory(tmp_path / "data")
    node.start()
    for path in ("/healthz", "/readyz"):
        answer = raw_request(node.url, "GET", path)
        assert (answer.status, answer.body) == (200, b"ok\n"), path
    with RiakClient([node.url]) as riak:
        riak.put("events", "m", "k", b"12345")
        riak.get("events", "m", "k")
        with pytest.raises(NotFound):
            riak.get("events", "m", "missing")
        stats = riak.stats()
    samples = scrape(node)
    assert not [name for name in samples if "_created" in name]
    assert samples["devnode_puts_total"] == 1
    assert samples["devnode_gets_total"] == 2
    assert samples["devnode_objects"] == 1
    assert samples["devnode_object_bytes_written_total"] == 5
    assert samples["devnode_store_used_bytes"] > 0
    assert samples["devnode_http_requests_total{kind=object,method=PUT,status=204}"] == 1
    assert samples["devnode_http_requests_total{kind=object,method=GET,status=200}"] == 1
    assert samples["devnode_http_requests_total{kind=object,method=GET,status=404}"] == 1
    assert samples["devnode_http_requests_total{kind=readyz,method=GET,status=200}"] == 1
    # Every hook count of /stats is a counter of /metrics, with the same value.
    hook_stats = {
        k: v for k, v in stats.items() if k.startswith("devnode_hook_") and k.endswith("_total")
    }
    assert len(hook_stats) == 13  # the twin's counters of erlang_hooks/README.md
    for name, value in hook_stats.items():
        assert samples[name] == value


def test_second_devnode_on_one_data_dir_is_refused(
    tmp_path: Path, devnode_factory: type[DevnodeProcess]
) -> None:
    data = tmp_path / "data"
    first = devnode_factory(data)
    first.start()
    with RiakClient([first.url]) as riak:
        riak.put("events", "lock", "k", b"kept")
    argv = [sys.executable, "-m", "devnode", "--data-dir", str(data)]
    second = subprocess.run(
        [*argv, "--listen", f"127.0.0.1:{free_port()}"],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment_without(),
        check=False,
    )
    assert second.returncode != 0
    assert second.stderr.strip().splitlines() == [
        f"Error: data directory {str(data)!r} is in use by process {first.pid}; "
        "stop it first or give this process its own directory"
    ]
    assert "Traceback" not in second.stdout + second.stderr
    with RiakClient([first.url]) as riak:
        assert riak.get("events", "lock", "k").value == b"kept"
